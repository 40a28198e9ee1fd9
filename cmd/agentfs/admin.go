package main

import (
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
	"github.com/agentfs/agentfs/storage"
)

// serverEnvHelp ends the help of every command that opens the database.
const serverEnvHelp = `Configuration: AGENTFS_DATABASE_URL, and AGENTFS_S3_ENDPOINT with
AGENTFS_S3_ACCESS_KEY and AGENTFS_S3_SECRET_KEY (AGENTFS_S3_BUCKET,
AGENTFS_S3_USE_SSL, AGENTFS_S3_REGION as for serve; agentfs serve --help).
Against the servers of make run, first: source .data/agentfs.env
`

// serverCommands are the commands that run or administer a server: they
// open Postgres and S3 themselves.
func serverCommands() []*command {
	return []*command{serveCommand(), migrateCommand(), tokenCommand(), adminCommand(), healthcheckCommand()}
}

// serveCommand is agentfs serve: the HTTP API, until the process is stopped.
func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "run the HTTP API (applies migrations first)",
		usage:   "agentfs serve",
		help:    serveHelp,
		flags:   func(*flag.FlagSet) action { return serveCmd },
	}
}

// migrateCommand is agentfs migrate: the migrations and the bucket, for
// deploy steps that migrate before starting servers.
func migrateCommand() *command {
	return &command{
		name:    "migrate",
		summary: "apply database migrations and create the bucket, then exit",
		usage:   "agentfs migrate",
		help: `Applies database migrations and creates the bucket, then exits. serve does
the same at start; this is for deploy steps that migrate first. It is safe
while other instances start or run.

Example:
  agentfs migrate
`,
		footer: serverEnvHelp,
		flags:  func(*flag.FlagSet) action { return migrateCmd },
	}
}

// serveCmd runs the API until ctx ends.
func serveCmd(ctx context.Context, p *proc, args []string) error {
	if len(args) != 0 {
		return usagef("serve takes no arguments (configure it with AGENTFS_* variables)")
	}
	return serve(ctx, p.getenv, p.stderr)
}

// migrateCmd applies migrations and creates the bucket, then exits.
func migrateCmd(ctx context.Context, p *proc, args []string) error {
	if len(args) != 0 {
		return usagef("migrate takes no arguments")
	}
	cfg, err := loadConfig(p.getenv)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	store.Close()
	fmt.Fprintln(p.stdout, "migrations applied; bucket", cfg.Storage.S3Bucket, "ready")
	return nil
}

// tokenCommand is agentfs token: the group that creates, lists and revokes
// bearer tokens in the database.
func tokenCommand() *command {
	return &command{
		name:    "token",
		summary: "create, list and revoke bearer tokens",
		usage: `agentfs token create --subject NAME [--scopes read,write]
agentfs token list [--subject NAME]
agentfs token revoke TOKEN_OR_ID`,
		help: `Bearer tokens authenticate clients as a subject, who owns every file,
upload and batch made with them. Only a token's SHA-256 is stored: a token
is shown once, when it is created.

Example:
  export AGENTFS_TOKEN=$(agentfs token create --subject agent-1)
`,
		footer: serverEnvHelp,
		subs: []*command{
			tokenCreateCommand(),
			tokenListCommand(),
			tokenRevokeCommand(),
		},
	}
}

// tokenCreateCommand is agentfs token create: a token shown once, its hash
// stored.
func tokenCreateCommand() *command {
	return &command{
		name:    "token create",
		summary: "print a new bearer token alone on one line",
		usage:   "agentfs token create --subject NAME [--scopes read,write]",
		help: `Creates a bearer token for the subject NAME and prints it alone on one line
of stdout; only its SHA-256 is stored, so it cannot be shown again. Scopes:
read (list and download) and write (everything else).

Examples:
  agentfs token create --subject agent-1
  agentfs token create --subject dashboard --scopes read
`,
		footer: serverEnvHelp,
		flags:  tokenCreateFlags,
	}
}

// tokenListCommand is agentfs token list: the tokens, never their secrets.
func tokenListCommand() *command {
	return &command{
		name:    "token list",
		summary: "list tokens: id, subject, scopes, created_at, revoked_at",
		usage:   "agentfs token list [--subject NAME]",
		help: `Lists tokens, oldest first, revoked ones included: id, subject, scopes,
created_at and revoked_at; never the token or its hash. A table on a
terminal, a JSON array otherwise. The id is what token revoke takes.

Example:
  agentfs token list --subject agent-1
`,
		footer: serverEnvHelp,
		flags:  tokenListFlags,
		output: true,
	}
}

// tokenRevokeCommand is agentfs token revoke, given the token or its id.
func tokenRevokeCommand() *command {
	return &command{
		name:    "token revoke",
		summary: "revoke a token, given itself or its id (tok_...)",
		usage:   "agentfs token revoke TOKEN_OR_ID",
		help: `Revokes a token, given the token itself or its id (tok_..., from token
list): it authenticates nothing from then on. Revoking it again is safe.

Example:
  agentfs token revoke tok_01jd8x2m4k9q7v3t5r6w8y0z1a
`,
		footer: serverEnvHelp,
		flags: func(*flag.FlagSet) action {
			return func(ctx context.Context, p *proc, args []string) error {
				if len(args) != 1 {
					return usagef("token revoke needs the token or its id")
				}
				return revokeToken(ctx, p, args[0])
			}
		},
	}
}

func tokenCreateFlags(fs *flag.FlagSet) action {
	subject := fs.String("subject", "", "who the token belongs to: a `NAME` (required)")
	scopes := fs.String("scopes", "read,write", "comma-separated `SCOPES`: read, write")
	return func(ctx context.Context, p *proc, args []string) error {
		if *subject == "" || len(args) != 0 {
			return usagef("token create needs --subject NAME and no other arguments")
		}
		list, err := parseScopes(*scopes)
		if err != nil {
			return usagef("token create --scopes: %v", err)
		}
		return withStore(ctx, p.getenv, func(store *storage.Store) error {
			token, _, err := store.CreateToken(ctx, *subject, list)
			if err != nil {
				return err
			}
			fmt.Fprintln(p.stdout, token)
			return nil
		})
	}
}

func parseScopes(s string) ([]string, error) {
	var out []string
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if sc != agentfs.ScopeRead && sc != agentfs.ScopeWrite {
			return nil, fmt.Errorf("unknown scope %q (want read, write or both)", sc)
		}
		out = append(out, sc)
	}
	return out, nil
}

func tokenListFlags(fs *flag.FlagSet) action {
	subject := fs.String("subject", "", "only the tokens of this `NAME`")
	return func(ctx context.Context, p *proc, args []string) error {
		if len(args) != 0 {
			return usagef("token list takes flags only")
		}
		return withStore(ctx, p.getenv, func(store *storage.Store) error {
			list, err := store.ListTokens(ctx, *subject)
			if err != nil {
				return err
			}
			if p.humanOutput() {
				return tokenTable(p.stdout, list)
			}
			if list == nil {
				list = []storage.TokenInfo{}
			}
			enc := json.NewEncoder(p.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(list)
		})
	}
}

// tokenTable prints tokens for a person.
func tokenTable(w io.Writer, list []storage.TokenInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUBJECT\tSCOPES\tCREATED\tREVOKED")
	for _, t := range list {
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Subject, strings.Join(t.Scopes, ","),
			t.CreatedAt.Local().Format(time.DateTime), revoked)
	}
	return tw.Flush()
}

func revokeToken(ctx context.Context, p *proc, tokenOrID string) error {
	return withStore(ctx, p.getenv, func(store *storage.Store) error {
		if err := store.RevokeToken(ctx, tokenOrID); errors.Is(err, agentfs.ErrNotFound) {
			return errors.New("no such token (agentfs token list shows the ids)")
		} else if err != nil {
			return err
		}
		fmt.Fprintln(p.stdout, "revoked")
		return nil
	})
}

// withStore opens the configured store (migrating it) for one command.
func withStore(ctx context.Context, getenv func(string) string, fn func(*storage.Store) error) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	return fn(store)
}

// adminCommand is agentfs admin: operator actions on any subject's files.
func adminCommand() *command {
	return &command{
		name:    "admin",
		summary: "block and unblock files (their content and replace answer 451)",
		usage: `agentfs admin block FILE_ID --reason TEXT
agentfs admin unblock FILE_ID`,
		help: `Operator actions on files, whichever subject owns them.

Example:
  agentfs admin block file_0123abcd --reason "reported as malware, under review"
`,
		footer: serverEnvHelp,
		subs: []*command{
			adminBlockCommand(),
			adminUnblockCommand(),
		},
	}
}

// adminBlockCommand is agentfs admin block: a file whose content answers 451.
func adminBlockCommand() *command {
	return &command{
		name:    "admin block",
		summary: "block a file: its content and replace answer 451 with the reason",
		usage:   "agentfs admin block FILE_ID --reason TEXT",
		help: `Blocks a file: reading its content and replacing it answer
451 CONTENT_BLOCKED with TEXT as the detail, until it is unblocked. Its
metadata stays readable and shows "blocked": true.

Example:
  agentfs admin block file_0123abcd --reason "reported as malware, under review"
`,
		footer: serverEnvHelp,
		flags: func(fs *flag.FlagSet) action {
			reason := fs.String("reason", "", "why the file is blocked: `TEXT` shown to callers (required)")
			return func(ctx context.Context, p *proc, args []string) error {
				if len(args) != 1 || strings.TrimSpace(*reason) == "" {
					return usagef("admin block needs a FILE_ID and --reason")
				}
				return blockFile(ctx, p, args[0], true, *reason)
			}
		},
	}
}

// adminUnblockCommand is agentfs admin unblock: lifting a block.
func adminUnblockCommand() *command {
	return &command{
		name:    "admin unblock",
		summary: "lift the block of a file",
		usage:   "agentfs admin unblock FILE_ID",
		help: `Lifts the block of a file: its content and replace work again. Unblocking a
file that is not blocked changes nothing.

Example:
  agentfs admin unblock file_0123abcd
`,
		footer: serverEnvHelp,
		flags: func(*flag.FlagSet) action {
			return func(ctx context.Context, p *proc, args []string) error {
				if len(args) != 1 {
					return usagef("admin unblock needs a FILE_ID")
				}
				return blockFile(ctx, p, args[0], false, "")
			}
		},
	}
}

func blockFile(ctx context.Context, p *proc, id string, block bool, reason string) error {
	return withStore(ctx, p.getenv, func(store *storage.Store) error {
		f, err := store.BlockFile(ctx, id, block, reason)
		if errors.Is(err, agentfs.ErrNotFound) {
			return fmt.Errorf("no such file %s", id)
		}
		if err != nil {
			return err
		}
		if block {
			fmt.Fprintf(p.stdout, "%s blocked\n", f.ID)
		} else {
			fmt.Fprintf(p.stdout, "%s unblocked\n", f.ID)
		}
		return nil
	})
}
