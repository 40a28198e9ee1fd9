package handlers

import (
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/agentfs/agentfs/internal/testkit"
)

// base64Cases are JSON strings holding base64 (or not) in every way
// DecodeString treats specially: padding, line breaks, data after padding,
// escapes.
var base64Cases = []string{
	`""`, `"AA=="`, `"AAE="`, `"AAEC"`, `"AAECAw=="`, `"A==="`, `"A"`, `"AA"`, `"AAA"`, `"AA=A"`, `"AA==AA=="`,
	`"AA==\n"`, `"A\nA\r\n=="`, `"\n"`, `"AAEC\/v7\/"`, `"AAEC"x`, `"AA\u003d\u003d"`, `"AA= ="`, `"@@@@"`,
	`"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5f"`,
	`"AAE=\nAAE="`, `"AAE"`, `"AB=="`, `"ABC="`,
}

func TestBase64SizeMatchesDecodeString(t *testing.T) {
	t.Parallel()
	for _, tc := range base64Cases {
		checkBase64Size(t, []byte(tc))
	}
}

func FuzzBase64Size(f *testing.F) {
	testkit.FuzzSeeds(f, base64Cases, checkBase64Size)
}

// checkBase64Size compares base64Size of a JSON string with what
// DecodeString makes of the string encoding/json decodes.
func checkBase64Size(t *testing.T, s []byte) {
	t.Helper()
	var text string
	if json.Unmarshal(s, &text) != nil {
		return
	}
	want, wantErr := base64.StdEncoding.DecodeString(text)
	n, err := base64Size(s)
	if (err != nil) != (wantErr != nil) || err == nil && n != int64(len(want)) {
		t.Fatalf("base64Size(%s) = %d, %v; DecodeString gives %d bytes, %v", s, n, err, len(want), wantErr)
	}
}
