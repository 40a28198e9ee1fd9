package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/jsonscan"
)

var cases = []string{
	`{"a":1,"b":[1,2,{"c":"}"}],"c":"x\"y"}`, ` { "sp" : "v" , "n" : null } `, `{}`, `[]`, `[1, "two", [3], {"4":4}]`,
	`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u00e9\u0000\uD83D\uDE00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83d\u0041"`,
	"\"caf\u00e9 \xff\xfe\"", `"\u2028"`, `""`, `{"a":{"a":{"a":[]}},"a":2}`, `[[[["deep"]]]]`,
	`{"k\u0041":"v"}`, `1`, `true`, `{"a":1,}`, `[1,,2]`, `{"a" 1}`, `"unterminated`, `{"a":"\`, `[`, ``, `{]`,
	"{\"a\":1}}", "[1]]", `"\u12"`, `"a\`,
}

func TestMembersAndElementsMatchEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range cases {
		check(t, []byte(tc))
	}
}

func TestStringReadsInAnyPieces(t *testing.T) {
	t.Parallel()
	s := []byte(`"ab\n\u00e9\ud83d\ude00` + strings.Repeat(`x\"`, 100) + `"`)
	var want string
	if err := json.Unmarshal(s, &want); err != nil {
		t.Fatal(err)
	}
	for size := 1; size <= 9; size++ {
		r := jsonscan.NewString(s)
		var got bytes.Buffer
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil || n == 0 {
				t.Fatalf("read %d bytes: %v", n, err)
			}
		}
		if got.String() != want {
			t.Fatalf("reading %d bytes at a time: %q, want %q", size, got.String(), want)
		}
	}
	if _, err := jsonscan.NewString([]byte(`42`)).Read(make([]byte, 8)); !errors.Is(err, jsonscan.ErrSyntax) {
		t.Fatalf("a number read as a string: %v", err)
	}
}

func FuzzJSONScan(f *testing.F) {
	testkit.FuzzSeeds(f, cases, check)
}

// check runs every function of the package on data (none may panic) and,
// when data is valid JSON, compares what they find with encoding/json.
func check(t *testing.T, data []byte) {
	t.Helper()
	var members, elements [][2][]byte
	merr := jsonscan.Members(data, func(k, v []byte) error { members = append(members, [2][]byte{k, v}); return nil })
	eerr := jsonscan.Elements(data, func(v []byte) error { elements = append(elements, [2][]byte{nil, v}); return nil })
	decoded := jsonscan.AppendString(nil, data)
	n := jsonscan.StringLen(data)
	read, rerr := io.ReadAll(jsonscan.NewString(data))
	plain, isPlain := jsonscan.Plain(data)
	if !json.Valid(data) {
		return
	}
	switch jsonscan.Kind(data) {
	case '{':
		if merr != nil {
			t.Fatalf("Members(%q): %v", data, merr)
		}
		want := decodeEntries(t, data, true)
		compareEntries(t, data, members, want)
	case '[':
		if eerr != nil {
			t.Fatalf("Elements(%q): %v", data, eerr)
		}
		compareEntries(t, data, elements, decodeEntries(t, data, false))
	case '"':
		var want string
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if string(decoded) != want || n != len(want) || rerr != nil || string(read) != want {
			t.Fatalf("string %q: AppendString %q, StringLen %d, Read %q %v; encoding/json: %q", data, decoded, n, read, rerr, want)
		}
		if isPlain && string(plain) != want {
			t.Fatalf("Plain(%q) = %q, which is not what it stands for (%q)", data, plain, want)
		}
	default:
		if merr == nil || eerr == nil {
			t.Fatalf("%q walked as an object or array", data)
		}
	}
}

// decodeEntries lists the members (keys decoded) or elements of a valid
// object or array as encoding/json sees them.
func decodeEntries(t *testing.T, data []byte, object bool) [][2][]byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var out [][2][]byte
	for dec.More() {
		var e [2][]byte
		if object {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			e[0] = []byte(k.(string))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		e[1] = raw
		out = append(out, e)
	}
	return out
}

func compareEntries(t *testing.T, data []byte, got, want [][2][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d entries, encoding/json finds %d", data, len(got), len(want))
	}
	for i := range got {
		if want[i][0] != nil && string(jsonscan.AppendString(nil, got[i][0])) != string(want[i][0]) {
			t.Fatalf("%q: key %d is %q, encoding/json reads %q", data, i, got[i][0], want[i][0])
		}
		if !bytes.Equal(got[i][1], want[i][1]) {
			t.Fatalf("%q: value %d is %q, encoding/json reads %q", data, i, got[i][1], want[i][1])
		}
	}
}
