package agentfs_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentfs/agentfs"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"644", 0o644, true}, {"0755", 0o755, true}, {"7777", 0o7777, true}, {"0", 0, true}, {"000000", 0, true},
		{"", 0, false}, {"10000", 0, false}, {"8", 0, false}, {"-1", 0, false}, {"+7", 0, false}, {"0x1", 0, false},
		{"0000000", 0, false}, {" 644", 0, false}, {"644 ", 0, false},
	} {
		got, err := agentfs.ParseMode(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMode(%q) = %o, %v; want %o ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestChildCursor(t *testing.T) {
	for _, name := range []string{"a.txt", "src/lib/", "ünï/cödé", strings.Repeat("x", agentfs.MaxPathBytes)} {
		got, err := agentfs.ParseChildCursor(agentfs.ChildCursor(name))
		if err != nil || got != name {
			t.Errorf("round trip of %q: %q, %v", name, got, err)
		}
	}
	for _, bad := range []string{"", "!!", "YQ", agentfs.ChildCursor(""), "Y3w"} {
		if _, err := agentfs.ParseChildCursor(bad); err == nil {
			t.Errorf("ParseChildCursor(%q) accepted", bad)
		}
	}
}

func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"644", "0755", "7777", "10000", "", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := agentfs.ParseMode(s)
		if err == nil && (n < 0 || n > agentfs.MaxMode) {
			t.Fatalf("ParseMode(%q) = %o, out of range", s, n)
		}
	})
}

func FuzzParseChildCursor(f *testing.F) {
	f.Add(agentfs.ChildCursor("src/"))
	f.Add("")
	f.Add("Y3xh")
	f.Fuzz(func(t *testing.T, s string) {
		name, err := agentfs.ParseChildCursor(s)
		if err != nil {
			return
		}
		if name == "" || !utf8.ValidString(name) || len(name) > agentfs.MaxPathBytes+1 {
			t.Fatalf("ParseChildCursor(%q) = %q", s, name)
		}
		if again, err := agentfs.ParseChildCursor(agentfs.ChildCursor(name)); err != nil || again != name {
			t.Fatalf("round trip of %q: %q %v", name, again, err)
		}
	})
}
