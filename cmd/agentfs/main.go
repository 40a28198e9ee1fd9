// Command agentfs is the AgentFS server, its administration tool and its
// command-line client:
//
//	agentfs serve                 run the HTTP API (applies migrations first)
//	agentfs migrate               apply database migrations and create the bucket
//	agentfs token create|list|revoke
//	agentfs admin block|unblock
//	agentfs healthcheck           exit 0 when the server is ready (for containers)
//	agentfs mcp                   serve the MCP tools over stdio (see agentfs mcp --help)
//	agentfs put|upload|batch|get|cat|cp|sync|ls|rm|restore|protocol   the client verbs
//	agentfs versions|revert|mv|share|expire               file history, sharing, expiry
//	agentfs uploads|batches|events                        what happened: sessions, batches, the event feed
//	agentfs run show|archive|revert                       what one run did, its files as one archive, undoing it
//	agentfs help [COMMAND]        every command explains itself, also with --help
//	agentfs version               the version and commit it was built from
//
// It is configured by AGENTFS_* environment variables; see docs/operating.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first Ctrl-C asks the command to stop and say what it kept; a
	// second one ends the process at once.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errNoMatches) {
			fmt.Fprintln(os.Stderr, "agentfs:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for a wrong invocation, 130 for an interrupted command
// (as a shell reports Ctrl-C), 1 for any other failure.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, context.Canceled):
		return 130
	}
	return 1
}

// run is the whole program; main only supplies the process's environment.
// Errors come back without the "agentfs:" prefix, which main adds once.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	p := &proc{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		generalHelp(stderr)
		return usagef("no command given")
	}
	var err error
	switch args[0] {
	case "-h", "--help", "-help":
		generalHelp(stdout)
		return nil
	case "--version", "-version":
		err = printVersion(stdout)
	default:
		c, _ := find(commands, args[:1])
		if c == nil {
			return unknownCommand(args[0])
		}
		err = c.execute(ctx, p, args[1:])
	}
	if errors.Is(err, errHelpShown) {
		return nil
	}
	return err
}

// unknownCommand is the one line a mistyped command gets: what was not
// found, the nearest command if one is near, and where the list is.
func unknownCommand(name string) error {
	hint := "agentfs help lists the commands"
	if near := nearestCommand(name); near != "" {
		hint = fmt.Sprintf("did you mean %s? (%s)", near, hint)
	}
	return usagef("unknown command %q; %s", name, hint)
}

// nearestCommand is the command whose name is within two edits of name,
// and fewer than name has letters (the closest, the first of equals), or "".
func nearestCommand(name string) string {
	best, bestDist := "", min(3, len(name))
	for _, c := range commands {
		if d := editDistance(name, c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// commands is every command of the binary, in the order of the general
// help. It is filled in by init because help refers to it.
var commands []*command

func init() {
	commands = append(append(serverCommands(), append(clientCommands(), mcpCommand())...), helpCommand(), versionCommand())
}

// helpCommand is agentfs help: any command's help, or the list of them.
func helpCommand() *command {
	return &command{
		name:    "help",
		summary: "show the help of a command: agentfs help token create",
		usage:   "agentfs help [COMMAND [SUBCOMMAND]]",
		help: `Prints the help of a command, the same as agentfs COMMAND --help: what it
does, its flags, an example and the environment it reads. Without a
command it lists them all.

Example:
  agentfs help put
`,
		flags: func(*flag.FlagSet) action { return helpCmd },
	}
}

// versionCommand is agentfs version: what the binary was built from.
func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version and the commit it was built from (also --version)",
		usage:   "agentfs version",
		help: `Prints the module version and the version control commit the binary was
built from, as Go recorded them. A binary built from a work tree says
"(devel)"; one built without version control information (go build
-buildvcs=false, or a source tree without .git) says that its commit is
unknown.

Example:
  agentfs --version
`,
		flags: func(*flag.FlagSet) action {
			return func(_ context.Context, p *proc, args []string) error {
				if len(args) != 0 {
					return usagef("version takes no arguments")
				}
				return printVersion(p.stdout)
			}
		},
	}
}

// helpCmd prints the help of the command its arguments name.
func helpCmd(_ context.Context, p *proc, args []string) error {
	if len(args) == 0 {
		generalHelp(p.stdout)
		return nil
	}
	c, n := find(commands, args)
	if c == nil || n != len(args) {
		return usagef("no help for %q: no such command (agentfs help lists them)", strings.Join(args, " "))
	}
	c.printHelp(p.stdout, nil)
	return nil
}
