package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/client"
)

// versions runs agentfs versions and decodes the array it prints.
func (e cliEnv) versions(t *testing.T, args ...string) []client.FileVersion {
	t.Helper()
	return runJSON[[]client.FileVersion](t, e, append([]string{"versions"}, args...)...)
}

// expectNext checks that a failure says what to do next.
func expectNext(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q, want it to mention %q", err, w)
		}
	}
}

func TestCLIVersionsRevertMv(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "hist-run")
	f := env.file(t, "put", writeLocal(t, "a.md", "# one"), "notes/a.md")
	r := env.file(t, "put", writeLocal(t, "a.md", "# two"), "notes/a.md", "--replace")

	vs := env.versions(t, f.ID)
	if len(vs) != 2 || vs[0].Version != 2 || !vs[0].Current || vs[1].Version != 1 || vs[1].Current || vs[1].SHA256 != f.SHA256 {
		t.Fatalf("versions %+v", vs)
	}
	if one := env.versions(t, f.ID, "--limit", "1"); len(one) != 1 || one[0].Version != 2 {
		t.Fatalf("versions --limit 1: %+v", one)
	}
	t.Run("Table", func(t *testing.T) {
		c, err := newCLIClient(func(k string) string { return env[k] }, false)
		if err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		err = versionsFlags(flag.NewFlagSet("versions", flag.ContinueOnError))(context.Background(),
			&cliRun{name: "versions", client: c, stdout: &table, stderr: io.Discard, human: true}, []string{f.ID})
		lines := strings.Split(strings.TrimSpace(table.String()), "\n")
		if err != nil || len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], "2 ") ||
			!strings.HasSuffix(lines[1], "current") || !strings.Contains(lines[2], f.SHA256[:12]) || !strings.Contains(lines[2], "hist-run") {
			t.Fatalf("table %q, %v", table.String(), err)
		}
	})

	t.Run("Revert", func(t *testing.T) {
		_, _, err := env.run("revert", f.ID, "1", "--if-match", f.ETag)
		expectNext(t, err, "PRECONDITION_FAILED", "agentfs versions "+f.ID)
		env.expectFailure(t, "PRECONDITION_FAILED", "revert", f.ID, "1", "--if-match", f.ETag)
		got := env.file(t, "revert", f.ID, "1", "--if-match", r.ETag)
		if got.ID != f.ID || got.Version != 3 || got.SHA256 != f.SHA256 {
			t.Fatalf("revert printed %+v", got)
		}
		_, _, err = env.run("revert", f.ID, "9")
		expectNext(t, err, "NOT_FOUND", "agentfs versions "+f.ID, "agentfs restore "+f.ID)
		_, _, err = env.run("revert", f.ID, "latest")
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "not a version number") {
			t.Fatalf("revert with a word for N: %v (exit %d)", err, exitCode(err))
		}
	})

	t.Run("Move", func(t *testing.T) {
		m := env.file(t, "mv", f.ID, "notes/b.md")
		if m.ID != f.ID || m.Path != "notes/b.md" || m.Version != 3 {
			t.Fatalf("mv printed %+v", m)
		}
		other := env.file(t, "put", writeLocal(t, "c.md", "c"), "notes/c.md")
		env.expectFailure(t, "PATH_EXISTS", "mv", f.ID, "notes/c.md")
		_, _, err := env.run("mv", f.ID, "notes/c.md")
		expectNext(t, err, "--replace", other.ID)
		moved := env.file(t, "mv", f.ID, "notes/c.md", "--replace")
		if moved.Path != "notes/c.md" || moved.ID != f.ID {
			t.Fatalf("mv --replace printed %+v", moved)
		}
		if files := env.list(t, "--path", "notes/c.md", "--deleted"); len(files) != 2 {
			t.Fatalf("files that held notes/c.md: %+v, want the moved one and the deleted one", files)
		}
	})
}

func TestCLIShareExpire(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "hist-share")
	start := time.Now()
	f := env.file(t, "put", writeLocal(t, "s.txt", "shared v1"), "notes/s.txt", "--expires-in", "2h")
	if f.ExpiresAt == nil || f.ExpiresAt.Sub(start) < 119*time.Minute || f.ExpiresAt.Sub(start) > 121*time.Minute {
		t.Fatalf("put --expires-in 2h: expires_at %v", f.ExpiresAt)
	}
	env.file(t, "put", writeLocal(t, "s.txt", "shared v2"), "notes/s.txt", "--replace")
	if u := env.file(t, "upload", writeLocal(t, "u.bin", "through a session"), "notes/u.bin", "--expires-in", "3h"); u.ExpiresAt == nil ||
		u.ExpiresAt.Sub(start) < 179*time.Minute || u.ExpiresAt.Sub(start) > 181*time.Minute {
		t.Fatalf("upload --expires-in 3h: expires_at %v", u.ExpiresAt)
	}
	get := func(u string) (int, string) {
		t.Helper()
		res, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	t.Run("Share", func(t *testing.T) {
		stdout, stderr, err := env.run("share", f.ID)
		if err != nil || strings.Count(stdout, "\n") != 1 || !strings.Contains(stdout, "/s/") || stderr != "" {
			t.Fatalf("share: %q, %v\n%s", stdout, err, stderr)
		}
		if status, body := get(strings.TrimSpace(stdout)); status != 200 || body != "shared v2" {
			t.Fatalf("the link served %d %q", status, body)
		}
		stdout, _, err = env.run("share", f.ID, "--version", "1", "--expires-in", "10m", "--json")
		var l client.Link
		if err != nil || json.Unmarshal([]byte(stdout), &l) != nil || l.URL == nil || l.Version == nil || *l.Version != 1 ||
			l.ExpiresAt.Sub(start) > 11*time.Minute || !strings.HasPrefix(l.ID, "lnk_") {
			t.Fatalf("share --json: %q, %v", stdout, err)
		}
		if status, body := get(*l.URL); status != 200 || body != "shared v1" {
			t.Fatalf("the pinned link served %d %q", status, body)
		}
		env.expectFailure(t, "VALIDATION_FAILED", "share", f.ID, "--expires-in", "8d")
		_, _, err = env.run("share", f.ID, "--expires-in", "8d")
		expectNext(t, err, "1m to 7d")
		_, _, err = env.run("share", f.ID, "--expires-in", "soon")
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "duration") {
			t.Fatalf("share --expires-in soon: %v (exit %d)", err, exitCode(err))
		}
	})

	t.Run("Expire", func(t *testing.T) {
		g := env.file(t, "expire", f.ID, "7d")
		if g.ExpiresAt == nil || g.ExpiresAt.Sub(start) < 7*24*time.Hour-time.Minute || g.ExpiresAt.Sub(start) > 7*24*time.Hour+time.Minute {
			t.Fatalf("expire 7d: %v", g.ExpiresAt)
		}
		if n := env.file(t, "expire", f.ID, "--never"); n.ExpiresAt != nil {
			t.Fatalf("expire --never: %v", n.ExpiresAt)
		}
		env.expectFailure(t, "VALIDATION_FAILED", "expire", f.ID, "30")
		_, _, err := env.run("expire", f.ID, "30")
		expectNext(t, err, "60s to 365d", "agentfs rm "+f.ID)
		for _, args := range [][]string{{"expire", f.ID}, {"expire", f.ID, "1h", "--never"}, {"expire", f.ID, "tomorrow"}} {
			if _, _, err := env.run(args...); exitCode(err) != 2 {
				t.Fatalf("agentfs %v: %v (exit %d), want a usage error", args, err, exitCode(err))
			}
		}
	})
}

func TestParseHumanDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"45s", 45 * time.Second},
		{"3600", time.Hour},
		{"7d", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{" 2d ", 48 * time.Hour},
		{"365d", 365 * 24 * time.Hour},
		{"0d1s", time.Second},
	} {
		if got, err := parseHumanDuration(tc.in); err != nil || got != tc.want {
			t.Errorf("parseHumanDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "0s", "0d", "-1h", "-5", "d", "1.5d", "7dd", "1d-2h", "1d h", "soon", "h1",
		"99999999999d", "9223372036854775807", "36501d", "1d1d", "+5m"} {
		if got, err := parseHumanDuration(in); err == nil {
			t.Errorf("parseHumanDuration(%q) = %v, want an error", in, got)
		}
	}
}

// FuzzParseHumanDuration: any input gives a positive duration within the
// bound, or an error; never a panic.
func FuzzParseHumanDuration(f *testing.F) {
	for _, s := range []string{"90m", "7d", "1d12h", "3600", "-1h", "1.5d", "99999999999d", "1d1d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseHumanDuration(s)
		if err != nil {
			return
		}
		if d <= 0 || d > 2*time.Duration(maxDurationDays)*24*time.Hour {
			t.Fatalf("parseHumanDuration(%q) = %v", s, d)
		}
	})
}

// TestCLIHistoryUsage: every new verb called wrongly says what is wrong,
// shows its usage on stderr and exits 2, before any request.
func TestCLIHistoryUsage(t *testing.T) {
	t.Parallel()
	env := offlineEnv()
	expectUsage(t, env, []usageCase{
		{[]string{"versions"}, "Usage: agentfs versions FILE", "one FILE"},
		{[]string{"revert", "file_x"}, "Usage: agentfs revert FILE N", "a version number N"},
		{[]string{"revert", "file_x", "0"}, "Usage: agentfs revert FILE N", "not a version number"},
		{[]string{"mv", "file_x"}, "Usage: agentfs mv FILE NEWPATH", "NEWPATH"},
		{[]string{"share"}, "Usage: agentfs share FILE", "one FILE"},
		{[]string{"share", "file_x", "--expires-in", "0"}, "Usage: agentfs share FILE", "positive duration"},
		{[]string{"expire", "file_x"}, "Usage: agentfs expire FILE DURATION", "DURATION, or --never"},
		{[]string{"expire", "file_x", "5x"}, "Usage: agentfs expire FILE DURATION", "positive duration"},
		{[]string{"put", "a", "b", "--expires-in", "later"}, "Usage: agentfs put", "positive duration"},
		{[]string{"uploads", "x"}, "Usage: agentfs uploads", "flags only"},
		{[]string{"batches", "--limit", "-1"}, "Usage: agentfs batches", "flags only"},
		{[]string{"batch", "cancel"}, "Usage: agentfs batch cancel BATCH_ID", "one batch ID"},
		{[]string{"events", "now"}, "Usage: agentfs events", "flags only"},
		{[]string{"run"}, "Usage: agentfs run show RUN_ID", "run needs a command"},
		{[]string{"run", "list"}, "Usage: agentfs run show RUN_ID", `unknown run command "list"`},
		{[]string{"run", "show"}, "Usage: agentfs run show RUN_ID", "one RUN_ID"},
	}...)
}
