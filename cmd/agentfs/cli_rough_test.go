package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/client"
)

// TestCLIRoughEdges: what a newcomer ran into, each said plainly.
func TestCLIRoughEdges(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-rough")
	f := env.file(t, "put", writeLocal(t, "data.json", `{"n":1}`), "rough/data.json")

	t.Run("PutDirectorySaysCpR", func(t *testing.T) {
		dir := t.TempDir()
		for _, verb := range []string{"put", "upload"} {
			_, _, err := env.run(verb, dir, "rough/")
			if err == nil || !strings.Contains(err.Error(), "cp -r") || strings.Contains(err.Error(), "same command again") {
				t.Fatalf("%s DIR: %v, want it to say cp -r (and not to run it again)", verb, err)
			}
		}
	})
	t.Run("GetIntoMissingDirectoryNamesIt", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "missing-dir") + string(filepath.Separator)
		_, _, err := env.run("get", f.ID, missing)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(missing, "data.json")) ||
			strings.Contains(err.Error(), ".part") || !strings.Contains(err.Error(), "no such directory") {
			t.Fatalf("get into a missing directory: %v, want the user's path named, not a temporary file", err)
		}
	})
	t.Run("UnknownCommandIsOneLine", func(t *testing.T) {
		stdout, stderr, err := env.run("cpy", "a", "b")
		if err == nil || exitCode(err) != 2 || stdout != "" || stderr != "" {
			t.Fatalf("unknown command: %v (exit %d), stdout %q, stderr %q; want only the error", err, exitCode(err), stdout, stderr)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, `unknown command "cpy"`) || !strings.Contains(msg, "agentfs help") ||
			!strings.Contains(msg, "cp") {
			t.Fatalf("error %q, want one line naming the command, the nearest one and agentfs help", msg)
		}
	})
	t.Run("ReplayedWriteSaysSo", func(t *testing.T) {
		local := writeLocal(t, "k.txt", "keyed")
		first, stderr, err := env.run("put", local, "rough/keyed.txt", "--key", "rough-key-1")
		if err != nil || stderr != "" || strings.Contains(first, "replayed") {
			t.Fatalf("first put: %v, stdout %q, stderr %q", err, first, stderr)
		}
		again, stderr, err := env.run("put", local, "rough/keyed.txt", "--key", "rough-key-1")
		if err != nil {
			t.Fatalf("second put: %v\n%s", err, stderr)
		}
		var got struct {
			client.File
			Replayed bool `json:"replayed"`
		}
		if err := json.Unmarshal([]byte(again), &got); err != nil || !got.Replayed || got.ID == "" {
			t.Fatalf("replayed put printed %q (%v), want the file with \"replayed\": true", again, err)
		}
		if !strings.Contains(stderr, "replayed") || !strings.Contains(stderr, "rough-key-1") {
			t.Fatalf("replayed put said %q on stderr, want the replay and its key", stderr)
		}
	})
}

// TestCLIResumedUploadBar: the bar of a resumed upload starts at the bytes
// the session already holds.
func TestCLIResumedUploadBar(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-resume-bar")
	const size, part = 15<<20 + 1000, 5 << 20
	local, data, sum := randomLocal(t, "big", size, 9)
	c, u := interruptedUpload(t, env, "bar/resumed", data, sum, part, 3)
	ctx := context.Background()
	var stderr bytes.Buffer
	cli := &cliRun{name: "upload", client: c, stdout: io.Discard, stderr: &stderr, stderrTTY: true, maxAttempts: 8}
	fs := flag.NewFlagSet("upload", flag.ContinueOnError)
	runUpload := uploadFlags(fs)
	pos, err := parseInterleaved(fs, []string{local, "bar/resumed", "--parallel", "1"})
	if err == nil {
		err = runUpload(ctx, cli, pos)
	}
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, stderr.String())
	}
	out := stderr.String()
	i := strings.Index(out, "\ruploading [")
	if i < 0 {
		t.Fatalf("no uploading bar in %q", out)
	}
	first := out[i+1:]
	first = first[:strings.Index(first, "\x1b[K")]
	if !strings.Contains(first, " 99% 15.0/15.0 MiB") {
		t.Fatalf("the resumed upload's bar started with %q, want it at the 15 MiB already sent", first)
	}
	if !strings.Contains(out, "resuming "+u.ID+": 3 of 4 parts already sent") {
		t.Fatalf("stderr %q, want the resume announced", out)
	}
}
