package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/agentfs/agentfs/envconfig"
	"github.com/agentfs/agentfs/mcpserver"
)

// mcpCommand is agentfs mcp: the MCP tools over stdio, each call through
// the client to a running server.
func mcpCommand() *command {
	return &command{
		name:    "mcp",
		summary: "serve AgentFS as MCP tools over stdio, for MCP clients",
		usage:   "agentfs mcp",
		help:    mcpHelp,
		flags:   func(*flag.FlagSet) action { return mcpCmd },
	}
}

const mcpHelp = `Serves AgentFS as Model Context Protocol tools over stdin/stdout, for a
local MCP client (a desktop assistant, an IDE, an agent framework) that
starts it as a subprocess. Every tool call goes to the AgentFS server at
AGENTFS_URL through the Go client, so it is retried as the client retries,
and every write carries an Idempotency-Key (the tool's idempotency_key, or
one generated per call), so no retry ever writes twice.

Tools: read_text_file, read_media_file, read_multiple_files, write_file,
edit_file, list_directory, directory_tree, search_files, get_file_info,
delete_file, restore_file, list_run_files, move_file, file_history,
revert_file, share_file, run_summary, checkpoint, list_checkpoints, diff,
restore.

Environment:
  AGENTFS_URL                  the AgentFS server (default ` + defaultURL + `)
  AGENTFS_TOKEN                its bearer token (required); a tool that needs
                               a scope the token lacks (write, or read)
                               answers FORBIDDEN naming it
  AGENTFS_AGENT_ID             sent as X-Agent-ID: files the tools create carry it
  AGENTFS_RUN_ID               sent as X-Run-ID; list_run_files and
                               run_summary without arguments answer for
                               this run
  AGENTFS_MCP_MAX_READ_BYTES   text one read returns (default 262144)
  AGENTFS_MCP_MAX_MEDIA_BYTES  base64 read_media_file returns (default 4194304)
  AGENTFS_MCP_MAX_WRITE_BYTES  largest write_file content and edit_file file
                               (default 4194304)
  AGENTFS_MCP_DRAIN_TIMEOUT    how long calls in flight when stdin closes run
                               on before they are cancelled (default 10s);
                               every call is answered before it exits

A desktop client starts it from its JSON configuration, for example:

  {
    "mcpServers": {
      "agentfs": {
        "command": "agentfs",
        "args": ["mcp"],
        "env": {
          "AGENTFS_URL": "https://agentfs.example.com",
          "AGENTFS_TOKEN": "<token from agentfs token create>",
          "AGENTFS_AGENT_ID": "desktop-assistant"
        }
      }
    }
  }

Logs go to stderr. See docs/mcp.md.

Example:
  AGENTFS_URL=http://127.0.0.1:8080 AGENTFS_TOKEN=afs_... agentfs mcp
`

// mcpCmd serves the MCP tools over stdio until the client closes stdin.
func mcpCmd(ctx context.Context, p *proc, args []string) error {
	getenv, stderr := p.getenv, p.stderr
	if len(args) > 0 {
		return usagef("mcp takes no arguments")
	}
	var cfg mcpConfig
	if err := envconfig.Read(getenv, &cfg); err != nil {
		return err
	}
	opts := cfg.Tools
	c, err := newCLIClient(getenv, false)
	if err != nil {
		return err
	}
	backend, err := mcpserver.NewClientBackend(c)
	if err != nil {
		return err
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server, err := mcpserver.New(backend, opts)
	if err != nil {
		return err
	}
	if isTerminal(os.Stdin) {
		fmt.Fprintln(stderr, "agentfs mcp: speaking MCP on stdin/stdout; it is meant to be started by an MCP client (agentfs mcp --help)")
	}
	stdio := &mcpserver.StdioTransport{In: os.Stdin, Out: os.Stdout, Drain: cfg.Drain,
		MaxLine: int(min(mcpserver.MaxBodyBytes(opts.MaxWriteBytes), math.MaxInt32))}
	if err := server.Run(ctx, stdio); err != nil && ctx.Err() == nil && !isClosed(err) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// isClosed reports whether err only says that the client went away.
func isClosed(err error) bool {
	return err == io.EOF || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "closed")
}

// mcpConfig is what agentfs mcp reads from the environment (package
// envconfig): the tools' limits and attribution, and how long calls in
// flight may finish once stdin ends (0: mcpserver.DefaultDrain).
type mcpConfig struct {
	Tools mcpserver.Options
	Drain time.Duration `env:"AGENTFS_MCP_DRAIN_TIMEOUT"`
}
