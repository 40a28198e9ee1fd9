package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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

// tokenColumns are a token row as scanToken reads it, t being the tokens
// table.
const tokenColumns = `t.id, t.subject, t.name, t.scopes, coalesce(t.parent_id, ''), t.prefixes,
	coalesce(t.run_id, ''), coalesce(t.agent_id, ''), t.expires_at, coalesce(t.max_bytes, 0),
	coalesce((SELECT bytes FROM token_spend WHERE token_id = t.id), 0), t.created_at, t.revoked_at`

func scanToken(row pgx.Row) (*agentfs.Token, error) {
	var t agentfs.Token
	g := &t.Grant
	err := row.Scan(&t.ID, &t.Subject, &t.Name, &g.Scopes, &t.ParentID, &g.Prefixes, &g.RunID, &g.AgentID,
		&g.ExpiresAt, &g.MaxBytes, &t.BytesWritten, &t.CreatedAt, &t.RevokedAt)
	if err != nil {
		return nil, Translate(err)
	}
	if t.ParentID == "" {
		g.Scopes = agentfs.RootScopes(g.Scopes)
	}
	return &t, nil
}

// newSecret makes a bearer token and the SHA-256 that is all that is kept
// of it.
func newSecret() (token string, sum [32]byte, err error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", sum, err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return token, sha256.Sum256([]byte(token)), nil
}

// insertTokenSQL stores a token row; lineage is its ancestors' ids.
const insertTokenSQL = `INSERT INTO tokens (id, subject, token_hash, scopes, name, parent_id, lineage, prefixes,
		run_id, agent_id, expires_at, max_bytes)
	VALUES (@id, @subject, @hash, @scopes, @name, nullif(@parent, ''), @lineage, @prefixes,
		nullif(@run_id, ''), nullif(@agent_id, ''), @expires_at, nullif(@max_bytes, 0))
	RETURNING created_at`

func tokenArgs(t *agentfs.Token, sum [32]byte, lineage []string) pgx.NamedArgs {
	g := t.Grant
	var prefixes []string // NULL: every path
	if len(g.Prefixes) > 0 {
		prefixes = g.Prefixes
	}
	if lineage == nil {
		lineage = []string{}
	}
	return pgx.NamedArgs{"id": t.ID, "subject": t.Subject, "hash": sum[:], "scopes": g.Scopes, "name": t.Name,
		"parent": t.ParentID, "lineage": lineage, "prefixes": prefixes, "run_id": g.RunID, "agent_id": g.AgentID,
		"expires_at": g.ExpiresAt, "max_bytes": g.MaxBytes}
}

// CreateToken makes a root bearer token for subject with the given scopes
// and no other limit. The token itself is returned once; only its SHA-256
// is stored.
func (s *Store) CreateToken(ctx context.Context, subject string, scopes []string) (token, id string, err error) {
	t, err := s.CreateRootToken(ctx, subject, "", agentfs.Grant{Scopes: scopes})
	if err != nil {
		return "", "", err
	}
	return t.Secret, t.ID, nil
}

// CreateRootToken makes a root token (no parent: the operator's) for
// subject with grant g (agentfs.NormalizeGrant). Its Secret is the bearer
// token, shown once; only its SHA-256 is stored.
func (s *Store) CreateRootToken(ctx context.Context, subject, name string, g agentfs.Grant) (*agentfs.Token, error) {
	if subject == "" {
		return nil, errors.New("create token: subject is required")
	}
	g, err := agentfs.NormalizeGrant(g)
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	secret, sum, err := newSecret()
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	t := &agentfs.Token{ID: NewID("tok"), Subject: subject, Name: name, Grant: g, Secret: secret}
	if err := s.pool.QueryRow(ctx, insertTokenSQL, tokenArgs(t, sum, nil)).Scan(&t.CreatedAt); err != nil {
		return nil, Translate(fmt.Errorf("create token: %w", err))
	}
	t.Grant.Scopes = agentfs.RootScopes(t.Grant.Scopes)
	s.forgetToken(sum[:]) // now, not when the notification comes back
	return t, nil
}

// CreateChildTokenTx makes, in tx, a child of the token parent
// authenticated with, with grant g, which the caller has held to the
// parent's (agentfs.Grant.Delegate). The parent and every ancestor are
// locked against a revocation until tx ends, and must all be live: a
// token revoked meanwhile makes no child (agentfs.ErrTokenRevoked), and a
// revocation that commits first finds the child in its subtree. Its
// Secret is shown once; only its SHA-256 is stored.
func (s *Store) CreateChildTokenTx(ctx context.Context, tx pgx.Tx, parent agentfs.Principal, name string, g agentfs.Grant) (*agentfs.Token, error) {
	lineage, err := lockLineage(ctx, tx, parent)
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	secret, sum, err := newSecret()
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	t := &agentfs.Token{ID: NewID("tok"), Subject: parent.Subject, Name: name, Grant: g, ParentID: parent.TokenID, Secret: secret}
	if err := tx.QueryRow(ctx, insertTokenSQL, tokenArgs(t, sum, lineage)).Scan(&t.CreatedAt); err != nil {
		return nil, Translate(fmt.Errorf("create token: %w", err))
	}
	return t, nil
}

// lockLineage locks the token p came with and each of its ancestors
// against a revocation (FOR SHARE, in the order of their ids) until tx
// ends, and returns the child's lineage: theirs, the root first.
// agentfs.ErrTokenRevoked when any of them is revoked or expired.
func lockLineage(ctx context.Context, tx pgx.Tx, p agentfs.Principal) ([]string, error) {
	args := pgx.NamedArgs{"id": p.TokenID, "subject": p.Subject}
	rows, err := tx.Query(ctx, `SELECT id, lineage, revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		FROM tokens WHERE subject = @subject
		  AND (id = @id OR id = ANY(coalesce((SELECT lineage FROM tokens WHERE id = @id), '{}')))
		ORDER BY id FOR SHARE`, args)
	if err != nil {
		return nil, Translate(err)
	}
	type row struct {
		ID      string
		Lineage []string
		Live    bool
	}
	locked, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return nil, Translate(err)
	}
	var own *row
	for i, r := range locked {
		if !r.Live {
			return nil, agentfs.ErrTokenRevoked
		}
		if r.ID == p.TokenID {
			own = &locked[i]
		}
	}
	if own == nil || len(locked) != len(own.Lineage)+1 {
		return nil, agentfs.ErrTokenRevoked
	}
	return append(slices.Clone(own.Lineage), own.ID), nil
}

// RevokeTokenTx revokes, in tx, the subject's token id and every token
// descended from it; by is the token asking, which may revoke itself and
// its descendants only (any other is agentfs.ErrNotFound). It returns the
// token as revoked, whether anything changed (revoking again does not),
// and the hashes of the tokens it revoked, for this instance's cache
// (ForgetTokens, once tx commits; every other instance hears the trigger's
// notifications as it commits). The target's row is locked first, so a
// child being made under it (CreateChildTokenTx locks it too) either
// commits first and is found here, or finds it revoked.
func (s *Store) RevokeTokenTx(ctx context.Context, tx pgx.Tx, subject, by, id string) (t *agentfs.Token, changed bool, hashes [][]byte, err error) {
	if err := checkID(id); err != nil {
		return nil, false, nil, err
	}
	args := pgx.NamedArgs{"id": id, "subject": subject, "by": by}
	var found string
	err = tx.QueryRow(ctx, `SELECT id FROM tokens WHERE id = @id AND subject = @subject
		AND (id = @by OR @by = ANY(lineage)) FOR UPDATE`, args).Scan(&found)
	if err != nil {
		return nil, false, nil, Translate(fmt.Errorf("revoke token: %w", err))
	}
	// A statement of its own, after the lock: its snapshot holds every
	// child that committed before the lock was taken.
	rows, err := tx.Query(ctx, `UPDATE tokens SET revoked_at = now()
		WHERE subject = @subject AND (id = @id OR @id = ANY(lineage)) AND revoked_at IS NULL
		RETURNING token_hash`, args)
	if err != nil {
		return nil, false, nil, Translate(fmt.Errorf("revoke token: %w", err))
	}
	if hashes, err = pgx.CollectRows(rows, pgx.RowTo[[]byte]); err != nil {
		return nil, false, nil, Translate(fmt.Errorf("revoke token: %w", err))
	}
	t, err = scanToken(tx.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens t WHERE t.id = @id`, args))
	if err != nil {
		return nil, false, nil, fmt.Errorf("revoke token: %w", err)
	}
	return t, len(hashes) > 0, hashes, nil
}

// ForgetTokens makes this instance forget the tokens of these hashes now,
// not when the notification of their change comes back.
func (s *Store) ForgetTokens(hashes [][]byte) {
	for _, h := range hashes {
		s.forgetToken(h)
	}
}

func (s *Store) forgetToken(sum []byte) {
	if s.tokens != nil {
		s.tokens.Notified(hex.EncodeToString(sum))
	}
}

// RevokeToken revokes a token given either itself or its id (tok_…), and
// every token descended from it (the operator's agentfs token revoke).
// Revoking an unknown token is agentfs.ErrNotFound. Every instance stops
// taking them as soon as this commits: a trigger on tokens notifies their
// caches.
func (s *Store) RevokeToken(ctx context.Context, tokenOrID string) error {
	sum := sha256.Sum256([]byte(tokenOrID))
	var hashes [][]byte
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM tokens WHERE token_hash = $1 OR id = $2 FOR UPDATE`,
			sum[:], tokenOrID).Scan(&id); err != nil {
			return Translate(err)
		}
		rows, err := tx.Query(ctx, `UPDATE tokens SET revoked_at = coalesce(revoked_at, now())
			WHERE id = $1 OR $1 = ANY(lineage) RETURNING token_hash`, id)
		if err != nil {
			return Translate(err)
		}
		hashes, err = pgx.CollectRows(rows, pgx.RowTo[[]byte])
		return Translate(err)
	})
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	s.ForgetTokens(hashes)
	return nil
}

// Authenticate returns the principal a bearer token stands for. An unknown,
// revoked or expired token, or one with a revoked ancestor, is
// agentfs.ErrNotFound. The lookup is by the token's SHA-256, so the time it
// takes says nothing about the token. A token looked up lately, taken or
// refused, is answered from the instance's cache (package tokencache),
// which forgets it as soon as a change to it commits on any instance (it
// follows ChannelToken; revoking a token changes the row of each of its
// descendants too) and never keeps it past its expiry.
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
	if p, ok := c.Get(sum); ok && !p.Grant.Expired(time.Now()) {
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
	p, ok := s.tokens.Get(sha256.Sum256([]byte(token)))
	if !ok || p.Grant.Expired(time.Now()) {
		return agentfs.Principal{}, false
	}
	return p, true
}

// tokenStands is the SQL test that token t authenticates: not revoked, not
// expired, and no ancestor revoked.
const tokenStands = `t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
		  AND NOT EXISTS (SELECT 1 FROM tokens a WHERE a.id = ANY(t.lineage) AND a.revoked_at IS NOT NULL)`

func (s *Store) lookupToken(ctx context.Context, sum [32]byte) (agentfs.Principal, error) {
	s.counters.tokenLookups.Add(1)
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens t
		WHERE t.token_hash = $1 AND `+tokenStands, sum[:]))
	if err != nil {
		return agentfs.Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	return agentfs.Principal{Subject: t.Subject, Grant: t.Grant, TokenID: t.ID}, nil
}

// Tokens lists, oldest first, the subject's token me and every token
// descended from it, revoked ones included (never a secret or a hash),
// after the cursor, up to limit.
func (s *Store) Tokens(ctx context.Context, subject, me string, after *agentfs.Cursor, limit int) ([]*agentfs.Token, error) {
	w := newFilter("t.subject = @subject AND (t.id = @me OR @me = ANY(t.lineage))",
		pgx.NamedArgs{"subject": subject, "me": me, "limit": limit})
	if after != nil {
		w.when(true, "(t.created_at, t.id) > (@after_created_at, @after_id)", pgx.NamedArgs{"after_created_at": after.CreatedAt, "after_id": after.ID})
	}
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens t WHERE `+w.where()+
		` ORDER BY t.created_at, t.id LIMIT @limit`, w.args)
	if err != nil {
		return nil, Translate(fmt.Errorf("list tokens: %w", err))
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentfs.Token, error) { return scanToken(r) })
	return list, Translate(err)
}

// Token is the subject's token id when it is me or descends from it, else
// agentfs.ErrNotFound.
func (s *Store) Token(ctx context.Context, subject, me, id string) (*agentfs.Token, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM tokens t
		WHERE t.id = @id AND t.subject = @subject AND (t.id = @me OR @me = ANY(t.lineage))`,
		pgx.NamedArgs{"id": id, "subject": subject, "me": me}))
	if err != nil {
		return nil, fmt.Errorf("get token: %w", err)
	}
	return t, nil
}

// TokenInfo describes a bearer token for operators: who it belongs to,
// what it may do and whether it still works. It never holds the token or
// its hash, so listing tokens reveals nothing that authenticates.
type TokenInfo struct {
	ID        string     `json:"id"`
	Subject   string     `json:"subject,omitempty"`
	Name      string     `json:"name,omitempty"`
	Scopes    []string   `json:"scopes"`
	Prefixes  []string   `json:"prefixes,omitempty"`
	RunID     string     `json:"run_id,omitempty"`
	AgentID   string     `json:"agent_id,omitempty"`
	MaxBytes  int64      `json:"max_bytes,omitempty"`
	ParentID  string     `json:"parent_id,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// ListTokens returns the tokens of subject (every subject's when it is
// empty), oldest first, revoked ones included, so that an operator can
// find the id to revoke.
func (s *Store) ListTokens(ctx context.Context, subject string) ([]TokenInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens t
		WHERE $1 = '' OR t.subject = $1 ORDER BY t.created_at, t.id`, subject)
	if err != nil {
		return nil, Translate(fmt.Errorf("list tokens: %w", err))
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TokenInfo, error) {
		t, err := scanToken(row)
		if err != nil {
			return TokenInfo{}, err
		}
		return TokenInfo{ID: t.ID, Subject: t.Subject, Name: t.Name, Scopes: t.Grant.Scopes, Prefixes: t.Grant.Prefixes,
			RunID: t.Grant.RunID, AgentID: t.Grant.AgentID, MaxBytes: t.Grant.MaxBytes, ParentID: t.ParentID, ExpiresAt: t.Grant.ExpiresAt, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}, nil
	})
	if err != nil {
		return nil, Translate(fmt.Errorf("list tokens: %w", err))
	}
	return list, nil
}

// ReserveGrantBytes reserves want bytes of what the token may still write:
// of its own max_bytes and of every ancestor's that has one, so that a
// parent's budget holds however many children write at once. It returns
// how many bytes it reserved (want when they fit; otherwise, with partial,
// exactly what is left, maybe 0, and without it 0) and the tightest
// budget's limit and spending. The budgets' rows are locked, in one order,
// while the reservation is decided, so concurrent writes on any instance
// can never spend more than a budget between them.
func (s *Store) ReserveGrantBytes(ctx context.Context, tokenID string, want int64, partial bool) (got, limit, spent int64, err error) {
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		args := pgx.NamedArgs{"id": tokenID}
		if _, err := tx.Exec(ctx, `INSERT INTO token_spend (token_id)
			SELECT a.id FROM tokens me JOIN tokens a ON a.id = me.id OR a.id = ANY(me.lineage)
			WHERE me.id = @id AND a.max_bytes IS NOT NULL
			ON CONFLICT (token_id) DO NOTHING`, args); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT t.max_bytes, s.bytes FROM token_spend s JOIN tokens t ON t.id = s.token_id
			WHERE s.token_id IN (SELECT a.id FROM tokens me JOIN tokens a ON a.id = me.id OR a.id = ANY(me.lineage) WHERE me.id = @id)
			ORDER BY s.token_id FOR UPDATE OF s`, args)
		if err != nil {
			return err
		}
		budgets, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Limit, Spent int64 }])
		if err != nil || len(budgets) == 0 {
			got = want // no budget holds this token
			return err
		}
		left := int64(-1)
		for _, b := range budgets {
			if l := max(0, b.Limit-b.Spent); left < 0 || l < left {
				left, limit, spent = l, b.Limit, b.Spent
			}
		}
		if got = reservable(want, left, partial); got == 0 {
			return nil
		}
		spent += got
		args["got"] = got
		_, err = tx.Exec(ctx, `UPDATE token_spend SET bytes = bytes + @got
			WHERE token_id IN (SELECT a.id FROM tokens me JOIN tokens a ON a.id = me.id OR a.id = ANY(me.lineage)
				WHERE me.id = @id AND a.max_bytes IS NOT NULL)`, args)
		return err
	})
	if err != nil {
		return 0, 0, 0, Translate(fmt.Errorf("reserve token bytes: %w", err))
	}
	return got, limit, spent, nil
}

// ReleaseGrantBytes gives back n bytes ReserveGrantBytes reserved for the
// token that a write did not use, to it and its ancestors.
func (s *Store) ReleaseGrantBytes(ctx context.Context, tokenID string, n int64) error {
	if n <= 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `UPDATE token_spend SET bytes = greatest(0, bytes - @n)
		WHERE token_id IN (SELECT a.id FROM tokens me JOIN tokens a ON a.id = me.id OR a.id = ANY(me.lineage)
			WHERE me.id = @id AND a.max_bytes IS NOT NULL)`, pgx.NamedArgs{"id": tokenID, "n": n})
	if err != nil {
		return Translate(fmt.Errorf("release token bytes: %w", err))
	}
	return nil
}
