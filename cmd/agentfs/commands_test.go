package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// everyCommand lists each command and subcommand, groups included.
func everyCommand() []*command {
	var out []*command
	var walk func([]*command)
	walk = func(cmds []*command) {
		for _, c := range cmds {
			out = append(out, c)
			walk(c.subs)
		}
	}
	walk(commands)
	return out
}

// TestHelpIsUniform: every command and subcommand prints its own help on
// stdout and succeeds, whichever way it is asked for, and that help has a
// synopsis and an example.
func TestHelpIsUniform(t *testing.T) {
	t.Parallel()
	all := everyCommand()
	if len(all) < 20 {
		t.Fatalf("only %d commands found", len(all))
	}
	for _, c := range all {
		words := strings.Fields(c.name)
		for _, args := range [][]string{
			append(append([]string{}, words...), "--help"),
			append(append([]string{}, words...), "-h"),
			append([]string{"help"}, words...),
		} {
			t.Run(strings.Join(args, "_"), func(t *testing.T) {
				t.Parallel()
				stdout, stderr, err := cliEnv{}.run(args...)
				if err != nil || exitCode(err) != 0 {
					t.Fatalf("agentfs %s: %v (exit %d)\nstderr: %s", strings.Join(args, " "), err, exitCode(err), stderr)
				}
				if stderr != "" {
					t.Fatalf("stderr %q, want the help on stdout only", stderr)
				}
				if !strings.HasPrefix(stdout, "Usage: agentfs "+c.name) || !strings.Contains(stdout, "Example") {
					t.Fatalf("help of %s:\n%s", c.name, stdout)
				}
				if len(c.subs) > 0 {
					for _, s := range c.subs {
						if !strings.Contains(stdout, strings.TrimPrefix(s.name, c.name+" ")+" ") {
							t.Fatalf("help of %s does not list %s:\n%s", c.name, s.name, stdout)
						}
					}
				}
			})
		}
	}
}

// TestHelpShowsTheCommandsOwnFlags: a subcommand's help is its own, not
// its sibling's (token revoke used to show create's flags).
func TestHelpShowsTheCommandsOwnFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"token", "revoke", "--help"}, "TOKEN_OR_ID", "--subject"},
		{[]string{"token", "create", "--help"}, "--scopes SCOPES", "TOKEN_OR_ID"},
		{[]string{"token", "list", "--help"}, "--subject NAME", "--scopes"},
		{[]string{"help", "put"}, "--threshold SIZE", "--parallel"},
		{[]string{"upload", "--help"}, "--parallel", "--threshold"},
		{[]string{"admin", "block", "--help"}, "--reason", "unblock FILE_ID"},
		{[]string{"healthcheck", "--help"}, "--timeout", "AGENTFS_TOKEN"},
		{[]string{"put", "a.txt", "remote.txt", "--help"}, "AGENTFS_TOKEN", "--reason"},
	} {
		stdout, _, err := cliEnv{}.run(tc.args...)
		if err != nil || !strings.Contains(stdout, tc.want) || strings.Contains(stdout, tc.not) {
			t.Errorf("agentfs %s: %v; want %q and not %q in:\n%s", strings.Join(tc.args, " "), err, tc.want, tc.not, stdout)
		}
	}
}

// offlineEnv is a CLI environment whose server is never reached: for
// invocations refused before any request.
func offlineEnv() cliEnv {
	return cliEnv{"AGENTFS_URL": "http://127.0.0.1:1", "AGENTFS_TOKEN": "t"}
}

// usageCase is a wrong invocation: its args, a line of the usage it shows
// on stderr, and what its error says.
type usageCase struct {
	args  []string
	usage string
	want  string
}

// expectUsage checks that each invocation fails as a usage error (exit 2)
// saying want, shows usage on stderr and prints nothing on stdout.
func expectUsage(t *testing.T, env cliEnv, cases ...usageCase) {
	t.Helper()
	for _, tc := range cases {
		stdout, stderr, err := env.run(tc.args...)
		if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("agentfs %s: %v (exit %d), want a usage error mentioning %q", strings.Join(tc.args, " "), err, exitCode(err), tc.want)
			continue
		}
		if !strings.Contains(stderr, tc.usage) || stdout != "" {
			t.Errorf("agentfs %s: stderr %q, want %q (stdout %q)", strings.Join(tc.args, " "), stderr, tc.usage, stdout)
		}
	}
}

// TestWrongInvocationExits2: a wrong invocation says what is wrong, shows
// the usage lines on stderr and exits 2; a missing server exits 1.
func TestWrongInvocationExits2(t *testing.T) {
	t.Parallel()
	env := offlineEnv()
	expectUsage(t, env, []usageCase{
		{nil, "Usage: agentfs COMMAND", "no command given"},
		{[]string{"put", "a.txt"}, "Usage: agentfs put LOCAL REMOTE_PATH", "put needs LOCAL and REMOTE_PATH"},
		{[]string{"ls", "--colour"}, "Usage: agentfs ls", "ls: flag provided but not defined: -colour"},
		{[]string{"token"}, "Usage: agentfs token create", "token needs a command"},
		{[]string{"token", "revoke"}, "Usage: agentfs token revoke TOKEN_OR_ID", "the token or its id"},
		{[]string{"admin", "block", "file_x"}, "Usage: agentfs admin block", "--reason"},
		{[]string{"version", "now"}, "Usage: agentfs version", "no arguments"},
		{[]string{"healthcheck", "--timeout", "0s"}, "Usage: agentfs healthcheck", "--timeout"},
	}...)
	// An unknown command is one line, which main prints: no usage, no help.
	stdout, stderr, err := env.run("frobnicate")
	if !errors.Is(err, errUsage) || exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown command "frobnicate"; agentfs help lists the commands`) ||
		stdout != "" || stderr != "" {
		t.Errorf("agentfs frobnicate: %v (exit %d), stdout %q, stderr %q", err, exitCode(err), stdout, stderr)
	}
	if code := exitCode(context.Canceled); code != 130 {
		t.Errorf("an interrupted command exits %d", code)
	}
	if code := exitCode(errors.New("boom")); code != 1 {
		t.Errorf("a failure exits %d", code)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		stdout, stderr, err := cliEnv{}.run(args...)
		if err != nil || !strings.HasPrefix(stdout, "agentfs ") || !strings.Contains(stdout, "built with go") || stderr != "" {
			t.Errorf("agentfs %s: %v\nstdout %q\nstderr %q", args[0], err, stdout, stderr)
		}
		if !strings.Contains(stdout, "\ncommit ") {
			t.Errorf("agentfs %s: %q says nothing of the commit", args[0], stdout)
		}
	}
	info := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/agentfs/agentfs/cmd/agentfs", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want []string
	}{
		{"Release", info("v1.2.3", "vcs.revision", "0123abcd", "vcs.time", "2026-11-30T12:00:00Z", "vcs.modified", "false"), true,
			[]string{"agentfs v1.2.3\n", "commit 0123abcd (2026-11-30T12:00:00Z)\n", "built with go1.26.8"}},
		{"WorkTreeWithChanges", info("(devel)", "vcs.revision", "0123abcd", "vcs.modified", "true"), true,
			[]string{"agentfs (devel)\n", "commit 0123abcd, with uncommitted changes\n"}},
		{"WithoutVCS", info(""), true, []string{"agentfs (devel)\n", "commit unknown (built without version control information)\n"}},
		{"NoBuildInfo", nil, false, []string{"unknown version"}},
	} {
		got := versionText(tc.info, tc.ok)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q, want %q", tc.name, got, w)
			}
		}
	}
}

// TestGeneralHelpListsEveryCommand: agentfs help names every command.
func TestGeneralHelpListsEveryCommand(t *testing.T) {
	var help bytes.Buffer
	generalHelp(&help)
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.name) + ` `).Match(help.Bytes()) {
			t.Errorf("agentfs help does not list %s:\n%s", c.name, help.String())
		}
	}
}
