package idempotency_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/internal/testkit"
)

// referenceCanonical is the canonical form as it was first defined: the
// value decoded with UseNumber and encoded again. The fingerprints of
// recorded keys were taken of it, so CanonicalJSON must give the same text
// for every input (a retry after an upgrade is still the same request).
func referenceCanonical(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, idempotency.ErrInvalidJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, idempotency.ErrInvalidJSON
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, idempotency.ErrInvalidJSON
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalCases are texts whose canonical form is easy to get wrong.
var canonicalCases = []string{
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":{"x":1},"a":{"y":2}}`, `{"\u0061":1,"a":2}`,
	`{"é":1,"z":2,"Z":3,"":4}`, `[1, 2.50, -0, 1E+2, 1e-7, 123456789012345678901234567890]`,
	`"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u007f\u0080"`, `"<&>"`, `"\u2028\u2029 \u2027"`,
	"\"\u2028 raw\"", `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\uD83D\uDE00"`,
	"\"\xff\xfe bytes\"", "\"a\xe2\x82\"", "{\"k\xff\":1}", `{"a":[{"c":null,"b":true}],"b":false}`,
	" \t\n{ \"spaced\" : [ 1 , 2 ] }\r\n", `null`, `true`, `0`, `""`, `{}`, `[]`, `[[],{}]`,
	strings.Repeat("[", 500) + strings.Repeat("]", 500),
	`{"operations":[{"op":"put","path":"a.txt","content":"line\nnext \"q\"","encoding":"utf8"}]}`,
	``, `{`, `{"a":1} {"b":2}`, `{"a":1}x`, `nul`, `[1,]`, `{"a"}`, `"\x"`, `"\u12"`, "\"a\x01\"", `01`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

func TestCanonicalJSONMatchesTheReference(t *testing.T) {
	t.Parallel()
	for _, tc := range canonicalCases {
		checkCanonical(t, []byte(tc))
	}
}

// checkCanonical compares CanonicalJSON and JSONContentHash with the
// reference on data.
func checkCanonical(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := referenceCanonical(data)
	got, err := idempotency.CanonicalJSON(data)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("CanonicalJSON(%q) = %q, %v; the reference gives %q, %v", data, got, err, want, wantErr)
	}
	sum, err := idempotency.JSONContentHash(data)
	if wantErr != nil {
		if err == nil {
			t.Fatalf("JSONContentHash(%q) accepted what the reference refuses", data)
		}
		return
	}
	if ref := sha256.Sum256(want); err != nil || !bytes.Equal(sum, ref[:]) {
		t.Fatalf("JSONContentHash(%q) = %x, %v, want the hash of %q", data, sum, err, want)
	}
}

func FuzzCanonicalJSONMatchesTheReference(f *testing.F) {
	testkit.FuzzSeeds(f, canonicalCases, checkCanonical)
}
