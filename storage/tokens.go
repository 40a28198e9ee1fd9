package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
)

// tokenPrefix marks AgentFS bearer tokens so they are recognisable in a
// secret scanner.
const tokenPrefix = "afs_"

// ChannelToken carries the hex SHA-256 of a token that was created,
// revoked, changed or deleted (a trigger on tokens sends it, whoever
// changes the row, as that transaction commits), or an empty payload when
// every token may have changed. The token cache follows it.
const ChannelToken = "agentfs_token"

// tokenCacheMax bounds how many tokens an instance remembers, of each kind
// (taken and refused).
const tokenCacheMax = 10_000

// DefaultTokenCacheTTL is how long a looked-up token is trusted at most when
// Config.TokenCacheTTL is zero.
const DefaultTokenCacheTTL = 10 * time.Second

// CreateToken makes a bearer token for subject with the given scopes. The
// token itself is returned once; only its SHA-256 is stored.
func (s *Store) CreateToken(ctx context.Context, subject string, scopes []string) (token, id string, err error) {
	if subject == "" {
		return "", "", errors.New("create token: subject is required")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", "", fmt.Errorf("create token: %w", err)
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	id = NewID("tok")
	sum := sha256.Sum256([]byte(token))
	_, err = s.pool.Exec(ctx, `INSERT INTO tokens (id, subject, token_hash, scopes) VALUES ($1, $2, $3, $4)`,
		id, subject, sum[:], scopes)
	if err != nil {
		return "", "", Translate(fmt.Errorf("create token: %w", err))
	}
	if s.tokens != nil {
		s.tokens.Notified(hex.EncodeToString(sum[:])) // now, not when the notification comes back
	}
	return token, id, nil
}

// RevokeToken revokes a token given either itself or its id (tok_…).
// Revoking an unknown token is agentfs.ErrNotFound. Every instance stops
// taking the token as soon as this commits: a trigger on tokens notifies
// their caches.
func (s *Store) RevokeToken(ctx context.Context, tokenOrID string) error {
	sum := sha256.Sum256([]byte(tokenOrID))
	rows, err := s.pool.Query(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
		WHERE token_hash = $1 OR id = $2 RETURNING token_hash`, sum[:], tokenOrID)
	if err != nil {
		return Translate(fmt.Errorf("revoke token: %w", err))
	}
	revoked, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return Translate(fmt.Errorf("revoke token: %w", err))
	}
	if len(revoked) == 0 {
		return fmt.Errorf("revoke token: %w", agentfs.ErrNotFound)
	}
	if s.tokens != nil {
		// This instance forgets it now, not when its own notification
		// comes back.
		for _, h := range revoked {
			s.tokens.Notified(hex.EncodeToString(h))
		}
	}
	return nil
}

// Authenticate returns the principal a bearer token stands for. An unknown or
// revoked token is agentfs.ErrNotFound. The lookup is by the token's
// SHA-256, so the time it takes says nothing about the token. A token
// looked up lately, taken or refused, is answered from the instance's
// cache (package tokencache), which forgets it as soon as a change to it
// commits on any instance: it follows ChannelToken.
func (s *Store) Authenticate(ctx context.Context, token string) (agentfs.Principal, error) {
	if !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return agentfs.Principal{}, agentfs.ErrNotFound
	}
	sum := sha256.Sum256([]byte(token))
	c := s.tokens
	if c == nil {
		return s.lookupToken(ctx, sum)
	}
	s.tokensOnce.Do(func() { s.notify.Follow(ChannelToken, c) })
	if p, ok := c.Get(sum); ok {
		s.counters.tokenHits.Add(1)
		return p, nil
	}
	if c.Refused(sum) {
		s.counters.tokenHits.Add(1)
		return agentfs.Principal{}, agentfs.ErrNotFound
	}
	gen, keep := c.Begin()
	p, err := s.lookupToken(ctx, sum)
	switch {
	case !keep:
	case err == nil:
		c.Put(sum, p, gen)
	case errors.Is(err, agentfs.ErrNotFound):
		c.Refuse(sum, gen)
	}
	return p, err
}

// Trusted returns the principal of a token this instance's cache holds as
// good, without asking Postgres; ok is false for any other token.
func (s *Store) Trusted(token string) (agentfs.Principal, bool) {
	if s.tokens == nil || !strings.HasPrefix(token, tokenPrefix) || len(token) > 128 {
		return agentfs.Principal{}, false
	}
	return s.tokens.Get(sha256.Sum256([]byte(token)))
}

func (s *Store) lookupToken(ctx context.Context, sum [32]byte) (agentfs.Principal, error) {
	s.counters.tokenLookups.Add(1)
	var p agentfs.Principal
	err := s.pool.QueryRow(ctx, `SELECT id, subject, scopes FROM tokens WHERE token_hash = $1 AND revoked_at IS NULL`,
		sum[:]).Scan(&p.TokenID, &p.Subject, &p.Grant.Scopes)
	if err != nil {
		return agentfs.Principal{}, Translate(fmt.Errorf("authenticate: %w", err))
	}
	p.Grant.Scopes = agentfs.RootScopes(p.Grant.Scopes)
	return p, nil
}

// TokenInfo describes a bearer token for operators: who it belongs to,
// what it may do and whether it still works. It never holds the token or
// its hash, so listing tokens reveals nothing that authenticates.
type TokenInfo struct {
	ID        string     `json:"id"`
	Subject   string     `json:"subject"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// ListTokens returns the tokens of subject (every subject's when it is
// empty), oldest first, revoked ones included, so that an operator can
// find the id to revoke.
func (s *Store) ListTokens(ctx context.Context, subject string) ([]TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, subject, scopes, created_at, revoked_at FROM tokens
		WHERE $1 = '' OR subject = $1 ORDER BY created_at, id`, subject)
	if err != nil {
		return nil, Translate(fmt.Errorf("list tokens: %w", err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenInfo, error) {
		var t TokenInfo
		err := row.Scan(&t.ID, &t.Subject, &t.Scopes, &t.CreatedAt, &t.RevokedAt)
		return t, err
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("list tokens: %w", err))
	}
	return list, nil
}
