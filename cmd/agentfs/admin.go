package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
)

// migrateCmd applies migrations and creates the bucket, then exits.
func migrateCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: agentfs migrate

Apply database migrations and create the bucket, then exit. serve does the
same at start; this is for deploy steps that migrate first. It reads the
same environment as serve (agentfs serve --help).
`)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	store.Close()
	fmt.Fprintln(stdout, "migrations applied; bucket", cfg.Storage.S3Bucket, "ready")
	return nil
}

const tokenUsage = `Usage:
  agentfs token create --subject NAME [--scopes read,write]
  agentfs token revoke TOKEN_OR_ID
`

// tokenCmd creates or revokes bearer tokens.
func tokenCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("%w: token needs create or revoke", errUsage)
	}
	fs := flag.NewFlagSet("token "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	subject := fs.String("subject", "", "who the token belongs to (required)")
	scopes := fs.String("scopes", "read,write", "comma-separated scopes: read, write")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "create":
		list, err := parseScopes(*scopes)
		if err != nil || *subject == "" || fs.NArg() != 0 {
			fmt.Fprint(stderr, tokenUsage)
			return fmt.Errorf("%w: token create needs --subject and valid --scopes", errUsage)
		}
		return createToken(ctx, getenv, stdout, *subject, list)
	case "revoke":
		if fs.NArg() != 1 {
			fmt.Fprint(stderr, tokenUsage)
			return fmt.Errorf("%w: token revoke needs the token or its id", errUsage)
		}
		return revokeToken(ctx, getenv, stdout, fs.Arg(0))
	}
	fmt.Fprint(stderr, tokenUsage)
	return fmt.Errorf("%w: unknown token command %q", errUsage, args[0])
}

func parseScopes(s string) ([]string, error) {
	var out []string
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if sc != agentfs.ScopeRead && sc != agentfs.ScopeWrite {
			return nil, fmt.Errorf("unknown scope %q", sc)
		}
		out = append(out, sc)
	}
	return out, nil
}

func createToken(ctx context.Context, getenv func(string) string, stdout io.Writer, subject string, scopes []string) error {
	return withStore(ctx, getenv, func(store *storage.Store) error {
		token, _, err := store.CreateToken(ctx, subject, scopes)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, token)
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

func revokeToken(ctx context.Context, getenv func(string) string, stdout io.Writer, tokenOrID string) error {
	return withStore(ctx, getenv, func(store *storage.Store) error {
		if err := store.RevokeToken(ctx, tokenOrID); errors.Is(err, agentfs.ErrNotFound) {
			return errors.New("no such token")
		} else if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "revoked")
		return nil
	})
}

const adminUsage = `Usage:
  agentfs admin block FILE_ID --reason TEXT   block a file: its content and replace answer 451 with TEXT
  agentfs admin unblock FILE_ID               lift the block

Example:
  agentfs admin block file_0123abcd --reason "reported as malware, under review"
`

// adminCmd blocks and unblocks files for operators.
func adminCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "block" && args[0] != "unblock") {
		fmt.Fprint(stderr, adminUsage)
		return fmt.Errorf("%w: admin needs block or unblock", errUsage)
	}
	fs := flag.NewFlagSet("admin "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	reason := fs.String("reason", "", "why the file is blocked (shown to callers)")
	id, rest := "", args[1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		id, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	}
	block := args[0] == "block"
	if id == "" || (block && strings.TrimSpace(*reason) == "") {
		fmt.Fprint(stderr, adminUsage)
		return fmt.Errorf("%w: admin %s needs a FILE_ID%s", errUsage, args[0], map[bool]string{true: " and --reason"}[block])
	}
	if !block {
		*reason = ""
	}
	return withStore(ctx, getenv, func(store *storage.Store) error {
		f, err := store.BlockFile(ctx, id, block, *reason)
		if errors.Is(err, agentfs.ErrNotFound) {
			return fmt.Errorf("no such file %s", id)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %sblocked\n", f.ID, map[bool]string{false: "un"}[block])
		return nil
	})
}
