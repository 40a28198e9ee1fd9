package agentfs_test

import (
	"strings"
	"testing"

	"github.com/agentfs/agentfs"
)

// TestRedactSharePaths takes a share link's secret out of every spelling of
// its path that a trace, a log or a problem could carry, and leaves the
// route templates and everything else alone.
func TestRedactSharePaths(t *testing.T) {
	t.Parallel()
	const secret = "d6jYa2fLEDMTyMDJS3uJ5x-ireA2FXTuVN59mU8Agc4"
	for _, tc := range []struct{ in, want string }{
		{"/s/" + secret, "/s/{secret}"},
		{"/s/" + secret + "/", "/s/{secret}/"},
		{"/s/" + secret + "?download=1", "/s/{secret}?download=1"},
		{"/s/" + secret + "#top", "/s/{secret}#top"},
		{"//s/" + secret, "//s/{secret}"},
		{"http://agentfs.example/s/" + secret, "http://agentfs.example/s/{secret}"},
		{"GET /s/" + secret + " failed", "GET /s/{secret} failed"},
		{`url "/s/` + secret + `"`, `url "/s/{secret}"`},
		{"/%73/" + secret, "/s/{secret}"},
		{"%2Fs%2F" + secret, "/s/{secret}"},
		{"%2fS%2f" + secret, "/s/{secret}"},
		{"/s/" + secret + "%2Fmore", "/s/{secret}"},
		{"/s/a /s/b", "/s/{secret} /s/{secret}"},
		{"/S/" + secret, "/s/{secret}"},
		{"/s/:secret", "/s/:secret"},
		{"GET /s/:secret", "GET /s/:secret"},
		{"/s/{secret}", "/s/{secret}"},
		{"/s/", "/s/"},
		{"/s//x", "/s//x"},
		{"/v1/files/file_1/links", "/v1/files/file_1/links"},
		{"/v1/files?path=a.txt", "/v1/files?path=a.txt"},
		{"SELECT 1", "SELECT 1"},
		{"", ""},
	} {
		if got := agentfs.RedactSharePaths(tc.in); got != tc.want {
			t.Errorf("RedactSharePaths(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzRedactSharePaths: whatever surrounds a share link's path, what comes
// out no longer holds its secret, redacting twice changes nothing more,
// and a string without a slash or a percent sign is left as it is.
func FuzzRedactSharePaths(f *testing.F) {
	for _, s := range [][2]string{{"", ""}, {"http://h", "?q=1"}, {"/s/", "/"}, {"%2f", "%2F"}, {"GET ", " 404"}, {"/s/:secret", "x"}} {
		f.Add(s[0], s[1])
	}
	const secret = "Qm9vdHN0cmFwU2VjcmV0MTIzNDU2Nzg5MA"
	f.Fuzz(func(t *testing.T, before, after string) {
		out := agentfs.RedactSharePaths(before + "/s/" + secret + after)
		if strings.Contains(out, "/s/"+secret) {
			t.Fatalf("%q still holds the secret's path", out)
		}
		if again := agentfs.RedactSharePaths(out); again != out {
			t.Fatalf("redacting %q again gave %q", out, again)
		}
		if plain := before + after; !strings.ContainsAny(plain, "/%") && agentfs.RedactSharePaths(plain) != plain {
			t.Fatalf("%q was changed", plain)
		}
	})
}
