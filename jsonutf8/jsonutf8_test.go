package jsonutf8_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentfs/agentfs/jsonutf8"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, doc   string
		field, memb string // "" field and memb with ok: no fault
		key, ok     bool
	}{
		{name: "AcceptsPlainText", doc: `{"path":"a/b.txt","n":1,"x":[true,null,"é"]}`, ok: true},
		{name: "AcceptsUnicodeLiterally", doc: `{"path":"données/日本語/😀.txt"}`, ok: true},
		{name: "AcceptsEscapes", doc: `{"path":"a\"b\\c\/d\n\u00e9\u65e5"}`, ok: true},
		{name: "AcceptsASurrogatePair", doc: `{"path":"\ud83d\ude00.txt"}`, ok: true},
		{name: "AcceptsAnUppercasePair", doc: `{"path":"\uD83D\uDE00"}`, ok: true},
		{name: "AcceptsTheReplacementCharacterSent", doc: "{\"path\":\"\uFFFD and \\ufffd\"}", ok: true},
		{name: "AcceptsEmpty", doc: ``, ok: true},
		{name: "LeavesMalformedJSONToTheDecoder", doc: `{"path":"unterminated`, ok: true},
		{name: "LeavesABadEscapeToTheDecoder", doc: `{"path":"\uzzzz"}`, ok: true},
		{name: "RejectsInvalidBytes", doc: "{\"path\":\"bad\xff\xfe.txt\"}", field: "path", memb: "path"},
		{name: "RejectsATruncatedSequence", doc: "{\"path\":\"a\xc3\"}", field: "path", memb: "path"},
		{name: "RejectsAnEncodedSurrogate", doc: "{\"to\":\"a\xed\xa0\x80\"}", field: "to", memb: "to"},
		{name: "RejectsOverlongEncoding", doc: "{\"path\":\"\xc0\xaf\"}", field: "path", memb: "path"},
		{name: "RejectsALoneLowSurrogate", doc: `{"path":"bad/\udc80.txt"}`, field: "path", memb: "path"},
		{name: "RejectsALoneHighSurrogate", doc: `{"path":"bad/\ud800.txt"}`, field: "path", memb: "path"},
		{name: "RejectsAHighSurrogateAtTheEnd", doc: `{"path":"\ud800"}`, field: "path", memb: "path"},
		{name: "RejectsTwoHighSurrogates", doc: `{"path":"\ud800\ud800"}`, field: "path", memb: "path"},
		{name: "RejectsAHighSurrogateThenAnotherEscape", doc: `{"path":"\ud800\n"}`, field: "path", memb: "path"},
		{name: "RejectsReversedHalves", doc: `{"path":"\ude00\ud83d"}`, field: "path", memb: "path"},
		{name: "NamesABatchItem", doc: `{"operations":[{"op":"put","path":"ok"},{"op":"put","content":"\udfff"}]}`,
			field: "operations[1].content", memb: "content"},
		{name: "NamesAnArrayElement", doc: `{"paths":["a","b","c\udc00"]}`, field: "paths[2]", memb: "paths"},
		{name: "NamesNestedObjects", doc: "{\"edits\":[{\"oldText\":\"a\",\"newText\":\"\xff\"}]}", field: "edits[0].newText", memb: "newText"},
		{name: "NamesAnEscapedMember", doc: `{"p\u0061th":"\udc00"}`, field: "path", memb: "path"},
		{name: "RejectsAMemberName", doc: "{\"ok\":{\"ba\xffd\":1}}", field: "ok", key: true},
		{name: "RejectsADocumentThatIsAString", doc: `"\udc00"`},
		{name: "RejectsAnElementOfATopArray", doc: `[1,"\udc00"]`, field: "[1]"},
		{name: "SkipsValuesBeforeTheFault", doc: "{\"a\":{\"b\":[1,2,{\"c\":\"d\"}]},\"e\":\"\xff\"}", field: "e", memb: "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := jsonutf8.Check([]byte(tc.doc))
			if tc.ok {
				if f != nil {
					t.Fatalf("Check(%q) = %v, want no fault", tc.doc, f)
				}
				return
			}
			if f == nil {
				t.Fatalf("Check(%q) = nil, want a fault at %q", tc.doc, tc.field)
			}
			if f.Field != tc.field || f.Name != tc.memb || f.Key != tc.key || f.Reason == "" {
				t.Fatalf("Check(%q) = %+v, want field %q, name %q, key %v", tc.doc, f, tc.field, tc.memb, tc.key)
			}
			if !utf8.ValidString(f.Error()) {
				t.Fatalf("the fault's message is not text: %q", f.Error())
			}
		})
	}
}

// quoteRaw writes s as a JSON string, escaping only what JSON requires, so
// its bytes reach the document as they are.
func quoteRaw(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// wellFormedUTF16 reports whether units pair every surrogate.
func wellFormedUTF16(units []uint16) bool {
	for i := 0; i < len(units); i++ {
		switch u := units[i]; {
		case u >= 0xd800 && u <= 0xdbff:
			if i+1 >= len(units) || units[i+1] < 0xdc00 || units[i+1] > 0xdfff {
				return false
			}
			i++
		case u >= 0xdc00 && u <= 0xdfff:
			return false
		}
	}
	return true
}

// FuzzCheck: Check never panics; a string of raw bytes is refused exactly
// when it is not UTF-8; a string of \u escapes exactly when its UTF-16 has
// an unpaired surrogate; what json.Marshal writes is always text; and a
// document Check accepts decodes without a replacement it did not send.
func FuzzCheck(f *testing.F) {
	for _, seed := range []struct {
		s     string
		units []byte
	}{
		{"a/b.txt", []byte{0xd8, 0x3d, 0xde, 0x00}},
		{"bad\xff\xfe.txt", []byte{0xdc, 0x80}},
		{"\xed\xa0\x80", []byte{0xd8, 0x00, 0x00, 0x41}},
		{`{"a":["\ud800"]}`, nil},
		{"é\"\\\n", []byte{0xdb, 0xff, 0xdf, 0xff}},
	} {
		f.Add(seed.s, seed.units)
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		_ = jsonutf8.Check([]byte(s)) // any bytes at all

		doc := `{"items":[{"path":` + quoteRaw(s) + `}]}`
		got := jsonutf8.Check([]byte(doc))
		if (got == nil) != utf8.ValidString(s) {
			t.Fatalf("Check(%q) = %v; the string is valid UTF-8: %v", doc, got, utf8.ValidString(s))
		}
		if got != nil && (got.Field != "items[0].path" || got.Name != "path") {
			t.Fatalf("Check(%q) named %+v", doc, got)
		}

		if b, err := json.Marshal(map[string]string{s: s}); err != nil || jsonutf8.Check(b) != nil {
			t.Fatalf("json.Marshal wrote %q (%v), which Check refuses: %v", b, err, jsonutf8.Check(b))
		}

		units := make([]uint16, len(raw)/2)
		var esc strings.Builder
		for i := range units {
			units[i] = uint16(raw[2*i])<<8 | uint16(raw[2*i+1])
			fmt.Fprintf(&esc, `\u%04x`, units[i])
		}
		doc = `{"text":"` + esc.String() + `"}`
		if got := jsonutf8.Check([]byte(doc)); (got == nil) != wellFormedUTF16(units) {
			t.Fatalf("Check(%q) = %v; the UTF-16 is well formed: %v", doc, got, wellFormedUTF16(units))
		}
		if jsonutf8.Check([]byte(doc)) == nil {
			var v struct{ Text string }
			if err := json.Unmarshal([]byte(doc), &v); err != nil || v.Text != string(utf16.Decode(units)) {
				t.Fatalf("an accepted document decoded to %q (%v), want %q", v.Text, err, string(utf16.Decode(units)))
			}
		}
	})
}
