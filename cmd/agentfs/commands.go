package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one verb of the agentfs binary, or a group of subcommands
// (token, admin). Every command explains itself the same way: --help, -h
// and `agentfs help NAME...` print its help on stdout and exit 0; a wrong
// invocation prints its usage lines on stderr and exits 2.
type command struct {
	name    string // the words after agentfs: "put", "token create"
	summary string // one line in the list of commands
	usage   string // synopsis lines, each starting with "agentfs "
	help    string // what it does, then an example
	footer  string // after the flags: the environment it reads
	// flags declares the command's flags and returns what runs it; nil
	// for a group, which runs one of subs.
	flags func(fs *flag.FlagSet) action
	subs  []*command
	// output: what it prints on stdout depends on whether stdout is a
	// terminal (a table, or JSON), so it takes --json and --output.
	output bool
}

// action runs a command with its positional arguments.
type action func(ctx context.Context, p *proc, args []string) error

// proc is what a command gets from the process: its environment and
// output streams.
type proc struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
	// format is what --json or --output asked for: "json", "table", or ""
	// for the default (a table on a terminal, JSON otherwise).
	format string
}

// humanOutput reports whether stdout gets what a person reads (tables and
// short lines) rather than JSON.
func (p *proc) humanOutput() bool {
	switch p.format {
	case formatJSON:
		return false
	case formatTable:
		return true
	}
	return isTerminal(p.stdout)
}

// The output formats of --output.
const (
	formatJSON  = "json"
	formatTable = "table"
)

// outputFlags declares --json and --output on a command whose output
// depends on the terminal; the returned function applies them to p.
func outputFlags(fs *flag.FlagSet) func(p *proc) error {
	asJSON := fs.Bool("json", false, "print JSON, also on a terminal (the same as --output json)")
	output := fs.String("output", "", "print `FORMAT`: json, or table (what a terminal gets), also when piped")
	return func(p *proc) error {
		switch {
		case *asJSON && *output != "" && *output != formatJSON:
			return usagef("--json and --output %s contradict each other", *output)
		case *asJSON:
			p.format = formatJSON
		case *output == "", *output == formatJSON, *output == formatTable:
			p.format = *output
		default:
			return usagef("--output takes json or table, not %q", *output)
		}
		return nil
	}
}

// errUsage marks a wrong invocation: the command's usage was printed on
// stderr, and the exit code is 2.
var errUsage = errors.New("usage")

// usageError is a wrong invocation; it reads as its message alone.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

// usagef is a wrong invocation of a command: its usage is printed.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelpShown ends a command whose help was asked for and printed;
// run turns it into success.
var errHelpShown = errors.New("help shown")

// isHelpArg reports whether arg asks for help.
func isHelpArg(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// find returns the command that the words name, and how many of them it
// used: "token", "create" is token create. A group named without a
// subcommand is itself.
func find(cmds []*command, words []string) (*command, int) {
	var found *command
	n := 0
	for n < len(words) {
		var next *command
		for _, c := range cmds {
			if c.name == strings.TrimSpace(prefixOf(found)+" "+words[n]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		found, cmds, n = next, next.subs, n+1
	}
	return found, n
}

func prefixOf(c *command) string {
	if c == nil {
		return ""
	}
	return c.name
}

// execute runs c with args: a group picks its subcommand, a command parses
// its flags (which may follow the positional arguments) and runs.
func (c *command) execute(ctx context.Context, p *proc, args []string) error {
	if c.flags == nil {
		return c.executeGroup(ctx, p, args)
	}
	if len(args) > 0 && len(c.subs) > 0 {
		// A command with subcommands of its own (batch FILE.json, batch
		// cancel ID): a first argument that names one runs it.
		if sub, n := find([]*command{c}, []string{c.name, args[0]}); n == 2 {
			return sub.execute(ctx, p, args[1:])
		}
	}
	fs := flag.NewFlagSet("agentfs "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported once, by main
	fs.Usage = func() {}
	run := c.flags(fs)
	format := func(*proc) error { return nil }
	if c.output {
		format = outputFlags(fs)
	}
	pos, err := parseInterleaved(fs, args)
	if err == nil {
		err = format(p)
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(p.stdout, fs)
		return errHelpShown
	case errors.Is(err, errUsage):
		c.printShortUsage(p.stderr)
		return err
	case err != nil:
		c.printShortUsage(p.stderr)
		return usagef("%s: %v", c.name, err)
	}
	err = run(ctx, p, pos)
	if errors.Is(err, errUsage) {
		c.printShortUsage(p.stderr)
	}
	return err
}

func (c *command) executeGroup(ctx context.Context, p *proc, args []string) error {
	if len(args) > 0 && isHelpArg(args[0]) {
		// agentfs token help create is agentfs help token create.
		if sub, n := find([]*command{c}, append([]string{c.name}, args[1:]...)); n == len(args) {
			sub.printHelp(p.stdout, nil)
			return errHelpShown
		}
		c.printHelp(p.stdout, nil)
		return errHelpShown
	}
	if len(args) == 0 {
		c.printShortUsage(p.stderr)
		return usagef("%s needs a command: %s", c.name, c.subNames())
	}
	sub, _ := find([]*command{c}, []string{c.name, args[0]})
	if sub == c {
		c.printShortUsage(p.stderr)
		return usagef("unknown %s command %q: want %s", c.name, args[0], c.subNames())
	}
	return sub.execute(ctx, p, args[1:])
}

// subNames lists a group's subcommands: "create, list or revoke".
func (c *command) subNames() string {
	var names []string
	for _, s := range c.subs {
		names = append(names, strings.TrimPrefix(s.name, c.name+" "))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// usageLines renders the synopsis: "Usage: agentfs ...", then the other
// forms aligned under it.
func (c *command) usageLines() string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSpace(c.usage), "\n") {
		if i == 0 {
			b.WriteString("Usage: ")
		} else {
			b.WriteString("       ")
		}
		b.WriteString(strings.TrimSpace(line) + "\n")
	}
	return b.String()
}

// printShortUsage is what a wrong invocation shows on stderr.
func (c *command) printShortUsage(w io.Writer) {
	fmt.Fprintf(w, "%sRun 'agentfs %s --help' for more.\n", c.usageLines(), c.name)
}

// printHelp prints the whole help: synopsis, description and example,
// subcommands or flags, and the environment read. fs holds the flags of a
// command that was parsing; nil makes a fresh set.
func (c *command) printHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n%s", c.usageLines(), strings.TrimLeft(c.help, "\n"))
	if len(c.subs) > 0 {
		fmt.Fprint(w, "\nCommands:\n")
		for _, s := range c.subs {
			fmt.Fprintf(w, "  %-10s %s\n", strings.TrimPrefix(s.name, c.name+" "), s.summary)
		}
		fmt.Fprintf(w, "\nRun 'agentfs %s COMMAND --help' for a command's flags.\n", c.name)
	}
	if c.flags != nil {
		if fs == nil {
			fs = flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			if c.output {
				outputFlags(fs)
			}
		}
		if flags := flagHelp(fs); flags != "" {
			fmt.Fprint(w, "\nFlags:\n", flags)
		}
	}
	if c.footer != "" {
		fmt.Fprint(w, "\n", strings.TrimLeft(c.footer, "\n"))
	}
}

// flagHelp lists flags the way the usage lines spell them: --name VALUE,
// then what it does and its default.
// keyFlag defines --key, the Idempotency-Key of a write verb's request, in
// the same words for every verb; what names the write.
func keyFlag(fs *flag.FlagSet, what string) *string {
	return fs.String("key", "", "the Idempotency-Key of this "+what+", a `KEY` (default: a new random one)")
}

// guardFlags are the flags of a keyed write to one file that may be made
// conditional: --if-match, whose usage says what the verb does only while
// the file has the ETag, and --key (keyFlag).
func guardFlags(fs *flag.FlagSet, ifMatchUsage, what string) (ifMatch, key *string) {
	return fs.String("if-match", "", ifMatchUsage), keyFlag(fs, what)
}

func flagHelp(fs *flag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if len(f.Name) == 1 {
			left = "-" + f.Name
		}
		if value != "" {
			left += " " + value
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		if len(left) > 20 {
			fmt.Fprintf(&b, "  %s\n  %-20s %s\n", left, "", usage)
		} else {
			fmt.Fprintf(&b, "  %-20s %s\n", left, usage)
		}
	})
	return b.String()
}

// parseInterleaved parses flags that may come after positional arguments
// (agentfs put a.txt reports/a.txt --replace) and returns the positional
// ones. Everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// generalHelp lists every command.
func generalHelp(w io.Writer) {
	fmt.Fprint(w, `agentfs: storage for AI agents that is safe to retry

Usage: agentfs COMMAND [ARGUMENTS] [FLAGS]
`)
	for _, section := range []struct {
		title string
		names []string
	}{
		{"Server and administration (read AGENTFS_DATABASE_URL and AGENTFS_S3_*)", []string{"serve", "migrate", "token", "admin", "healthcheck"}},
		{"Client (talks to AGENTFS_URL with AGENTFS_TOKEN; retries only what is safe to repeat)", []string{"put", "upload", "get", "cat", "cp", "sync", "ls", "grep", "mount", "rm", "restore", "checkpoint", "diff", "fork", "merge", "batch", "protocol", "mcp"}},
		{"History, sharing and what happened (the same client)", []string{"versions", "revert", "mv", "share", "expire", "uploads", "batches", "events", "run", "webhook"}},
		{"Other", []string{"help", "version"}},
	} {
		fmt.Fprintf(w, "\n%s:\n", section.title)
		for _, name := range section.names {
			c, _ := find(commands, []string{name})
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprint(w, `
Run 'agentfs help COMMAND' (or agentfs COMMAND --help) for its flags and an
example. Configuration is read from AGENTFS_* environment variables; see
docs/operating.md.
`)
}
