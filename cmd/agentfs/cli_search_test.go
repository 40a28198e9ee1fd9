package main

import (
	"errors"
	"testing"
)

func TestCLIGrep(t *testing.T) {
	t.Parallel()
	_, env := servedCLI(t, "cli-grep")
	env.file(t, "put", writeLocal(t, "a.go", "package a\n\nfunc Search() {}\nfunc other() {}\n"), "src/a.go")
	env.file(t, "put", writeLocal(t, "b.md", "# Search\nTODO: more\n"), "docs/b.md")
	env.file(t, "put", writeLocal(t, "c.bin", "Search\x00"), "src/c.bin")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grep", "Search"}, "docs/b.md:1:# Search\nsrc/a.go:3:func Search() {}\n"},
		{[]string{"grep", "search", "src/", "-i"}, "src/a.go:3:func Search() {}\n"},
		{[]string{"grep", "func", "-C", "1", "--glob", "**/*.go"}, "src/a.go-2-\nsrc/a.go:3:func Search() {}\nsrc/a.go:4:func other() {}\n"},
		{[]string{"grep", "-F", "()", "src"}, "src/a.go:3:func Search() {}\nsrc/a.go:4:func other() {}\n"},
	} {
		stdout, stderr, err := env.run(tc.args...)
		if err != nil || stdout != tc.want {
			t.Errorf("%v: %q, %v (stderr %q), want %q", tc.args, stdout, err, stderr, tc.want)
		}
	}
	if _, stderr, _ := env.run("grep", "Search", "src/"); stderr != "agentfs grep: 1 binary and 0 too large files not searched\n" {
		t.Errorf("stderr %q", stderr)
	}
	if stdout, _, err := env.run("grep", "nowhere"); !errors.Is(err, errNoMatches) || stdout != "" || exitCode(err) != 1 {
		t.Errorf("no match: %q, %v", stdout, err)
	}
	env.expectFailure(t, "VALIDATION_FAILED", "grep", "a(b")
	if _, _, err := env.run("grep"); exitCode(err) != 2 {
		t.Errorf("grep without a pattern: %v", err)
	}
}
