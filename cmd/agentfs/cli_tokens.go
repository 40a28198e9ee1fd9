package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/storage"
)

// Tokens from the command line, two ways: against the API (AGENTFS_URL and
// AGENTFS_TOKEN set: a child of that token, which never exceeds it), or
// in the database, the operator's bootstrap (agentfs admin token, and
// agentfs token where no API token is set or --subject names the owner).

// tokenGroup is the token commands under name ("token", or "admin token",
// which always works in the database).
func tokenGroup(name string, dbOnly bool) *command {
	return &command{
		name:    name,
		summary: "create, list and revoke bearer tokens",
		usage: `agentfs ` + name + ` create [--subject NAME] [--scopes read,write] [--prefix P/]... [--run ID] [--agent ID] [--expires-in 1h] [--max-bytes N]
agentfs ` + name + ` list [--subject NAME]
agentfs ` + name + ` revoke TOKEN_OR_ID`,
		help:   tokenHelp(name, dbOnly),
		footer: serverEnvHelp,
		subs: []*command{
			{name: name + " create", summary: "print a new bearer token alone on one line",
				usage: "agentfs " + name + " create [--subject NAME] [--scopes SCOPES] [--prefix P/]... [--run ID] [--agent ID] [--expires-in D] [--max-bytes N]",
				help:  tokenHelp(name, dbOnly), footer: serverEnvHelp, flags: tokenCreateFlags(dbOnly)},
			{name: name + " list", summary: "list tokens: id, subject, scopes, prefixes, expiry, revoked_at",
				usage: "agentfs " + name + " list [--subject NAME]", footer: serverEnvHelp,
				help: `Lists tokens, oldest first, revoked ones included: id, subject, scopes,
prefixes, expiry, created_at and revoked_at; never the token or its hash. A
table on a terminal, a JSON array otherwise. The id is what revoke takes.
` + viaText(dbOnly, "the API token and its descendants", "--subject NAME: only that subject's tokens") + `
Example:
  agentfs ` + name + ` list
`,
				flags: tokenListFlags(dbOnly)},
			{name: name + " revoke", summary: "revoke a token (tok_...) and every token made from it",
				usage: "agentfs " + name + " revoke TOKEN_OR_ID", footer: serverEnvHelp,
				help: `Revokes a token, given its id (tok_..., from list) or the token itself
(in the database), and every token made from it: they authenticate nothing
from then on, on every server within a second. Revoking again is safe.
` + viaText(dbOnly, "a token of AGENTFS_TOKEN's tree, by id", "any token") + `
Example:
  agentfs ` + name + ` revoke tok_01jd8x2m4k9q7v3t5r6w8y0z1a
`,
				flags: tokenRevokeFlags(dbOnly)},
		},
	}
}

func tokenHelp(name string, dbOnly bool) string {
	where := `With AGENTFS_URL and AGENTFS_TOKEN set (and no --subject), it works against
the API: create makes a child of AGENTFS_TOKEN (which needs the delegate
scope) that never exceeds it, list shows that token and its descendants,
revoke revokes a token and every descendant on every server within a
second. Otherwise it works in the database (the operator's bootstrap, as
agentfs admin token does always).`
	if dbOnly {
		where = `It works in the database: the operator's bootstrap of root tokens.`
	}
	return `Bearer tokens authenticate clients as a subject, who owns every file,
upload and batch made with them. Only a token's SHA-256 is stored: a token
is shown once, when it is created. Scopes: read, write, share (links),
delegate (making child tokens). A grant may hold a token to folders
(--prefix reports/ covers reports/a.txt, never reports-old/x), pin it to a
run and an agent, make it expire and cap the bytes it writes.

` + where + `

Examples:
  export AGENTFS_TOKEN=$(agentfs ` + name + ` create --subject agent-1 --scopes read,write,share,delegate)
  agentfs token create --prefix reports/ --run run-7 --scopes read,write --expires-in 1h
  agentfs ` + name + ` revoke tok_01jd8x2m4k9q7v3t5r6w8y0z1a
`
}

// viaText says what a token command does against the API and in the
// database.
func viaText(dbOnly bool, api, db string) string {
	if dbOnly {
		return "In the database: " + db + ".\n"
	}
	return "With AGENTFS_URL and AGENTFS_TOKEN set: " + api + ".\nOtherwise, in the database: " + db + ".\n"
}

// viaAPI reports whether a token command works against the API.
func viaAPI(getenv func(string) string, dbOnly bool, subject string) bool {
	return !dbOnly && subject == "" && getenv("AGENTFS_URL") != "" && getenv("AGENTFS_TOKEN") != ""
}

func tokenCreateFlags(dbOnly bool) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		subject := fs.String("subject", "", "who the token belongs to: a `NAME` (the database's root tokens)")
		scopes := fs.String("scopes", "read,write", "comma-separated `SCOPES`: read, write, share, delegate")
		var prefixes []string
		fs.Func("prefix", "a folder `P/` the token may see and touch (repeat for more; none: every path)", func(v string) error {
			prefixes = append(prefixes, v)
			return nil
		})
		run := fs.String("run", "", "pin the token to this run `ID`")
		agent := fs.String("agent", "", "pin the token to this agent `ID`")
		expires := fs.Duration("expires-in", 0, "how long the token lives, a `DURATION` such as 1h (required against the API)")
		maxBytes := fs.Int64("max-bytes", 0, "how many bytes the token may write in all (`N`; 0: no limit, or the parent's)")
		name := fs.String("name", "", "a `NAME` to tell the token by")
		return func(ctx context.Context, p *proc, args []string) error {
			if len(args) != 0 {
				return usagef("token create takes flags only")
			}
			list, err := parseScopes(*scopes)
			if err != nil {
				return usagef("token create --scopes: %v", err)
			}
			if *expires < 0 || *maxBytes < 0 {
				return usagef("token create: --expires-in and --max-bytes must not be negative")
			}
			g := agentfs.Grant{Scopes: list, Prefixes: prefixes, RunID: *run, AgentID: *agent, MaxBytes: *maxBytes}
			if viaAPI(p.getenv, dbOnly, *subject) {
				return createTokenViaAPI(ctx, p, *name, g, *expires)
			}
			if *subject == "" {
				return usagef("token create needs --subject NAME (or AGENTFS_URL and AGENTFS_TOKEN, to delegate through the API)")
			}
			if *expires > 0 {
				at := time.Now().Add(*expires)
				g.ExpiresAt = &at
			}
			return withStore(ctx, p.getenv, func(store *storage.Store) error {
				t, err := store.CreateRootToken(ctx, *subject, *name, g)
				if err != nil {
					return err
				}
				fmt.Fprintln(p.stdout, t.Secret)
				return nil
			})
		}
	}
}

func createTokenViaAPI(ctx context.Context, p *proc, name string, g agentfs.Grant, expires time.Duration) error {
	if expires == 0 {
		return usagef("token create against the API needs --expires-in, such as 1h")
	}
	c, err := newCLIClient(p.getenv, false)
	if err != nil {
		return err
	}
	t, err := c.CreateToken(ctx, client.TokenOptions{Name: name, Scopes: g.Scopes, Prefixes: g.Prefixes,
		RunID: g.RunID, AgentID: g.AgentID, ExpiresIn: expires, MaxBytes: g.MaxBytes})
	if err != nil {
		return err
	}
	fmt.Fprintln(p.stdout, *t.Token)
	return nil
}

func parseScopes(s string) ([]string, error) {
	var out []string
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if !strings.Contains(","+strings.Join(agentfs.AllScopes, ",")+",", ","+sc+",") || sc == "" {
			return nil, fmt.Errorf("unknown scope %q (want %s)", sc, strings.Join(agentfs.AllScopes, ", "))
		}
		out = append(out, sc)
	}
	return out, nil
}

func tokenListFlags(dbOnly bool) func(fs *flag.FlagSet) action {
	return func(fs *flag.FlagSet) action {
		subject := fs.String("subject", "", "only the tokens of this `NAME` (the database's)")
		return func(ctx context.Context, p *proc, args []string) error {
			if len(args) != 0 {
				return usagef("token list takes flags only")
			}
			if viaAPI(p.getenv, dbOnly, *subject) {
				c, err := newCLIClient(p.getenv, false)
				if err != nil {
					return err
				}
				list, err := c.Tokens(ctx)
				if err != nil {
					return err
				}
				var infos []storage.TokenInfo
				for _, t := range list {
					parent := ""
					if t.ParentID != nil {
						parent = *t.ParentID
					}
					info := storage.TokenInfo{ID: t.ID, Name: t.Name, Scopes: t.Scopes, Prefixes: t.Prefixes,
						ParentID: parent, ExpiresAt: t.ExpiresAt, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}
					if t.RunID != nil {
						info.RunID = *t.RunID
					}
					if t.AgentID != nil {
						info.AgentID = *t.AgentID
					}
					if t.MaxBytes != nil {
						info.MaxBytes = *t.MaxBytes
					}
					infos = append(infos, info)
				}
				return printTokens(p.stdout, infos)
			}
			return withStore(ctx, p.getenv, func(store *storage.Store) error {
				list, err := store.ListTokens(ctx, *subject)
				if err != nil {
					return err
				}
				return printTokens(p.stdout, list)
			})
		}
	}
}

// printTokens prints tokens: a table on a terminal, a JSON array otherwise.
func printTokens(w io.Writer, list []storage.TokenInfo) error {
	if isTerminal(w) {
		return tokenTable(w, list)
	}
	if list == nil {
		list = []storage.TokenInfo{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(list)
}

// tokenTable prints tokens for a person.
func tokenTable(w io.Writer, list []storage.TokenInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUBJECT\tSCOPES\tPREFIXES\tEXPIRES\tCREATED\tREVOKED")
	at := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format(time.DateTime)
	}
	for _, t := range list {
		prefixes := strings.Join(t.Prefixes, ",")
		if prefixes == "" {
			prefixes = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, cmp.Or(t.Subject, "-"), strings.Join(t.Scopes, ","), prefixes,
			at(t.ExpiresAt), t.CreatedAt.Local().Format(time.DateTime), at(t.RevokedAt))
	}
	return tw.Flush()
}

func tokenRevokeFlags(dbOnly bool) func(fs *flag.FlagSet) action {
	return func(*flag.FlagSet) action {
		return func(ctx context.Context, p *proc, args []string) error {
			if len(args) != 1 {
				return usagef("token revoke needs the token or its id")
			}
			if viaAPI(p.getenv, dbOnly, "") {
				c, err := newCLIClient(p.getenv, false)
				if err != nil {
					return err
				}
				if _, err := c.RevokeToken(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintln(p.stdout, "revoked")
				return nil
			}
			return withStore(ctx, p.getenv, func(store *storage.Store) error {
				if err := store.RevokeToken(ctx, args[0]); errors.Is(err, agentfs.ErrNotFound) {
					return errors.New("no such token (agentfs token list shows the ids)")
				} else if err != nil {
					return err
				}
				fmt.Fprintln(p.stdout, "revoked")
				return nil
			})
		}
	}
}
