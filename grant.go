package agentfs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Grant is what a bearer token may do: which operations (Scopes), on which
// files (Prefixes), for which run and agent (the pins), until when
// (ExpiresAt) and how many bytes it may write in all (MaxBytes). Every
// token has one, and every door holds its caller to it through the same
// two places: the admission core for writes, the read gate for reads.
//
// A token made before grants existed has its scopes and no other limit:
// it sees and touches every path of its subject, forever, as it always
// did. A delegated token's grant never exceeds its parent's (Within).
type Grant struct {
	// Scopes are the operations' scopes it carries (ScopeRead, ScopeWrite,
	// ScopeShare, ScopeDelegate); scopes.go says which each operation needs.
	Scopes []string
	// Prefixes are the folders it may see and touch, each ending in "/"
	// (NormalizeFolder): "reports/" covers "reports/a.txt" and
	// "reports/q1/b.txt", never "reports-old/x". None: every path.
	Prefixes []string
	// RunID and AgentID, when set, pin every request made with the token
	// to that run and agent: they attribute it, and a request that names
	// another is refused.
	RunID   string
	AgentID string
	// ExpiresAt, when set, is when the token stops authenticating.
	ExpiresAt *time.Time
	// MaxBytes, when above 0, is how many bytes the token may write in
	// all (counted as the byte quota counts them); once spent, writes are
	// refused for good.
	MaxBytes int64
}

// Limits on a grant, so that one token's row and every check of it stay
// small.
const (
	MaxGrantPrefixes = 64
	MaxTokenName     = 128
)

// Can reports whether the grant carries scope.
func (g Grant) Can(scope string) bool { return slices.Contains(g.Scopes, scope) }

// Everywhere reports whether the grant reaches every path of its subject
// (it names no prefixes).
func (g Grant) Everywhere() bool { return len(g.Prefixes) == 0 }

// Covers reports whether path lies in one of the grant's folders (always,
// for a grant without prefixes).
func (g Grant) Covers(path string) bool {
	if g.Everywhere() {
		return true
	}
	for _, p := range g.Prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// Expired reports whether the grant has expired at now.
func (g Grant) Expired(now time.Time) bool { return g.ExpiresAt != nil && !now.Before(*g.ExpiresAt) }

// Permit checks that a write may touch path: nil, or an *OutsideGrantError
// naming the grant's prefixes.
func (g Grant) Permit(path string) error {
	if g.Covers(path) {
		return nil
	}
	return &OutsideGrantError{Path: path, Prefixes: slices.Clone(g.Prefixes)}
}

// Attribute is the attribution of a request made with the grant: the
// pinned run and agent fill what the request left out, and a request that
// names another run or agent than the pinned one is a *PinnedError.
func (g Grant) Attribute(by Attribution) (Attribution, error) {
	for _, pin := range []struct {
		header, pinned string
		sent           *string
	}{{"X-Run-ID", g.RunID, &by.RunID}, {"X-Agent-ID", g.AgentID, &by.AgentID}} {
		switch {
		case pin.pinned == "":
		case *pin.sent == "":
			*pin.sent = pin.pinned
		case *pin.sent != pin.pinned:
			return by, &PinnedError{Header: pin.header, Pinned: pin.pinned, Sent: *pin.sent}
		}
	}
	return by, nil
}

// NormalizeFolder returns a grant's prefix in the one form it is kept in:
// a path (NormalizePath: NFC, no "..", no NUL or other control character,
// no leading "/") followed by "/", so that it names a folder and covers
// only what lies in it. "reports" and "reports/" are both "reports/"; the
// root is not a folder (a grant without prefixes reaches every path).
func NormalizeFolder(p string) (string, error) {
	trimmed := strings.TrimSuffix(p, "/")
	if trimmed == "" {
		return "", errors.New("a prefix names a folder such as reports/; leave prefixes out for every path")
	}
	n, err := NormalizePath(trimmed)
	if err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	if len(n)+1 > MaxPathBytes {
		return "", errors.New("prefix is longer than 1024 bytes")
	}
	return n + "/", nil
}

// NormalizeGrant checks a grant asked for (a new token's, or one read from
// an OAuth access token's claims) and returns it in its one form: known
// scopes, sorted, each once; folders normalized, sorted, none inside
// another; pins that are valid attribution values. A grant that breaks a
// rule is an *InvalidGrantError naming the field.
func NormalizeGrant(g Grant) (Grant, error) {
	out := Grant{RunID: g.RunID, AgentID: g.AgentID, ExpiresAt: g.ExpiresAt, MaxBytes: g.MaxBytes}
	for _, s := range g.Scopes {
		if !slices.Contains(AllScopes, s) {
			return Grant{}, &InvalidGrantError{Field: "scopes", Reason: fmt.Sprintf("unknown scope %q (known: %s)", s, strings.Join(AllScopes, ", "))}
		}
		if !slices.Contains(out.Scopes, s) {
			out.Scopes = append(out.Scopes, s)
		}
	}
	slices.Sort(out.Scopes)
	prefixes, err := normalizeFolders(g.Prefixes)
	if err != nil {
		return Grant{}, err
	}
	out.Prefixes = prefixes
	for _, pin := range []struct{ field, v string }{{"run_id", g.RunID}, {"agent_id", g.AgentID}} {
		if pin.v != "" && !ValidTagValue(pin.v) {
			return Grant{}, &InvalidGrantError{Field: pin.field, Reason: "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -, starting with a letter or digit"}
		}
	}
	if g.MaxBytes < 0 {
		return Grant{}, &InvalidGrantError{Field: "max_bytes", Reason: "must be a positive number of bytes"}
	}
	if g.ExpiresAt != nil {
		at := g.ExpiresAt.UTC().Truncate(time.Microsecond) // as Postgres keeps it
		out.ExpiresAt = &at
	}
	return out, nil
}

// normalizeFolders normalizes a grant's prefixes and drops each that
// another covers.
func normalizeFolders(in []string) ([]string, error) {
	if len(in) > MaxGrantPrefixes {
		return nil, &InvalidGrantError{Field: "prefixes", Reason: fmt.Sprintf("at most %d prefixes", MaxGrantPrefixes)}
	}
	var all []string
	for i, p := range in {
		n, err := NormalizeFolder(p)
		if err != nil {
			return nil, &InvalidGrantError{Field: fmt.Sprintf("prefixes[%d]", i), Reason: err.Error()}
		}
		all = append(all, n)
	}
	slices.Sort(all)
	var out []string
	for _, p := range all {
		// Sorted, a folder comes before every folder inside it.
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Delegate is the grant of a child token that parent asks for with req:
// what req leaves out is the parent's (its prefixes, pins, expiry and
// max_bytes), and the result must lie Within the parent.
func (parent Grant) Delegate(req Grant) (Grant, error) {
	child := req
	if child.Prefixes == nil {
		child.Prefixes = slices.Clone(parent.Prefixes)
	}
	if child.RunID == "" {
		child.RunID = parent.RunID
	}
	if child.AgentID == "" {
		child.AgentID = parent.AgentID
	}
	if child.ExpiresAt == nil {
		child.ExpiresAt = parent.ExpiresAt
	}
	if child.MaxBytes == 0 {
		child.MaxBytes = parent.MaxBytes
	}
	child, err := NormalizeGrant(child)
	if err != nil {
		return Grant{}, err
	}
	return child, child.Within(parent)
}

// Within checks that g asks for nothing parent lacks: its scopes a subset,
// each of its folders inside one of the parent's, its expiry and max_bytes
// no later and no larger, and the parent's pins kept. Else an
// *ExceedsParentError says which part exceeds.
func (g Grant) Within(parent Grant) error {
	for _, s := range g.Scopes {
		if !parent.Can(s) {
			return &ExceedsParentError{Part: "scopes", Detail: fmt.Sprintf("the parent token lacks the %s scope", s)}
		}
	}
	if !parent.Everywhere() {
		if g.Everywhere() {
			return &ExceedsParentError{Part: "prefixes", Detail: "the parent token reaches only " + strings.Join(parent.Prefixes, ", ") + "; name prefixes inside them"}
		}
		for _, p := range g.Prefixes {
			if !parent.Covers(p) {
				return &ExceedsParentError{Part: "prefixes", Detail: fmt.Sprintf("prefix %q is outside the parent token's %s", p, strings.Join(parent.Prefixes, ", "))}
			}
		}
	}
	if parent.ExpiresAt != nil && (g.ExpiresAt == nil || g.ExpiresAt.After(*parent.ExpiresAt)) {
		return &ExceedsParentError{Part: "expires_in", Detail: "the token would outlive its parent, which expires at " + parent.ExpiresAt.UTC().Format(time.RFC3339)}
	}
	if parent.MaxBytes > 0 && (g.MaxBytes <= 0 || g.MaxBytes > parent.MaxBytes) {
		return &ExceedsParentError{Part: "max_bytes", Detail: fmt.Sprintf("the parent token may write at most %d bytes", parent.MaxBytes)}
	}
	if parent.RunID != "" && g.RunID != parent.RunID {
		return &ExceedsParentError{Part: "run_id", Detail: fmt.Sprintf("the parent token is pinned to run %q", parent.RunID)}
	}
	if parent.AgentID != "" && g.AgentID != parent.AgentID {
		return &ExceedsParentError{Part: "agent_id", Detail: fmt.Sprintf("the parent token is pinned to agent %q", parent.AgentID)}
	}
	return nil
}

// Clone is a copy of g that shares no slice with it.
func (g Grant) Clone() Grant {
	g.Scopes, g.Prefixes = slices.Clone(g.Scopes), slices.Clone(g.Prefixes)
	if g.ExpiresAt != nil {
		at := *g.ExpiresAt
		g.ExpiresAt = &at
	}
	return g
}

// OutsideGrantError says a write would touch a path outside the caller's
// prefixes: 403 FORBIDDEN naming the prefixes it may write in; nothing was
// done.
type OutsideGrantError struct {
	Path     string
	Prefixes []string
}

func (e *OutsideGrantError) Error() string {
	return fmt.Sprintf("path %q is outside the token's prefixes (%s)", e.Path, strings.Join(e.Prefixes, ", "))
}

// PinnedError says a request names another run or agent than the one its
// token is pinned to: 403 FORBIDDEN.
type PinnedError struct {
	Header, Pinned, Sent string
}

func (e *PinnedError) Error() string {
	return fmt.Sprintf("the token is pinned to %s %q; this request sent %q", e.Header, e.Pinned, e.Sent)
}

// GrantSpentError says a write would take its token past its max_bytes:
// 403 FORBIDDEN, for good (it is not a window that passes, so not a
// retryable 429). Nothing of the write was stored.
type GrantSpentError struct {
	MaxBytes, Spent int64
}

func (e *GrantSpentError) Error() string {
	return fmt.Sprintf("the token may write %d bytes in all and has %d left", e.MaxBytes, max(0, e.MaxBytes-e.Spent))
}

// ExceedsParentError says a delegated token would exceed its parent's
// grant: 403 FORBIDDEN naming the part (scopes, prefixes, expires_in,
// max_bytes, run_id, agent_id).
type ExceedsParentError struct {
	Part, Detail string
}

func (e *ExceedsParentError) Error() string {
	return e.Part + " exceeds the parent token's: " + e.Detail
}

// InvalidGrantError says a grant asked for breaks a rule of its field:
// 422 VALIDATION_FAILED.
type InvalidGrantError struct {
	Field, Reason string
}

func (e *InvalidGrantError) Error() string { return e.Field + ": " + e.Reason }

// Token is a bearer token as its holder and its ancestors see it: what it
// may do and where it comes from, never its hash, and its secret only in
// the answer that made it.
type Token struct {
	ID       string
	Subject  string
	Name     string
	Grant    Grant
	ParentID string // "" for a root token, which an operator made
	// BytesWritten is what the token has written of Grant.MaxBytes.
	BytesWritten int64
	CreatedAt    time.Time
	RevokedAt    *time.Time
	// Secret is the bearer token itself, set only when it is made.
	Secret string
}

// NewToken is a child token asked for (POST /v1/tokens): its name and the
// grant it asks for, whose unset parts the parent's fill (Grant.Delegate).
type NewToken struct {
	Name  string
	Grant Grant
	// ExpiresIn is how long the child lives (0: as long as its parent).
	ExpiresIn time.Duration
}

// ErrTokenRevoked says the token a request came with was revoked (or
// expired) while the request ran: 401, as it would be at the door.
var ErrTokenRevoked = errors.New("the token is revoked or expired")
