package oauth

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentfs/agentfs"
)

// Claims are what AgentFS takes from a verified access token.
type Claims struct {
	Issuer   string
	Audience []string
	// Subject is the AgentFS subject the token acts as: the claim
	// Config.SubjectClaim names (sub by default).
	Subject string
	// Scopes are the token's scopes, from scope (a space-separated
	// string) or scp (a list), in the order given.
	Scopes []string
	// Prefixes are the folders the token is confined to, from the claim
	// agentfs_prefixes, each ending in "/"; nil when the claim is absent
	// (the whole subject).
	Prefixes  []string
	Expiry    time.Time
	NotBefore time.Time
	IssuedAt  time.Time
	ID        string
}

// PrefixesClaim names the claim that confines a token to folders.
const PrefixesClaim = "agentfs_prefixes"

// wireClaims are the registered and AgentFS claims as JSON has them.
type wireClaims struct {
	Issuer    string           `json:"iss"`
	Audience  jwt.Audience     `json:"aud"`
	Expiry    *jwt.NumericDate `json:"exp"`
	NotBefore *jwt.NumericDate `json:"nbf"`
	IssuedAt  *jwt.NumericDate `json:"iat"`
	ID        string           `json:"jti"`
}

// ParseClaims reads a verified token's payload: the registered claims, the
// subject from subjectClaim, the scopes and the prefixes. It checks their
// shape (a string where a string belongs, bounded lengths, prefixes that
// are folders), not their values against a request: that is check's.
func ParseClaims(payload []byte, subjectClaim string) (*Claims, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(payload, &all); err != nil || all == nil {
		return nil, invalid("the access token's claims are not a JSON object")
	}
	var w wireClaims
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, invalid("the access token's registered claims (iss, aud, exp, nbf, iat, jti) are malformed")
	}
	c := &Claims{Issuer: w.Issuer, Audience: w.Audience, ID: w.ID}
	for dst, src := range map[*time.Time]*jwt.NumericDate{&c.Expiry: w.Expiry, &c.NotBefore: w.NotBefore, &c.IssuedAt: w.IssuedAt} {
		if src != nil {
			*dst = src.Time()
		}
	}
	var err error
	if c.Subject, err = subjectOf(all, subjectClaim); err != nil {
		return nil, err
	}
	if c.Scopes, err = scopesOf(all); err != nil {
		return nil, err
	}
	if c.Prefixes, err = prefixesOf(all); err != nil {
		return nil, err
	}
	return c, nil
}

func subjectOf(all map[string]json.RawMessage, claim string) (string, error) {
	raw, ok := all[claim]
	var s string
	if !ok || json.Unmarshal(raw, &s) != nil || s == "" {
		return "", invalid("the access token has no %s claim holding a string, which names its subject", claim)
	}
	if len(s) > maxSubject || !printable(s) {
		return "", invalid("the access token's %s claim must be 1-%d bytes of printable UTF-8", claim, maxSubject)
	}
	return s, nil
}

// scopesOf reads scope (RFC 9068, RFC 8693: a space-separated string) or,
// without it, scp (a list, or a string as some servers write it).
func scopesOf(all map[string]json.RawMessage) ([]string, error) {
	var scopes []string
	if raw, ok := all["scope"]; ok && !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return nil, invalid("the access token's scope claim must be a space-separated string")
		}
		scopes = strings.Fields(s)
	} else if raw, ok := all["scp"]; ok && !isNull(raw) {
		var err error
		if scopes, err = stringOrList(raw); err != nil {
			return nil, invalid("the access token's scp claim must be a list of strings")
		}
	}
	if len(scopes) > maxScopes {
		return nil, invalid("the access token has more than %d scopes", maxScopes)
	}
	for _, s := range scopes {
		if len(s) > maxScopeBytes || !printable(s) || strings.ContainsAny(s, " \t") {
			return nil, invalid("the access token's scopes must each be 1-%d bytes of printable text without spaces", maxScopeBytes)
		}
	}
	return scopes, nil
}

// prefixesOf reads agentfs_prefixes: absent (or null) is nil, the whole
// subject; otherwise a non-empty list of folders, each normalized as a
// path and ending in "/". An empty list would confine the token to
// nothing, which no issuer means: it is refused.
func prefixesOf(all map[string]json.RawMessage) ([]string, error) {
	raw, ok := all[PrefixesClaim]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, invalid("the access token's %s claim must be a list of folders", PrefixesClaim)
	}
	if len(list) == 0 || len(list) > maxPrefixes {
		return nil, invalid("the access token's %s claim must list 1-%d folders", PrefixesClaim, maxPrefixes)
	}
	out := make([]string, 0, len(list))
	for _, p := range list {
		folder, err := agentfs.NormalizePath(strings.TrimSuffix(p, "/"))
		if err != nil {
			return nil, invalid("the access token's %s claim holds %q, which is not a folder: %v", PrefixesClaim, p, err)
		}
		out = append(out, folder+"/")
	}
	return out, nil
}

func stringOrList(raw json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return strings.Fields(s), nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func printable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// check holds the claims to a request: issued by issuer (a trailing slash
// on either side is forgiven: servers differ on it, and it names the same
// issuer), meant for one of audiences (likewise), and valid at now within
// the leeway. A token without exp is refused: it would never lapse.
func (c *Claims) check(issuer string, audiences []string, now time.Time) error {
	if !sameURL(c.Issuer, issuer) {
		return invalid("the access token was issued by %q, not by the issuer this server trusts (%s)", c.Issuer, issuer)
	}
	if !c.meantFor(audiences) {
		return invalid("the access token's audience %q does not include this resource (%s); ask the authorization server for a token for it (RFC 8707 resource, or Hydra's audience parameter)",
			c.Audience, strings.Join(audiences, " or "))
	}
	switch {
	case c.Expiry.IsZero():
		return invalid("the access token has no exp claim")
	case !now.Before(c.Expiry.Add(leeway)):
		return invalid("the access token expired at %s", c.Expiry.UTC().Format(time.RFC3339))
	case !c.NotBefore.IsZero() && now.Add(leeway).Before(c.NotBefore):
		return invalid("the access token is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	case !c.IssuedAt.IsZero() && now.Add(leeway).Before(c.IssuedAt):
		return invalid("the access token was issued in the future (%s)", c.IssuedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func (c *Claims) meantFor(audiences []string) bool {
	for _, a := range c.Audience {
		for _, want := range audiences {
			if sameURL(a, want) {
				return true
			}
		}
	}
	return false
}

func sameURL(a, b string) bool {
	return a != "" && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// Principal is the AgentFS principal the claims stand for: their subject,
// a grant of their AgentFS scopes (others, such as openid, grant nothing
// here) confined to their folders (agentfs_prefixes; none: every path),
// and the token's own id (tokenID) for the secrets its requests record.
// The grant goes through agentfs.NormalizeGrant as a delegated token's
// does, so both doors hold a token to the same rules.
func (c *Claims) Principal(token string) (agentfs.Principal, error) {
	var scopes []string
	for _, s := range c.Scopes {
		if slices.Contains(agentfs.AllScopes, s) {
			scopes = append(scopes, s)
		}
	}
	g, err := agentfs.NormalizeGrant(agentfs.Grant{Scopes: scopes, Prefixes: c.Prefixes})
	if err != nil {
		return agentfs.Principal{}, invalid("the access token's grant is not one AgentFS takes: %v", err)
	}
	return agentfs.Principal{Subject: c.Subject, Grant: g, TokenID: tokenID(token)}, nil
}
