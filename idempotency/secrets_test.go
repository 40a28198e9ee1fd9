package idempotency_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/idempotency"
)

func randomKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, idempotency.RecordKeyBytes)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestParseRecordKeys reads AGENTFS_RECORD_KEY in every spelling of base64
// and refuses, without repeating it, anything that is not one or more keys
// of 32 bytes.
func TestParseRecordKeys(t *testing.T) {
	t.Parallel()
	raw := bytes.Repeat([]byte{0xfb, 0xff, 0x3e}, 11)[:32] // base64 holds + / or - _
	other := randomKey(t)
	for _, tc := range []struct {
		name, in string
		keys     int
		ok       bool
	}{
		{"StandardPadded", base64.StdEncoding.EncodeToString(raw), 1, true},
		{"StandardUnpadded", base64.RawStdEncoding.EncodeToString(raw), 1, true},
		{"URLPadded", base64.URLEncoding.EncodeToString(raw), 1, true},
		{"URLUnpadded", base64.RawURLEncoding.EncodeToString(raw), 1, true},
		{"SurroundingSpace", " \t" + base64.StdEncoding.EncodeToString(raw) + "\n", 1, true},
		{"TwoKeys", base64.StdEncoding.EncodeToString(raw) + "," + base64.StdEncoding.EncodeToString(other), 2, true},
		{"TwoKeysSpaced", base64.StdEncoding.EncodeToString(raw) + " , " + base64.RawURLEncoding.EncodeToString(other), 2, true},
		{"RejectsEmpty", "", 0, false},
		{"RejectsBlank", "   ", 0, false},
		{"RejectsEmptySecond", base64.StdEncoding.EncodeToString(raw) + ",", 0, false},
		{"RejectsShort", base64.StdEncoding.EncodeToString(raw[:16]), 0, false},
		{"RejectsLong", base64.StdEncoding.EncodeToString(append(raw, 1)), 0, false},
		{"RejectsHex", strings.Repeat("ab", 32), 0, false},
		{"RejectsMixedAlphabets", "+" + base64.RawURLEncoding.EncodeToString(raw)[1:42] + "-", 0, false},
		{"RejectsPassphrase", "correct horse battery staple", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, err := idempotency.ParseRecordKeys(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseRecordKeys(%q): %v, want ok %v", tc.in, err, tc.ok)
			}
			if err != nil {
				if trimmed := strings.TrimSpace(tc.in); len(trimmed) > 8 && strings.Contains(err.Error(), trimmed) {
					t.Fatalf("the error repeats the value: %v", err)
				}
				return
			}
			sealed, err := k.Seal([]byte("secret"), []byte("aad"))
			if err != nil {
				t.Fatal(err)
			}
			single, _ := idempotency.NewRecordKeys(raw)
			if got, err := single.Open(sealed, []byte("aad")); err != nil || string(got) != "secret" {
				t.Fatalf("the first key does not open what the keys sealed: %q %v", got, err)
			}
		})
	}
}

// TestSealOpensOnlyWithItsKeyAndRecord: a sealed secret opens with the key
// that sealed it (also when it is no longer the first, after a rotation),
// and not under another key, with other additional data (another subject,
// key or token), or altered in any byte.
func TestSealOpensOnlyWithItsKeyAndRecord(t *testing.T) {
	t.Parallel()
	oldKey, newKey := randomKey(t), randomKey(t)
	before, _ := idempotency.NewRecordKeys(oldKey)
	rotated, _ := idempotency.NewRecordKeys(newKey, oldKey)
	after, _ := idempotency.NewRecordKeys(newKey)
	aad := idempotency.SealedFor("alice", "link-1", "tok_a")
	sealed, err := before.Seal([]byte(`{"url":"http://x/s/abc"}`), aad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("abc")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if got, err := rotated.Open(sealed, aad); err != nil || string(got) != `{"url":"http://x/s/abc"}` {
		t.Fatalf("a rotation lost the old key's records: %q %v", got, err)
	}
	again, _ := before.Seal([]byte(`{"url":"http://x/s/abc"}`), aad)
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	for name, tc := range map[string]struct {
		keys *idempotency.RecordKeys
		data []byte
		aad  []byte
	}{
		"KeyRotatedAway":  {after, sealed, aad},
		"OtherSubject":    {before, sealed, idempotency.SealedFor("bob", "link-1", "tok_a")},
		"OtherKey":        {before, sealed, idempotency.SealedFor("alice", "link-2", "tok_a")},
		"OtherToken":      {before, sealed, idempotency.SealedFor("alice", "link-1", "tok_b")},
		"NoKeys":          {nil, sealed, aad},
		"Empty":           {before, nil, aad},
		"Truncated":       {before, sealed[:12], aad},
		"UnknownVersion":  {before, append([]byte{9}, sealed[1:]...), aad},
		"FlippedLastByte": {before, append(append([]byte(nil), sealed[:len(sealed)-1]...), sealed[len(sealed)-1]^1), aad},
	} {
		if got, err := tc.keys.Open(tc.data, tc.aad); !errors.Is(err, idempotency.ErrUnsealable) || got != nil {
			t.Errorf("%s: opened %q (%v), want ErrUnsealable", name, got, err)
		}
	}
}

// TestWithholdAndReveal takes secret members out of an answer (null in
// their place, the rest byte for byte as it was) and puts them back.
func TestWithholdAndReveal(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"lnk_1","object":"link","url":"http://x/s/abc","nested":{"url":"keep"},"expires_at":"2026-01-01T00:00:00Z"}` + "\n")
	redacted, withheld, err := idempotency.Withhold(body, []string{"url"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"lnk_1","object":"link","url":null,"nested":{"url":"keep"},"expires_at":"2026-01-01T00:00:00Z"}` + "\n"
	if string(redacted) != want || string(withheld) != `{"url":"http://x/s/abc"}` {
		t.Fatalf("withheld %s from %s", withheld, redacted)
	}
	back, err := idempotency.Reveal(redacted, withheld)
	if err != nil || !bytes.Equal(back, body) {
		t.Fatalf("revealed %s (%v), want %s", back, err, body)
	}
	two, w2, err := idempotency.Withhold([]byte(`{"token":"t","secret":{"a":1},"x":2}`), []string{"secret", "token"})
	if err != nil || string(two) != `{"token":null,"secret":null,"x":2}` || string(w2) != `{"secret":{"a":1},"token":"t"}` {
		t.Fatalf("two secrets: %s %s %v", two, w2, err)
	}
	for name, in := range map[string]string{
		"Missing": `{"id":"x"}`, "Twice": `{"url":"a","url":"b"}`, "NotAnObject": `["url"]`,
		"Trailing": `{"url":"a"} {}`, "Broken": `{"url":`, "Empty": ``,
	} {
		if _, _, err := idempotency.Withhold([]byte(in), []string{"url"}); err == nil {
			t.Errorf("%s: Withhold(%s) took it", name, in)
		}
	}
}

// FuzzWithhold: whatever JSON object an answer is, withholding a member
// leaves null in its place and revealing puts back the same object; what
// is not an object, or lacks the member, is an error, never a panic.
func FuzzWithhold(f *testing.F) {
	for _, s := range []string{`{"url":"u"}`, `{"a":1,"url":[1,2],"b":{"url":3}}` + "\n", `{"url":null}`, `{}`, `[]`, `{"url":"a","url":"b"}`, ` {"x":"\u00e9","url":1} `} {
		f.Add([]byte(s), "url")
	}
	f.Fuzz(func(t *testing.T, body []byte, name string) {
		redacted, withheld, err := idempotency.Withhold(body, []string{name})
		if err != nil {
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(redacted, &got); err != nil || string(got[name]) != "null" {
			t.Fatalf("redacted %s: %v, member %q is %s", redacted, err, name, got[name])
		}
		back, err := idempotency.Reveal(redacted, withheld)
		if err != nil {
			t.Fatalf("reveal: %v", err)
		}
		var want, have any
		if json.Unmarshal(body, &want) != nil || json.Unmarshal(back, &have) != nil || !reflect.DeepEqual(want, have) {
			t.Fatalf("%s came back as %s", body, back)
		}
	})
}

// FuzzParseRecordKeys: any value either is refused with an error that does
// not repeat it, or gives keys that seal and open.
func FuzzParseRecordKeys(f *testing.F) {
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	f.Add(base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32)) + "," + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	f.Add("")
	f.Add("===,")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := idempotency.ParseRecordKeys(s)
		if err != nil {
			if trimmed := strings.TrimSpace(s); len(trimmed) >= 16 && strings.Contains(err.Error(), trimmed) {
				t.Fatalf("the error repeats the value: %v", err)
			}
			return
		}
		sealed, err := k.Seal([]byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Open(sealed, nil); err != nil || string(got) != "x" {
			t.Fatalf("open: %q %v", got, err)
		}
	})
}
