package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

const linkColumns = `id, subject, file_id, coalesce(version, 0), expires_at, revoked_at, created_at,
	coalesce(agent_id, ''), coalesce(run_id, '')`

func scanLink(row pgx.Row) (*agentfs.Link, error) {
	var l agentfs.Link
	err := row.Scan(&l.ID, &l.Subject, &l.FileID, &l.Version, &l.ExpiresAt, &l.RevokedAt, &l.CreatedAt,
		&l.By.AgentID, &l.By.RunID)
	if err != nil {
		return nil, Translate(err)
	}
	return &l, nil
}

// linkSecretBytes is the randomness of a share link's secret (256 bits).
const linkSecretBytes = 32

// secretHash is what is stored of a link's secret.
func secretHash(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// CreateLinkTx makes a share link to the subject's live file in tx, to its
// current content or to version req.Version. The returned link carries its
// secret, which nothing stores: only its SHA-256 is kept.
func (s *Store) CreateLinkTx(ctx context.Context, tx pgx.Tx, req agentfs.NewLink) (*agentfs.Link, error) {
	f, err := s.liveForChange(ctx, tx, req.Subject, req.FileID, "")
	if err != nil {
		return nil, fmt.Errorf("create link: %w", err)
	}
	if req.Version != 0 {
		if _, err := s.version(ctx, tx, req.Subject, f.ID, req.Version); err != nil {
			return nil, fmt.Errorf("create link: %w", err)
		}
	}
	var raw [linkSecretBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("create link: %w", err)
	}
	secret := base64.RawURLEncoding.EncodeToString(raw[:])
	l, err := scanLink(tx.QueryRow(ctx, `INSERT INTO links (id, subject, file_id, version, secret_hash, expires_at, agent_id, run_id)
		VALUES ($1, $2, $3, nullif($4, 0), $5, now() + make_interval(secs => $6), nullif($7, ''), nullif($8, ''))
		RETURNING `+linkColumns,
		NewID("lnk"), req.Subject, f.ID, req.Version, secretHash(secret), req.ExpiresIn.Seconds(), req.By.AgentID, req.By.RunID))
	if err != nil {
		return nil, fmt.Errorf("create link: %w", err)
	}
	l.Secret = secret
	return l, nil
}

// Links lists the links of the subject's file, newest first (without
// secrets); an unknown file is agentfs.ErrNotFound.
func (s *Store) Links(ctx context.Context, subject, fileID string) ([]*agentfs.Link, error) {
	args := pgx.NamedArgs{"file_id": fileID, "subject": subject}
	rows, err := s.pool.Query(ctx, `SELECT `+linkColumns+` FROM links WHERE file_id = @file_id AND subject = @subject
		AND EXISTS (SELECT 1 FROM files f WHERE f.id = links.file_id AND `+visiblePath(ctx, "f.path", args)+`)
		ORDER BY created_at DESC, id DESC LIMIT 1000`, args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list links: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Link, error) { return scanLink(r) })
	if err == nil && len(out) == 0 {
		_, err = s.File(ctx, subject, fileID) // no links, or no such file (404)
	}
	return out, Translate(err)
}

// RevokeLinkTx revokes the subject's link in tx; revoking a revoked link
// returns it unchanged (changed false).
func (s *Store) RevokeLinkTx(ctx context.Context, tx pgx.Tx, subject, id string) (*agentfs.Link, bool, error) {
	if err := checkID(id); err != nil {
		return nil, false, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject}
	l, err := scanLink(tx.QueryRow(ctx, `SELECT `+linkColumns+` FROM links WHERE id = @id AND subject = @subject
		AND EXISTS (SELECT 1 FROM files f WHERE f.id = links.file_id AND `+visiblePath(ctx, "f.path", args)+`) FOR UPDATE OF links`, args))
	if err != nil {
		return nil, false, fmt.Errorf("revoke link: %w", err)
	}
	if l.RevokedAt != nil {
		return l, false, nil
	}
	l, err = scanLink(tx.QueryRow(ctx, `UPDATE links SET revoked_at = now() WHERE id = $1 RETURNING `+linkColumns, id))
	if err != nil {
		return nil, false, fmt.Errorf("revoke link: %w", err)
	}
	return l, true, nil
}

// ResolveLink finds what a link's secret shares. An unknown, expired or
// revoked link, a deleted (or expired) file or a swept version is
// agentfs.ErrLinkGone; a blocked file is a *agentfs.BlockedError. Any
// string may be asked: it is only ever hashed.
func (s *Store) ResolveLink(ctx context.Context, secret string) (*agentfs.Shared, error) {
	l, err := scanLink(s.pool.QueryRow(ctx, `SELECT `+linkColumns+` FROM links
		WHERE secret_hash = $1 AND revoked_at IS NULL AND expires_at > now()`, secretHash(secret)))
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil, agentfs.ErrLinkGone
	}
	if err != nil {
		return nil, err
	}
	f, err := s.File(ctx, l.Subject, l.FileID)
	if errors.Is(err, agentfs.ErrNotFound) || err == nil && !f.Live() {
		return nil, agentfs.ErrLinkGone
	}
	if err != nil {
		return nil, err
	}
	if f.Blocked {
		return nil, &agentfs.BlockedError{FileID: f.ID, Reason: f.BlockReason}
	}
	n := l.Version
	if n == 0 {
		n = f.Version
	}
	v, err := s.Version(ctx, l.Subject, f.ID, n)
	if errors.Is(err, agentfs.ErrNotFound) {
		return nil, agentfs.ErrLinkGone
	}
	if err != nil {
		return nil, err
	}
	return &agentfs.Shared{Link: l, File: f, Version: v}, nil
}
