package storage

import (
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The read filter of a grant: a file outside a caller's prefixes does not
// exist for it. The read gate and the admission core hand the caller's
// reach down with the context (Within) before they ask the store, and every
// query that can see a file, a version, a link, an event, an upload
// session, a run, a batch or an operation applies the one SQL test below
// next to liveFile: visiblePath for what carries a path, visibleMade for
// what carries no path but the token that made it (batches), visibleKey
// for the records of keys (their paths, else their token). A lookup by id of something outside finds nothing: 404, as for
// another subject's. A context without a reach, or one whose prefixes are
// none, sees every row of its subject (a token without prefixes, the
// sweeper, the batch runner's own bookkeeping, the operator's commands).

type reachKey struct{}

// reach is what a caller may see of its subject: the folders of its grant
// (none: every path) and the token it came with.
type reach struct {
	prefixes []string
	tokenID  string
}

// Within returns ctx carrying a caller's reach: the queries of the store
// made with it see only what lies in prefixes (each a folder ending in
// "/", agentfs.NormalizeFolder; none: every path), and, of what carries no
// path, only what tokenID or its descendants made.
func Within(ctx context.Context, prefixes []string, tokenID string) context.Context {
	return context.WithValue(ctx, reachKey{}, reach{prefixes: slices.Clone(prefixes), tokenID: tokenID})
}

// reachOf is the reach ctx carries; ok is false when it reaches every
// row of its subject.
func reachOf(ctx context.Context) (r reach, ok bool) {
	r, _ = ctx.Value(reachKey{}).(reach)
	return r, len(r.prefixes) > 0
}

// reachToken is the token of the reach ctx carries ("" when none).
func reachToken(ctx context.Context) string {
	r, _ := ctx.Value(reachKey{}).(reach)
	return r.tokenID
}

// ReachedPrefixes are the prefixes ctx's reach is held to (nil: every
// path).
func ReachedPrefixes(ctx context.Context) []string {
	r, _ := reachOf(ctx)
	return slices.Clone(r.prefixes)
}

// visiblePath is the SQL test that the path in column col lies in the
// reach of ctx, its argument added to args; "true" when ctx reaches every
// path. starts_with needs no escaping of LIKE's wildcards.
func visiblePath(ctx context.Context, col string, args pgx.NamedArgs) string {
	r, ok := reachOf(ctx)
	if !ok {
		return "true"
	}
	args["reach_prefixes"] = r.prefixes
	return "EXISTS (SELECT 1 FROM unnest(@reach_prefixes::text[]) AS reach(p) WHERE starts_with(" + col + ", reach.p))"
}

// visibleMade is the SQL test that the token in column col made the row
// or is a descendant of the reach's token, for what carries no path: a
// scoped token sees the batches and key records it and its children made.
func visibleMade(ctx context.Context, col string, args pgx.NamedArgs) string {
	r, ok := reachOf(ctx)
	if !ok {
		return "true"
	}
	args["reach_token"] = r.tokenID
	return "(" + col + " = @reach_token OR " + col + " IN (SELECT id FROM tokens WHERE @reach_token = ANY(lineage)))"
}

// visibleKey is the SQL test that a key's record (a row of
// idempotency_keys) lies in the reach of ctx: every path its effect writes
// lies inside the reach's folders, or, for a write that names no path (a
// delete by id, a batch, a key claimed before keys recorded paths), its
// token or a descendant claimed it. A scoped token that takes a run over
// sees the keys of its folders, whoever claimed them.
func visibleKey(ctx context.Context, args pgx.NamedArgs) string {
	r, ok := reachOf(ctx)
	if !ok {
		return "true"
	}
	args["reach_prefixes"] = r.prefixes
	inside := `(cardinality(paths) > 0 AND NOT EXISTS (SELECT 1 FROM unnest(paths) AS kp(p)
		WHERE NOT EXISTS (SELECT 1 FROM unnest(@reach_prefixes::text[]) AS reach(p) WHERE starts_with(kp.p, reach.p))))`
	return "(" + inside + " OR (coalesce(cardinality(paths), 0) = 0 AND " + visibleMade(ctx, "token_id", args) + "))"
}

// covers reports whether path lies in the reach of ctx, as visiblePath
// decides it in SQL.
func covers(ctx context.Context, path string) bool {
	r, ok := reachOf(ctx)
	if !ok {
		return true
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
