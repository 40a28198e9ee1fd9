// Command agentfs is the AgentFS server and its administration tool:
//
//	agentfs serve                 run the HTTP API (applies migrations first)
//	agentfs migrate               apply database migrations and create the bucket
//	agentfs token create --subject NAME [--scopes read,write]
//	agentfs token revoke TOKEN_OR_ID
//	agentfs admin block FILE_ID --reason TEXT | unblock FILE_ID
//	agentfs put|upload|batch|get|ls|rm|restore|protocol   the client verbs (see --help of each)
//	agentfs mcp                   serve the MCP tools over stdio (see agentfs mcp --help)
//
// It is configured by AGENTFS_* environment variables; see the README.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "agentfs:", err)
		}
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

var errUsage = errors.New("usage")

const usage = `agentfs: storage for AI agents that is safe to retry

Usage:
  agentfs serve                                   run the HTTP API (applies migrations first)
  agentfs migrate                                 apply database migrations and create the bucket
  agentfs token create --subject NAME [--scopes read,write]
                                                  print a new bearer token alone on one line
  agentfs token revoke TOKEN_OR_ID                revoke a token
  agentfs admin block FILE_ID --reason TEXT       block a file (its content and replace answer 451)
  agentfs admin unblock FILE_ID                   lift the block

Client (talks to a running server; retries only what is safe to repeat):
  agentfs put LOCAL REMOTE_PATH [--replace]       upload a file (a session from 64 MiB on)
  agentfs upload LOCAL REMOTE_PATH [--parallel N] upload a large file in parallel parts, resumable
  agentfs batch FILE.json [--wait]                run many operations as one batch
  agentfs get ID [LOCAL]                          download a file (stdout without LOCAL)
  agentfs get --path REMOTE_PATH [LOCAL]          download the live file at a path
  agentfs ls [--run R] [--agent A] [--prefix P]   list files, newest first
  agentfs rm ID                                   delete a file (restorable)
  agentfs restore ID                              undo a delete
  agentfs protocol                                show the server's retry and idempotency rules
  agentfs mcp                                     serve AgentFS as MCP tools over stdio, for MCP clients
Each verb explains itself with --help.

Configuration is read from AGENTFS_* environment variables; see the README.
The client verbs read AGENTFS_URL, AGENTFS_TOKEN, AGENTFS_AGENT_ID and AGENTFS_RUN_ID.
`

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], getenv, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], getenv, stdout, stderr)
	case "token":
		return tokenCmd(ctx, args[1:], getenv, stdout, stderr)
	case "admin":
		return adminCmd(ctx, args[1:], getenv, stdout, stderr)
	case "put", "upload", "batch", "get", "ls", "rm", "restore", "protocol":
		return clientCmd(ctx, args[0], args[1:], getenv, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args[1:], getenv, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}
