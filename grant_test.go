package agentfs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentfs/agentfs"
)

func TestNormalizeFolder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		bad      string // what the error says, when it fails
	}{
		{in: "reports", want: "reports/"},
		{in: "reports/", want: "reports/"},
		{in: "a/b/c/", want: "a/b/c/"},
		{in: "cafe\u0301/", want: "caf\u00e9/"}, // NFD becomes NFC, as paths are kept
		{in: "", bad: "folder"},
		{in: "/", bad: "folder"},
		{in: "/etc", bad: "starts with '/'"},
		{in: "../x", bad: "'..'"},
		{in: "a/../b", bad: "'..'"},
		{in: "a/./b", bad: "'.'"},
		{in: "a//b", bad: "empty segment"},
		{in: "a/b//", bad: "empty segment"},
		{in: "a\x00b", bad: "control"},
		{in: "a\\b", bad: "backslash"},
		{in: "a\u202eb", bad: "bidirectional"},
		{in: "\xff", bad: "UTF-8"},
		{in: strings.Repeat("a", 1024), bad: "1024"},
	} {
		got, err := agentfs.NormalizeFolder(tc.in)
		switch {
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("NormalizeFolder(%q) = %q, %v; want an error saying %q", tc.in, got, err, tc.bad)
		case tc.bad == "" && (err != nil || got != tc.want):
			t.Errorf("NormalizeFolder(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestGrantCovers(t *testing.T) {
	t.Parallel()
	g := agentfs.Grant{Prefixes: []string{"reports/", "team/a/"}}
	for path, want := range map[string]bool{
		"reports/a.txt": true, "reports/q1/b.txt": true, "team/a/x": true,
		"reports-old/x": false, "reports": false, "team/ab/x": false, "team/x": false, "x": false,
	} {
		if g.Covers(path) != want {
			t.Errorf("%v covers %q: %v, want %v", g.Prefixes, path, !want, want)
		}
	}
	if !(agentfs.Grant{}).Covers("anything/at/all") {
		t.Error("a grant without prefixes must cover every path")
	}
	var outside *agentfs.OutsideGrantError
	if err := g.Permit("elsewhere/x"); !errors.As(err, &outside) || !slices.Equal(outside.Prefixes, g.Prefixes) {
		t.Errorf("Permit outside = %v, want an *OutsideGrantError naming %v", err, g.Prefixes)
	}
}

func TestNormalizeGrant(t *testing.T) {
	t.Parallel()
	t.Run("SortsDedupesAndDropsNestedFolders", func(t *testing.T) {
		g, err := agentfs.NormalizeGrant(agentfs.Grant{Scopes: []string{"write", "read", "write"},
			Prefixes: []string{"b/c", "a", "b/", "a/x/"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Scopes, []string{"read", "write"}) || !slices.Equal(g.Prefixes, []string{"a/", "b/"}) {
			t.Fatalf("got scopes %v prefixes %v", g.Scopes, g.Prefixes)
		}
	})
	for _, tc := range []struct {
		name  string
		g     agentfs.Grant
		field string
	}{
		{"RefusesUnknownScope", agentfs.Grant{Scopes: []string{"admin"}}, "scopes"},
		{"RefusesDotDotPrefix", agentfs.Grant{Prefixes: []string{"ok/", "../etc"}}, "prefixes[1]"},
		{"RefusesNULPrefix", agentfs.Grant{Prefixes: []string{"a\x00"}}, "prefixes[0]"},
		{"RefusesRootPrefix", agentfs.Grant{Prefixes: []string{"/"}}, "prefixes[0]"},
		{"RefusesTooManyPrefixes", agentfs.Grant{Prefixes: make([]string, agentfs.MaxGrantPrefixes+1)}, "prefixes"},
		{"RefusesBadRunPin", agentfs.Grant{RunID: "has space"}, "run_id"},
		{"RefusesBadAgentPin", agentfs.Grant{AgentID: "-x"}, "agent_id"},
		{"RefusesNegativeMaxBytes", agentfs.Grant{MaxBytes: -1}, "max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agentfs.NormalizeGrant(tc.g)
			var invalid *agentfs.InvalidGrantError
			if !errors.As(err, &invalid) || invalid.Field != tc.field {
				t.Fatalf("NormalizeGrant = %v, want an *InvalidGrantError on %s", err, tc.field)
			}
		})
	}
}

func TestGrantDelegate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	later, muchLater := now.Add(time.Hour), now.Add(2*time.Hour)
	parent := agentfs.Grant{Scopes: []string{"read", "write", "delegate"}, Prefixes: []string{"work/"},
		RunID: "run-1", ExpiresAt: &later, MaxBytes: 1000}
	t.Run("InheritsWhatTheChildLeavesOut", func(t *testing.T) {
		child, err := parent.Delegate(agentfs.Grant{Scopes: []string{"read"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(child.Prefixes, parent.Prefixes) || child.RunID != "run-1" || child.MaxBytes != 1000 ||
			child.ExpiresAt == nil || !child.ExpiresAt.Equal(later) {
			t.Fatalf("child %+v did not inherit from %+v", child, parent)
		}
	})
	t.Run("NarrowsInside", func(t *testing.T) {
		soon := now.Add(time.Minute)
		child, err := parent.Delegate(agentfs.Grant{Scopes: []string{"write"}, Prefixes: []string{"work/sub"},
			ExpiresAt: &soon, MaxBytes: 10})
		if err != nil || !slices.Equal(child.Prefixes, []string{"work/sub/"}) {
			t.Fatalf("child %+v, %v", child, err)
		}
	})
	for _, tc := range []struct {
		name string
		req  agentfs.Grant
		part string
	}{
		{"RefusesAScopeTheParentLacks", agentfs.Grant{Scopes: []string{"share"}}, "scopes"},
		{"RefusesAPrefixOutside", agentfs.Grant{Scopes: []string{"read"}, Prefixes: []string{"workshop/"}}, "prefixes"},
		{"RefusesEveryPath", agentfs.Grant{Scopes: []string{"read"}, Prefixes: []string{}}, "prefixes"},
		{"RefusesALaterExpiry", agentfs.Grant{Scopes: []string{"read"}, ExpiresAt: &muchLater}, "expires_in"},
		{"RefusesMoreBytes", agentfs.Grant{Scopes: []string{"read"}, MaxBytes: 1001}, "max_bytes"},
		{"RefusesAnotherRun", agentfs.Grant{Scopes: []string{"read"}, RunID: "run-2"}, "run_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parent.Delegate(tc.req)
			var exceeds *agentfs.ExceedsParentError
			if !errors.As(err, &exceeds) || exceeds.Part != tc.part {
				t.Fatalf("Delegate(%+v) = %v, want an *ExceedsParentError on %s", tc.req, err, tc.part)
			}
		})
	}
	t.Run("AnUnboundedParentLetsTheChildChoose", func(t *testing.T) {
		child, err := agentfs.Grant{Scopes: []string{"read", "write"}}.Delegate(agentfs.Grant{Scopes: []string{"read"}, AgentID: "helper"})
		if err != nil || child.AgentID != "helper" || !child.Everywhere() || child.ExpiresAt != nil {
			t.Fatalf("child %+v, %v", child, err)
		}
	})
}

func TestGrantAttribute(t *testing.T) {
	t.Parallel()
	g := agentfs.Grant{RunID: "run-1", AgentID: "helper"}
	by, err := g.Attribute(agentfs.Attribution{})
	if err != nil || by != (agentfs.Attribution{RunID: "run-1", AgentID: "helper"}) {
		t.Fatalf("Attribute of nothing = %+v, %v; want the pins", by, err)
	}
	if _, err := g.Attribute(agentfs.Attribution{RunID: "run-1", AgentID: "helper"}); err != nil {
		t.Fatalf("Attribute of the pins themselves: %v", err)
	}
	var pinned *agentfs.PinnedError
	if _, err := g.Attribute(agentfs.Attribution{RunID: "run-2"}); !errors.As(err, &pinned) || pinned.Header != "X-Run-ID" {
		t.Fatalf("another run = %v, want a *PinnedError on X-Run-ID", err)
	}
	if _, err := g.Attribute(agentfs.Attribution{AgentID: "other"}); !errors.As(err, &pinned) || pinned.Header != "X-Agent-ID" {
		t.Fatalf("another agent = %v, want a *PinnedError on X-Agent-ID", err)
	}
}

func TestGrantAllow(t *testing.T) {
	t.Parallel()
	who := agentfs.Caller{Grant: agentfs.Grant{Scopes: []string{"read"}, RunID: "r"}, By: agentfs.Attribution{RunID: "r"}}
	if err := who.Allow(agentfs.OpListFiles); err != nil {
		t.Fatalf("a read: %v", err)
	}
	var forbidden *agentfs.ForbiddenError
	if err := who.Allow(agentfs.OpCreateLink); !errors.As(err, &forbidden) || forbidden.Scope != agentfs.ScopeShare {
		t.Fatalf("a link without share = %v, want FORBIDDEN naming share", err)
	}
	who.By.RunID = "other"
	var pinned *agentfs.PinnedError
	if err := who.Allow(agentfs.OpListFiles); !errors.As(err, &pinned) {
		t.Fatalf("another run = %v, want a *PinnedError", err)
	}
	if err := (agentfs.Caller{}).Allow(agentfs.OpRevokeToken); err != nil {
		t.Fatalf("any token may revoke itself: %v", err)
	}
}

func TestRootScopes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"read", "write"}, []string{"read", "share", "write"}},
		{[]string{"read"}, []string{"read"}},
		{[]string{"write"}, []string{"write"}},
		{[]string{"delegate", "read", "share", "write"}, []string{"delegate", "read", "share", "write"}},
	} {
		if got := agentfs.RootScopes(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("RootScopes(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzGrant holds the grant parser to its rules for any prefixes, scopes,
// pins and expiry: a grant it accepts has known scopes, folders that are
// valid paths ending in "/", none inside another, that cover what they
// name; normalizing it again changes nothing; and it lies within itself.
func FuzzGrant(f *testing.F) {
	f.Add("reports/", "a/../b", "read", "write", "run-1", int64(3600), int64(100))
	f.Add("x", "x/y", "delegate", "share", "", int64(-1), int64(0))
	f.Add("/", "", "admin", "", "a b", int64(0), int64(-5))
	f.Add("caf\u00e9/\x00", "\u202e", "read", "read", "r", int64(1), int64(1))
	f.Fuzz(func(t *testing.T, p1, p2, s1, s2, run string, expiresIn, maxBytes int64) {
		in := agentfs.Grant{Scopes: []string{s1, s2}, Prefixes: []string{p1, p2}, RunID: run, MaxBytes: maxBytes}
		if expiresIn > 0 && expiresIn < 1<<40 {
			at := time.Unix(1_800_000_000, 0).Add(time.Duration(expiresIn) * time.Second)
			in.ExpiresAt = &at
		}
		g, err := agentfs.NormalizeGrant(in)
		if err != nil {
			var invalid *agentfs.InvalidGrantError
			if !errors.As(err, &invalid) || invalid.Field == "" {
				t.Fatalf("NormalizeGrant(%+v) = %v, want an *InvalidGrantError naming a field", in, err)
			}
			return
		}
		for _, s := range g.Scopes {
			if !slices.Contains(agentfs.AllScopes, s) {
				t.Fatalf("unknown scope %q accepted", s)
			}
		}
		for i, p := range g.Prefixes {
			if !strings.HasSuffix(p, "/") || !utf8.ValidString(p) || agentfs.ValidatePath(strings.TrimSuffix(p, "/")) != nil {
				t.Fatalf("prefix %q is not a folder", p)
			}
			sibling := strings.TrimSuffix(p, "/") + "-x/f"
			if !g.Covers(p+"f") || g.Covers(sibling) != slices.ContainsFunc(g.Prefixes, func(q string) bool { return strings.HasPrefix(sibling, q) }) {
				t.Fatalf("prefix %q does not cover just its folder", p)
			}
			if coveredByAnother(g.Prefixes, i) {
				t.Fatalf("prefix %q lies inside another of %v", p, g.Prefixes)
			}
		}
		again, err := agentfs.NormalizeGrant(g)
		if err != nil || !slices.Equal(again.Prefixes, g.Prefixes) || !slices.Equal(again.Scopes, g.Scopes) {
			t.Fatalf("normalizing %+v again gave %+v, %v", g, again, err)
		}
		if err := g.Within(g); err != nil {
			t.Fatalf("%+v is not within itself: %v", g, err)
		}
	})
}

// coveredByAnother reports whether prefixes[i] lies inside another of
// prefixes.
func coveredByAnother(prefixes []string, i int) bool {
	for j, q := range prefixes {
		if j != i && strings.HasPrefix(prefixes[i], q) {
			return true
		}
	}
	return false
}
