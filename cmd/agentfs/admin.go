package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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
	return []*command{serveCommand(), migrateCommand(), tokenGroup("token", false), adminCommand(), healthcheckCommand()}
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
		summary: "block and unblock files (451); make, list and revoke tokens in the database",
		usage: `agentfs admin block FILE_ID --reason TEXT
agentfs admin unblock FILE_ID
agentfs admin token create|list|revoke`,
		help: `Operator actions on files, whichever subject owns them.

Example:
  agentfs admin block file_0123abcd --reason "reported as malware, under review"
`,
		footer: serverEnvHelp,
		subs: []*command{
			adminBlockCommand(),
			adminUnblockCommand(),
			tokenGroup("admin token", true),
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
