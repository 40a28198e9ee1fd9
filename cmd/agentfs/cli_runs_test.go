package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
	"github.com/agentfs/agentfs/internal/testkit"
)

// archiveEntries reads a zip or tar into path -> content.
func archiveEntries(t *testing.T, format string, data []byte) map[string]string {
	t.Helper()
	if format == "zip" {
		return testkit.Unzip(t, data)
	}
	return testkit.Untar(t, bytes.NewReader(data))
}

func entryNames(m map[string]string) string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// runVerb runs a client verb with the cliRun given, as a terminal would
// see it when human or stderrTTY are set.
func runVerb(t *testing.T, env cliEnv, cli *cliRun, setup func(*flag.FlagSet) verbFunc, args ...string) error {
	t.Helper()
	c, err := newCLIClient(func(k string) string { return env[k] }, false)
	if err != nil {
		t.Fatal(err)
	}
	cli.client, cli.maxAttempts = c, 8
	fs := flag.NewFlagSet(cli.name, flag.ContinueOnError)
	verb := setup(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		t.Fatal(err)
	}
	return verb(context.Background(), cli, pos)
}

// TestCLIRunArchive: the archive of a run's live files lands in a file
// (whole or not at all), in a directory under the server's name, or on
// stdout when that is not a terminal; a terminal is refused, and a large
// one shows the bytes received.
func TestCLIRunArchive(t *testing.T) {
	t.Parallel()
	srv, env := servedCLI(t, "cli-arch/run")
	env.file(t, "put", writeLocal(t, "a.md", "# a"), "notes/a.md")
	env.file(t, "put", writeLocal(t, "a.md", "# a, again"), "notes/a.md", "--replace")
	env.file(t, "put", writeLocal(t, "b.txt", "b"), "notes/deep/b.txt")
	gone := env.file(t, "put", writeLocal(t, "g.txt", "g"), "notes/gone.txt")
	env.file(t, "rm", gone.ID)
	env.with("AGENTFS_RUN_ID", "cli-arch-other").file(t, "put", writeLocal(t, "o.txt", "o"), "notes/other.txt")
	want := map[string]string{"notes/a.md": "# a, again", "notes/deep/b.txt": "b"}

	t.Run("ToAFile", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run.zip")
		stdout, stderr, err := env.run("run", "archive", "cli-arch/run", out)
		var res archiveResult
		if err != nil || json.Unmarshal([]byte(stdout), &res) != nil {
			t.Fatalf("run archive: %q, %v\n%s", stdout, err, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if res != (archiveResult{RunID: "cli-arch/run", Format: "zip", Path: out, SizeBytes: int64(len(data))}) {
			t.Fatalf("printed %+v for %d bytes", res, len(data))
		}
		if got := archiveEntries(t, "zip", data); entryNames(got) != entryNames(want) || got["notes/a.md"] != want["notes/a.md"] ||
			got["notes/deep/b.txt"] != "b" {
			t.Fatalf("the zip holds %v, want %v", got, want)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*")); len(left) != 0 {
			t.Fatalf("temporary files left behind: %v", left)
		}
	})

	t.Run("TarInADirectoryByOUTsName", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, err := env.run("run", "archive", "cli-arch/run", dir+string(filepath.Separator), "--format", "tar")
		var res archiveResult
		if err != nil || json.Unmarshal([]byte(stdout), &res) != nil || res.Path != filepath.Join(dir, "run-cli-arch_run.tar") {
			t.Fatalf("run archive into a directory: %q, %v\n%s", stdout, err, stderr)
		}
		data, err := os.ReadFile(res.Path)
		if err != nil {
			t.Fatal(err)
		}
		if got := archiveEntries(t, "tar", data); entryNames(got) != entryNames(want) {
			t.Fatalf("the tar holds %v", got)
		}
		named := filepath.Join(dir, "by-name.tar")
		if _, _, err := env.run("run", "archive", "cli-arch/run", named); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(named); entryNames(archiveEntries(t, "tar", data)) != entryNames(want) {
			t.Fatal("an OUT ending in .tar did not get a tar")
		}
	})

	t.Run("ToStdout", func(t *testing.T) {
		for _, args := range [][]string{{"run", "archive", "cli-arch/run"}, {"run", "archive", "cli-arch/run", "-"}} {
			stdout, stderr, err := env.run(args...)
			if err != nil || stderr != "" {
				t.Fatalf("%v: %v, stderr %q", args, err, stderr)
			}
			if got := archiveEntries(t, "zip", []byte(stdout)); entryNames(got) != entryNames(want) {
				t.Fatalf("%v wrote %v", args, got)
			}
		}
	})

	t.Run("RefusesATerminal", func(t *testing.T) {
		var stdout bytes.Buffer
		cli := &cliRun{name: "run archive", stdout: &stdout, stderr: io.Discard, human: true}
		err := runVerb(t, env, cli, runArchiveFlags, "cli-arch/run")
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "terminal") || !strings.Contains(err.Error(), "> run.zip") || stdout.Len() != 0 {
			t.Fatalf("archive to a terminal: %v (exit %d), %d bytes written", err, exitCode(err), stdout.Len())
		}
		out := filepath.Join(t.TempDir(), "t.zip")
		stdout.Reset()
		if err := runVerb(t, env, cli, runArchiveFlags, "cli-arch/run", out); err != nil || !strings.HasPrefix(stdout.String(), "wrote ") ||
			!strings.Contains(stdout.String(), out) {
			t.Fatalf("to a file from a terminal: %v, %q", err, stdout.String())
		}
	})

	t.Run("ShowsBytesOnATerminal", func(t *testing.T) {
		// The rate's unit depends on how fast the machine is: any unit will do.
		rateShown := regexp.MustCompile(`[0-9]+\.[0-9] (B|KiB|MiB|GiB)/s`)
		big, _, _ := randomLocal(t, "big.bin", 2<<20, 9)
		benv := env.with("AGENTFS_RUN_ID", "cli-arch-big")
		benv.file(t, "put", big, "notes/big.bin")
		var stdout, stderr bytes.Buffer
		cli := &cliRun{name: "run archive", stdout: &stdout, stderr: &stderr, stderrTTY: true}
		if err := runVerb(t, benv, cli, runArchiveFlags, "cli-arch-big", "-"); err != nil {
			t.Fatal(err)
		}
		got := stderr.String()
		if !strings.Contains(got, "\rdownloading ") || !rateShown.MatchString(got) || !strings.HasSuffix(got, "\x1b[K\n") ||
			strings.Contains(got, "%") {
			t.Fatalf("drew %q, want the bytes and the rate, without a bar", got)
		}
		if entries := archiveEntries(t, "zip", stdout.Bytes()); len(entries["notes/big.bin"]) != 2<<20 {
			t.Fatalf("archive entries %s", entryNames(entries))
		}
	})

	t.Run("ACutDownloadLeavesNothing", func(t *testing.T) {
		proxy := newArchiveCutter(t, srv.URL)
		dir := t.TempDir()
		out := filepath.Join(dir, "cut.zip")
		stdout, _, err := env.with("AGENTFS_URL", proxy).run("run", "archive", "cli-arch/run", out)
		expectNext(t, err, "the archive stopped after", "unexpected EOF", "nothing was written to "+out)
		if left, _ := os.ReadDir(dir); len(left) != 0 || stdout != "" || exitCode(err) != 1 {
			t.Fatalf("a cut download left %v, printed %q (exit %d)", left, stdout, exitCode(err))
		}
		_, _, err = env.with("AGENTFS_URL", proxy).run("run", "archive", "cli-arch/run")
		expectNext(t, err, "the archive on stdout is incomplete")
	})

	t.Run("UnknownRun", func(t *testing.T) {
		env.expectFailure(t, "NOT_FOUND", "run", "archive", "cli-nobody", filepath.Join(t.TempDir(), "x.zip"))
		_, _, err := env.run("run", "archive", "cli-nobody")
		expectNext(t, err, "cli-nobody", "AGENTFS_RUN_ID")
	})
}

// newArchiveCutter is a proxy to target that relays the status, the
// headers and half the body of every answer, then drops the connection.
func newArchiveCutter(t *testing.T, target string) string {
	t.Helper()
	return newRelay(t, target, func(*http.Request) relayAnswer {
		return func(w http.ResponseWriter, res *http.Response, body []byte) {
			copyHeader(w, res)
			w.Header().Del("Content-Length")
			w.WriteHeader(res.StatusCode)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	})
}

// TestCLIRunRevert: a run is undone by a batch, waited for with --wait;
// without it the command that waits is printed and replays the same
// batch; a file changed by another run since fails, and the error says
// how --force undoes it anyway.
func TestCLIRunRevert(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-rev-undo")
	c := env.directClient(t)
	content := func(path string) string {
		t.Helper()
		l, err := c.ListFiles(context.Background(), client.ListOptions{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Data) == 0 {
			return ""
		}
		r, err := c.FileContent(context.Background(), l.Data[0].ID, client.ContentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		return string(b)
	}
	as := func(run string) cliEnv { return env.with("AGENTFS_RUN_ID", run) }
	batchOut := func(stdout string) client.Batch {
		t.Helper()
		var b client.Batch
		if err := json.Unmarshal([]byte(stdout), &b); err != nil || b.ID == "" {
			t.Fatalf("printed %q, want a batch: %v", stdout, err)
		}
		return b
	}

	t.Run("Wait", func(t *testing.T) {
		as("cli-rev-setup").file(t, "put", writeLocal(t, "base.md", "original"), "notes/base.md")
		as("cli-rev-run").file(t, "put", writeLocal(t, "base.md", "overwritten"), "notes/base.md", "--replace")
		as("cli-rev-run").file(t, "put", writeLocal(t, "new.md", "new"), "notes/new.md")
		stdout, stderr, err := env.run("run", "revert", "cli-rev-run", "--wait")
		if err != nil {
			t.Fatalf("run revert --wait: %v\n%s", err, stderr)
		}
		b := batchOut(stdout)
		if b.Status != client.BatchSucceeded || b.Counts.Total != 2 {
			t.Fatalf("revert batch %+v", b)
		}
		if !strings.Contains(stderr, "item 0 notes/new.md: undone (deleted, restorable: file_") ||
			!strings.Contains(stderr, "item 1 notes/base.md: undone (version 3, file_") {
			t.Fatalf("stderr %q, want each item's outcome, newest change first", stderr)
		}
		if content("notes/base.md") != "original" || content("notes/new.md") != "" {
			t.Fatalf("after the revert: base %q, new %q", content("notes/base.md"), content("notes/new.md"))
		}
	})

	t.Run("InTheBackgroundThenWaitWithTheKey", func(t *testing.T) {
		as("cli-rev-bg").file(t, "put", writeLocal(t, "bg.md", "bg"), "notes/bg.md")
		stdout, stderr, err := env.run("run", "revert", "cli-rev-bg", "--key", "cli-rev-k1")
		if err != nil {
			t.Fatalf("run revert: %v\n%s", err, stderr)
		}
		first := batchOut(stdout)
		hint := "to wait for it: agentfs run revert cli-rev-bg --key cli-rev-k1 --wait"
		if !strings.Contains(stderr, "in the background as "+first.ID) || !strings.Contains(stderr, hint) {
			t.Fatalf("stderr %q, want %q", stderr, hint)
		}
		stdout, stderr, err = env.run("run", "revert", "cli-rev-bg", "--key", "cli-rev-k1", "--wait")
		if err != nil {
			t.Fatalf("waiting with the key: %v\n%s", err, stderr)
		}
		if again := batchOut(stdout); again.ID != first.ID || again.Status != client.BatchSucceeded {
			t.Fatalf("the same key gave %+v, want %s ended", again, first.ID)
		}
		_, _, err = env.run("run", "revert", "cli-rev-bg", "--key", "cli-rev-k1", "--force")
		expectNext(t, err, "IDEMPOTENCY_CONFLICT", "another --key")
	})

	t.Run("ChangedSinceRunThenForce", func(t *testing.T) {
		as("cli-rev-setup").file(t, "put", writeLocal(t, "x.md", "v1"), "notes/x.md")
		as("cli-rev-a").file(t, "put", writeLocal(t, "x.md", "by a"), "notes/x.md", "--replace")
		as("cli-rev-b").file(t, "put", writeLocal(t, "x.md", "by b"), "notes/x.md", "--replace")
		stdout, stderr, err := env.run("run", "revert", "cli-rev-a", "--wait")
		if exitCode(err) != 1 || !strings.Contains(stderr, "item 0 notes/x.md: failed: 409 CHANGED_SINCE_RUN") {
			t.Fatalf("revert over a later change: %v (exit %d)\n%s", err, exitCode(err), stderr)
		}
		expectNext(t, err, "1 of 1 items failed", "the files another run changed after run cli-rev-a (1) were left as they are",
			"agentfs run revert cli-rev-a --force --wait")
		if b := batchOut(stdout); b.Status != client.BatchFailed || content("notes/x.md") != "by b" {
			t.Fatalf("a refused undo: %+v, file %q", b, content("notes/x.md"))
		}
		if _, stderr, err := env.run("run", "revert", "cli-rev-a", "--force", "--wait"); err != nil || content("notes/x.md") != "v1" {
			t.Fatalf("forced: %v\n%s; file %q", err, stderr, content("notes/x.md"))
		}
	})

	t.Run("OneLineOnATerminal", func(t *testing.T) {
		as("cli-rev-term").file(t, "put", writeLocal(t, "t.md", "t"), "notes/t.md")
		var stdout, stderr bytes.Buffer
		cli := &cliRun{name: "run revert", stdout: &stdout, stderr: &stderr, human: true}
		if err := runVerb(t, env, cli, runRevertFlags, "cli-rev-term", "--wait"); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		if got := stdout.String(); !strings.HasPrefix(got, "batch_") ||
			!strings.HasSuffix(got, " succeeded: 1 undo items (1 succeeded, 0 failed, 0 pending)\n") {
			t.Fatalf("printed %q on a terminal", got)
		}
		if !strings.Contains(stderr.String(), "item 0 notes/t.md: undone (deleted") {
			t.Fatalf("stderr %q", stderr.String())
		}
	})

	t.Run("UnknownRun", func(t *testing.T) {
		env.expectFailure(t, "NOT_FOUND", "run", "revert", "cli-nobody")
		_, _, err := env.run("run", "revert", "cli-nobody")
		expectNext(t, err, "cli-nobody", "AGENTFS_RUN_ID")
	})
}

// TestCLIRunUsage: a wrong invocation of run archive or run revert exits 2
// without a request; the help of each names its flags and an example.
func TestCLIRunUsage(t *testing.T) {
	t.Parallel()
	env := offlineEnv()
	expectUsage(t, env,
		usageCase{[]string{"run"}, "Usage: agentfs run", "show, archive, revert or recovery"},
		usageCase{[]string{"run", "erase", "r"}, "Usage: agentfs run", `unknown run command "erase"`},
		usageCase{[]string{"run", "archive"}, "Usage: agentfs run", "RUN_ID and at most one OUT"},
		usageCase{[]string{"run", "archive", "r", "a.zip", "b.zip"}, "Usage: agentfs run", "RUN_ID and at most one OUT"},
		usageCase{[]string{"run", "archive", "r", "--format", "rar"}, "Usage: agentfs run", "zip or tar"},
		usageCase{[]string{"run", "revert"}, "Usage: agentfs run", "one RUN_ID"},
		usageCase{[]string{"run", "revert", "r1", "r2"}, "Usage: agentfs run", "one RUN_ID"},
		usageCase{[]string{"run", "revert", "r", "--forse"}, "Usage: agentfs run", "forse"},
	)
	for args, want := range map[string][]string{
		"run --help":            {"agentfs run archive RUN_ID [OUT]", "archive", "revert", "undo what the run did"},
		"help run archive":      {"--format FORMAT", "agentfs run archive run-1 run-1.zip", "must not be a terminal", "AGENTFS_URL"},
		"run revert --help":     {"--force", "--wait", "--key KEY", "CHANGED_SINCE_RUN", "agentfs run revert run-1 --wait"},
		"help run show":         {"agentfs run show RUN_ID"},
		"help":                  {"run archive (its files), run revert (undo it)"},
		"run archive -h":        {"Usage: agentfs run archive RUN_ID [OUT] [--format zip|tar]"},
		"help run revert extra": nil,
	} {
		stdout, _, err := env.run(strings.Fields(args)...)
		if want == nil {
			if exitCode(err) != 2 {
				t.Errorf("%s: %v, want a usage error", args, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", args, err)
			continue
		}
		for _, w := range want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s printed %q, want %q", args, stdout, w)
			}
		}
	}
}
