package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what the command writes to tty, a
// person would see; the test reads it from the other end.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("number of the pseudo-terminal: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the pseudo-terminal: %v", err)
	}
	return ptm, tty
}

// runOnTerminal runs the command line with stdout on a terminal and
// returns what the terminal showed (its \r\n turned back into \n).
func (e cliEnv) runOnTerminal(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ptm, tty := openPTY(t)
	shown := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ptm) // ends with EIO once tty is closed
		shown <- b
	}()
	var stderr bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return e[k] }, tty, &stderr)
	tty.Close()
	return strings.ReplaceAll(string(<-shown), "\r\n", "\n"), stderr.String(), err
}

// TestCLIOutputFormat: --json forces JSON on a terminal, --output table
// forces the table when piped, and every client verb takes both.
func TestCLIOutputFormat(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-output")
	f := env.file(t, "put", writeLocal(t, "o.txt", "out"), "out/o.txt")

	shown, stderr, err := env.runOnTerminal(t, "ls", "--prefix", "out/")
	if err != nil || !strings.HasPrefix(shown, "ID") || !strings.Contains(shown, f.ID+" ") || strings.Contains(shown, "{") {
		t.Fatalf("ls on a terminal showed %q (%v, %s), want the table", shown, err, stderr)
	}
	for _, flags := range [][]string{{"--json"}, {"--output", "json"}} {
		shown, stderr, err = env.runOnTerminal(t, append([]string{"ls", "--prefix", "out/"}, flags...)...)
		var files []map[string]any
		if err != nil || json.Unmarshal([]byte(shown), &files) != nil || len(files) != 1 || files[0]["id"] != f.ID {
			t.Fatalf("ls %v on a terminal showed %q (%v, %s), want JSON", flags, shown, err, stderr)
		}
	}
	shown, stderr, err = env.runOnTerminal(t, "get", "out/o.txt", t.TempDir()+"/", "--json")
	var got map[string]any
	if err != nil || json.Unmarshal([]byte(shown), &got) != nil || got["id"] != f.ID {
		t.Fatalf("get --json on a terminal showed %q (%v, %s), want the file as JSON", shown, err, stderr)
	}

	stdout, stderr, err := env.run("ls", "--prefix", "out/", "--output", "table")
	if err != nil || !strings.HasPrefix(stdout, "ID") || strings.Contains(stdout, "{") {
		t.Fatalf("ls --output table, piped: %q (%v, %s), want the table", stdout, err, stderr)
	}
	// A prefix as an argument lists what --prefix lists, with flags on
	// either side of it; given twice it is a usage error.
	env.file(t, "put", writeLocal(t, "p.txt", "other"), "other/p.txt")
	for _, args := range [][]string{{"ls", "out/"}, {"ls", "out/", "--limit", "5"}, {"ls", "--limit", "5", "out/"}} {
		stdout, stderr, err := env.run(args...)
		var files []map[string]any
		if err != nil || json.Unmarshal([]byte(stdout), &files) != nil || len(files) != 1 || files[0]["id"] != f.ID {
			t.Fatalf("agentfs %s: %q (%v, %s), want only %s", strings.Join(args, " "), stdout, err, stderr, f.ID)
		}
	}
	if _, _, err := env.run("ls", "out/", "--prefix", "other/"); exitCode(err) != 2 || !strings.Contains(err.Error(), "prefix once") {
		t.Errorf("agentfs ls out/ --prefix other/: %v, want a usage error", err)
	}
	// --fields shows the id and the members named, in that order, and
	// nothing else; a name the server does not know is its 422.
	stdout, stderr, err = env.run("ls", "out/", "--fields", "path,size_bytes")
	if want := `[` + "\n" + `{"id":"` + f.ID + `","path":"out/o.txt","size_bytes":3}` + "\n]\n"; err != nil || stdout != want {
		t.Fatalf("ls out/ --fields path,size_bytes: %q (%v, %s), want %q", stdout, err, stderr, want)
	}
	stdout, stderr, err = env.run("ls", "out/", "--fields", "size_bytes", "--output", "table")
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); err != nil || len(lines) != 2 ||
		strings.Join(strings.Fields(lines[0]), " ") != "ID SIZE_BYTES" || strings.Join(strings.Fields(lines[1]), " ") != f.ID+" 3" {
		t.Fatalf("ls --fields size_bytes --output table: %q (%v, %s)", stdout, err, stderr)
	}
	if _, stderr, err := env.run("ls", "--fields", "path,colour"); err == nil || !strings.Contains(stderr+err.Error(), "fields") {
		t.Errorf("ls --fields path,colour: %v (%s), want the server's problem about fields", err, stderr)
	}
	for _, args := range [][]string{{"ls", "--output", "yaml"}, {"ls", "--json", "--output", "table"}} {
		if _, _, err := env.run(args...); exitCode(err) != 2 || !strings.Contains(err.Error(), "--output") {
			t.Errorf("agentfs %s: %v, want a usage error about --output", strings.Join(args, " "), err)
		}
	}

	// Every client verb (every command that talks to a server), at any
	// depth, takes both.
	var check func(cs []*command)
	n := 0
	check = func(cs []*command) {
		for _, cmd := range cs {
			check(cmd.subs)
			if cmd.flags == nil || cmd.footer != clientEnvHelp {
				continue
			}
			n++
			var help bytes.Buffer
			cmd.printHelp(&help, nil)
			if !strings.Contains(help.String(), "--json") || !strings.Contains(help.String(), "--output FORMAT") {
				t.Errorf("agentfs %s --help lists no --json and --output:\n%s", cmd.name, help.String())
			}
		}
	}
	check(commands)
	if n < 20 {
		t.Fatalf("only %d client verbs checked", n)
	}
}
