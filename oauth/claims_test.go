package oauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/oauth/oauthtest"
)

func TestParseClaims(t *testing.T) {
	cases := []struct {
		name    string
		payload string
		claim   string
		want    string // subject|scopes|prefixes|aud, or the refusal's words
		bad     bool
	}{
		{name: "ScopeString", payload: `{"sub":"a","scope":"read  write","aud":"x"}`, want: "a|read,write||x"},
		{name: "ScpList", payload: `{"sub":"a","scp":["read"],"aud":["x","y"]}`, want: "a|read||x,y"},
		{name: "ScpString", payload: `{"sub":"a","scp":"read write"}`, want: "a|read,write||"},
		{name: "ScopeWinsOverScp", payload: `{"sub":"a","scope":"read","scp":["write"]}`, want: "a|read||"},
		{name: "NullScopeFallsBackToScp", payload: `{"sub":"a","scope":null,"scp":["write"]}`, want: "a|write||"},
		{name: "NoScopes", payload: `{"sub":"a"}`, want: "a|||"},
		{name: "Prefixes", payload: `{"sub":"a","agentfs_prefixes":["reports","x/y/"]}`, want: "a||reports/,x/y/|"},
		{name: "PrefixesNFC", payload: `{"sub":"a","agentfs_prefixes":["cafe\u0301/"]}`, want: "a||caf\u00e9/|"},
		{name: "NullPrefixes", payload: `{"sub":"a","agentfs_prefixes":null}`, want: "a|||"},
		{name: "OtherSubjectClaim", payload: `{"sub":"a","client_id":"c"}`, claim: "client_id", want: "c|||"},
		{name: "NotAnObject", payload: `[1]`, bad: true, want: "not a JSON object"},
		{name: "Null", payload: `null`, bad: true, want: "not a JSON object"},
		{name: "BadExp", payload: `{"sub":"a","exp":"tomorrow"}`, bad: true, want: "registered claims"},
		{name: "BadAud", payload: `{"sub":"a","aud":7}`, bad: true, want: "registered claims"},
		{name: "SubjectNotAString", payload: `{"sub":7}`, bad: true, want: "no sub claim"},
		{name: "SubjectEmpty", payload: `{"sub":""}`, bad: true, want: "no sub claim"},
		{name: "SubjectTooLong", payload: `{"sub":"` + strings.Repeat("a", 256) + `"}`, bad: true, want: "1-255 bytes"},
		{name: "SubjectNewline", payload: `{"sub":"a\nb"}`, bad: true, want: "printable"},
		{name: "ScopeNotAString", payload: `{"sub":"a","scope":7}`, bad: true, want: "space-separated"},
		{name: "ScpNumbers", payload: `{"sub":"a","scp":[1]}`, bad: true, want: "list of strings"},
		{name: "ScopeWithSpaceInList", payload: `{"sub":"a","scp":["read write"]}`, bad: true, want: "without spaces"},
		{name: "TooManyScopes", payload: `{"sub":"a","scope":"` + strings.Repeat("s ", 65) + `"}`, bad: true, want: "more than 64"},
		{name: "PrefixesNotAList", payload: `{"sub":"a","agentfs_prefixes":"reports/"}`, bad: true, want: "list of folders"},
		{name: "PrefixDotDot", payload: `{"sub":"a","agentfs_prefixes":["a/../b"]}`, bad: true, want: "not a folder"},
		{name: "PrefixNUL", payload: `{"sub":"a","agentfs_prefixes":["a\u0000"]}`, bad: true, want: "not a folder"},
		{name: "PrefixLeadingSlash", payload: `{"sub":"a","agentfs_prefixes":["/etc"]}`, bad: true, want: "not a folder"},
		{name: "PrefixRoot", payload: `{"sub":"a","agentfs_prefixes":["/"]}`, bad: true, want: "not a folder"},
		{name: "PrefixEmpty", payload: `{"sub":"a","agentfs_prefixes":[""]}`, bad: true, want: "not a folder"},
		{name: "PrefixesNone", payload: `{"sub":"a","agentfs_prefixes":[]}`, bad: true, want: "must list 1-64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := tc.claim
			if claim == "" {
				claim = "sub"
			}
			c, err := oauth.ParseClaims([]byte(tc.payload), claim)
			if tc.bad {
				refused(t, err, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Subject + "|" + strings.Join(c.Scopes, ",") + "|" + strings.Join(c.Prefixes, ",") + "|" + strings.Join(c.Audience, ",")
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzParseClaims holds ParseClaims to its promises on any payload: it
// never panics; what it takes has a printable subject within bounds,
// bounded scopes without spaces, and prefixes that are folders.
func FuzzParseClaims(f *testing.F) {
	for _, s := range []string{
		`{"sub":"a","scope":"read write","aud":["x"],"exp":1e10}`,
		`{"sub":"a","scp":["read"],"agentfs_prefixes":["reports/"]}`,
		`{"sub":"a","agentfs_prefixes":["../x"]}`, `{"sub":null}`, `[]`, `{"exp":-1e400}`, `{"aud":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := oauth.ParseClaims(payload, "sub")
		if err != nil {
			var bad *oauth.InvalidTokenError
			if !errors.As(err, &bad) {
				t.Fatalf("err %v is no refusal", err)
			}
			return
		}
		if c.Subject == "" || len(c.Subject) > 255 || !utf8.ValidString(c.Subject) || strings.ContainsAny(c.Subject, "\x00\n\r") {
			t.Fatalf("subject %q", c.Subject)
		}
		if len(c.Scopes) > 64 {
			t.Fatalf("%d scopes", len(c.Scopes))
		}
		for _, s := range c.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\n") {
				t.Fatalf("scope %q", s)
			}
		}
		for _, p := range c.Prefixes {
			if !strings.HasSuffix(p, "/") {
				t.Fatalf("prefix %q is no folder", p)
			}
			if _, err := agentfs.NormalizePath(strings.TrimSuffix(p, "/")); err != nil {
				t.Fatalf("prefix %q: %v", p, err)
			}
		}
	})
}

// FuzzVerify sends any string to a verifier as a token: it never panics,
// every refusal is an InvalidTokenError, and what it takes is what the
// issuer signed.
func FuzzVerify(f *testing.F) {
	b := setup(f, oauthtest.IssuerOptions{}, oauth.Config{})
	now := b.clock.Now()
	good := b.iss.Sign(f, b.iss.Standard(resource, "agent-7", "read", now))
	f.Add(good)
	f.Add(oauthtest.Unsigned(f, b.iss.Standard(resource, "agent-7", "read", now)))
	f.Add(oauthtest.SignWith(f, []byte("0123456789abcdef0123456789abcdef"), jose.HS256, "k", b.iss.Standard(resource, "a", "read", now)))
	f.Add(strings.Repeat("eyJ", 10) + "..")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	if _, err := b.v.Verify(context.Background(), good, []string{resource}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := b.v.Verify(context.Background(), token, []string{resource})
		if err != nil {
			var bad *oauth.InvalidTokenError
			if !errors.As(err, &bad) {
				t.Fatalf("err %v is no refusal", err)
			}
			return
		}
		if c.Subject != "agent-7" || !c.Expiry.After(now) {
			t.Fatalf("took claims %+v the issuer never signed", c)
		}
	})
}
