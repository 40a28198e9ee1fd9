package admission

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
)

// CreateToken makes a child of the caller's token (POST /v1/tokens; needs
// delegate): 201 with the token and its secret. The child's grant is what
// req asks for, its unset parts the parent's, and must lie within the
// parent's (else 403 FORBIDDEN saying which part exceeds, nothing
// claimed). The secret is a recorded secret: sealed in the key's record,
// replayed only to the token that made it.
func (c *Core) CreateToken(ctx context.Context, who agentfs.Caller, req agentfs.NewToken) (idempotency.Result, error) {
	if err := who.Allow(agentfs.OpCreateToken); err != nil {
		return idempotency.Result{}, err
	}
	asked := req.Grant
	if req.ExpiresIn > 0 {
		at := time.Now().Add(req.ExpiresIn)
		asked.ExpiresAt = &at
	}
	child, err := who.Grant.Delegate(asked)
	if err != nil {
		return idempotency.Result{}, err
	}
	body := map[string]any{"name": req.Name, "scopes": req.Grant.Scopes, "prefixes": req.Grant.Prefixes,
		"run_id": req.Grant.RunID, "agent_id": req.Grant.AgentID, "expires_in": int64(req.ExpiresIn.Seconds()),
		"max_bytes": req.Grant.MaxBytes}
	e := &createToken{c: c, who: who, name: req.Name, grant: child}
	e.named, e.fixed = withJSON(http.MethodPost, "/v1/tokens", agentfs.OpCreateToken, "", who, body)
	return c.run(ctx, who, e)
}

// createToken makes a child token.
type createToken struct {
	named
	fixed
	c     *Core
	who   agentfs.Caller
	name  string
	grant agentfs.Grant
}

func (e *createToken) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	parent := agentfs.Principal{Subject: e.who.Subject, Grant: e.who.Grant, TokenID: e.who.TokenID}
	t, err := e.c.store.CreateChildTokenTx(ctx, tx, parent, e.name, e.grant)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	out := outcome(http.StatusCreated, render.Token(t), "token", t.ID)
	out.Header["Location"] = "/v1/tokens/" + t.ID
	out.Secrets = []string{"token"}
	return out, nil
}

// RevokeToken revokes the caller's token id, or one of its descendants,
// and every token descended from it (DELETE /v1/tokens/{id}); repeating it
// is safe. Any other token is 404. Every instance refuses the revoked
// tokens once this commits (their token caches hear it through
// LISTEN/NOTIFY); this one forgets them at once.
func (c *Core) RevokeToken(ctx context.Context, who agentfs.Caller, id string) (idempotency.Result, error) {
	return c.run(ctx, who, &revokeToken{onID: c.byID(http.MethodDelete, "/v1/tokens/:id", agentfs.OpRevokeToken, id, who)})
}

// revokeToken revokes a token's subtree.
type revokeToken struct {
	onID
	hashes [][]byte
}

func (e *revokeToken) apply(ctx context.Context, tx pgx.Tx) (idempotency.Outcome, error) {
	t, _, hashes, err := e.c.store.RevokeTokenTx(ctx, tx, e.who.Subject, e.who.TokenID, e.id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	e.hashes = hashes
	return outcome(http.StatusOK, render.Token(t), "token", t.ID), nil
}

func (e *revokeToken) follow(_ context.Context, out idempotency.Outcome) (idempotency.Outcome, error) {
	e.c.store.ForgetTokens(e.hashes)
	return out, nil
}
