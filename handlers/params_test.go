package handlers

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"math/big"
	"mime"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sha256Digest(s string) (sum []byte, member string) {
	h := sha256.Sum256([]byte(s))
	return h[:], "sha-256=:" + base64.StdEncoding.EncodeToString(h[:]) + ":"
}

func TestParseContentDigest(t *testing.T) {
	t.Parallel()
	sum, member := sha256Digest("hello")
	_, otherMember := sha256Digest("other")
	b64 := base64.StdEncoding.EncodeToString(sum)
	sha512 := "sha-512=:" + base64.StdEncoding.EncodeToString(make([]byte, 64)) + ":"
	for _, tc := range []struct {
		name, header string
		want         []byte
		wantErr      bool
	}{
		{"AcceptsSHA256", member, sum, false},
		{"AcceptsSurroundingSpace", "  " + member + "  ", sum, false},
		{"AcceptsSHA256AfterOtherAlgorithm", sha512 + ", " + member, sum, false},
		{"AcceptsSHA256BeforeOtherAlgorithm", member + "," + sha512, sum, false},
		{"AcceptsUppercaseAlgorithmName", "SHA-256=:" + b64 + ":", sum, false},
		{"AcceptsRepeatedEqualSHA256", member + ", " + member, sum, false},
		{"AcceptsSpaceAroundEquals", "sha-256 = :" + b64 + ":", sum, false},
		{"IgnoresEmptyHeader", "", nil, false},
		{"IgnoresBlankHeader", " \t ", nil, false},
		{"IgnoresOnlyOtherAlgorithms", sha512, nil, false},
		{"IgnoresUnknownAlgorithmWithAnyValue", "md5=whatever", nil, false},
		{"RejectsTwoDifferentSHA256", member + ", " + otherMember, nil, true},
		{"RejectsMemberWithoutEquals", "sha-256", nil, true},
		{"RejectsMemberWithoutName", "=:" + b64 + ":", nil, true},
		{"RejectsEmptyMember", member + ",,", nil, true},
		{"RejectsTrailingComma", member + ",", nil, true},
		{"RejectsUnwrappedBase64", "sha-256=" + b64, nil, true},
		{"RejectsMissingClosingColon", "sha-256=:" + b64, nil, true},
		{"RejectsLoneColon", "sha-256=:", nil, true},
		{"RejectsEmptyByteSequence", "sha-256=::", nil, true},
		{"RejectsHexValue", "sha-256=:" + strings.Repeat("ab", 32) + ":", nil, true},
		{"RejectsShortDigest", "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:31]) + ":", nil, true},
		{"RejectsLongDigest", "sha-256=:" + base64.StdEncoding.EncodeToString(append(sum, 0)) + ":", nil, true},
		{"RejectsURLSafeBase64", "sha-256=:" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)) + ":", nil, true},
		{"RejectsQuotedString", `sha-256="` + b64 + `"`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseContentDigest(tc.header)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseContentDigest(%q) = %x, want an error", tc.header, got)
				}
				if got != nil {
					t.Fatalf("parseContentDigest(%q) returned %x with its error", tc.header, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseContentDigest(%q): %v", tc.header, err)
			}
			if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("parseContentDigest(%q) = %x, want %x", tc.header, got, tc.want)
			}
		})
	}
}

func FuzzParseContentDigest(f *testing.F) {
	_, member := sha256Digest("hello")
	_, other := sha256Digest("other")
	for _, s := range []string{
		"", " ", member, "SHA-256=:" + member[9:], member + ", " + member, member + "," + other,
		"sha-512=:AAAA:, " + member, "sha-256=:AAAA:", "sha-256", "=:x:", ",", member + ",",
		"sha-256=::", "sha-256=:", "md5=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		sum, err := parseContentDigest(h)
		if err != nil {
			if sum != nil {
				t.Fatalf("parseContentDigest(%q) returned %x with error %v", h, sum, err)
			}
			return
		}
		names := 0
		for _, m := range strings.Split(h, ",") {
			name, _, _ := strings.Cut(m, "=")
			if strings.EqualFold(strings.TrimSpace(name), "sha-256") {
				names++
			}
		}
		if sum == nil {
			if strings.TrimSpace(h) != "" && names > 0 {
				t.Fatalf("parseContentDigest(%q) found no sha-256 in a header that names one", h)
			}
			return
		}
		if len(sum) != 32 {
			t.Fatalf("parseContentDigest(%q) = %d bytes, want 32", h, len(sum))
		}
		if names == 0 {
			t.Fatalf("parseContentDigest(%q) = %x from a header without a sha-256 member", h, sum)
		}
		// The first 42 base64 digits carry 252 bits of the digest exactly
		// (the 43rd may carry non-zero pad bits, RFC 8941 §4.2.7); the
		// decoder skips CR and LF.
		flat := strings.NewReplacer("\r", "", "\n", "").Replace(h)
		if !strings.Contains(flat, ":"+base64.StdEncoding.EncodeToString(sum)[:42]) {
			t.Fatalf("parseContentDigest(%q) = %x, whose base64 the header does not carry", h, sum)
		}
		// The canonical form of what was parsed parses to the same digest.
		canon := "sha-256=:" + base64.StdEncoding.EncodeToString(sum) + ":"
		if again, err := parseContentDigest(canon); err != nil || !bytes.Equal(again, sum) {
			t.Fatalf("parseContentDigest(%q) = %x, %v; want %x", canon, again, err, sum)
		}
	})
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	type want struct {
		start, length int64
		ok, unsat     bool
	}
	served := func(start, length int64) want { return want{start: start, length: length, ok: true} }
	ignored := want{}
	unsat := want{unsat: true}
	for _, tc := range []struct {
		name, header string
		size         int64
		want         want
	}{
		{"ServesFirstBytes", "bytes=0-3", 10, served(0, 4)},
		{"ServesSingleByte", "bytes=4-4", 10, served(4, 1)},
		{"ServesOpenEndedRange", "bytes=7-", 10, served(7, 3)},
		{"ServesLastByteOpenEnded", "bytes=9-", 10, served(9, 1)},
		{"ServesSuffix", "bytes=-2", 10, served(8, 2)},
		{"ClampsSuffixToSize", "bytes=-100", 10, served(0, 10)},
		{"ClampsLastPosToSize", "bytes=5-100", 10, served(5, 5)},
		{"ClampsHugeLastPos", "bytes=0-9223372036854775807", 10, served(0, 10)},
		{"ServesWholeContentAsRange", "bytes=0-9", 10, served(0, 10)},
		{"ToleratesSurroundingSpace", "  bytes= 1-2 ", 10, served(1, 2)},
		{"ServesRangeOfHugeContent", "bytes=9223372036854775805-", math.MaxInt64, served(math.MaxInt64-2, 2)},
		{"IgnoresEmptyHeader", "", 10, ignored},
		{"IgnoresOtherUnit", "items=0-1", 10, ignored},
		{"IgnoresMultipleRanges", "bytes=0-1,4-5", 10, ignored},
		{"IgnoresMultipleRangesEvenIfUnsatisfiable", "bytes=20-30,40-50", 10, ignored},
		{"IgnoresMissingDash", "bytes=5", 10, ignored},
		{"IgnoresBareDash", "bytes=-", 10, ignored},
		{"IgnoresReversedRange", "bytes=5-3", 10, ignored},
		{"IgnoresNegativeSuffix", "bytes=--3", 10, ignored},
		{"IgnoresPlusSign", "bytes=+1-2", 10, ignored},
		{"IgnoresPlusSignSuffix", "bytes=-+2", 10, ignored},
		{"IgnoresPlusSignLastPos", "bytes=1-+2", 10, ignored},
		{"IgnoresNonNumeric", "bytes=a-b", 10, ignored},
		{"IgnoresSpaceInsideSpec", "bytes=1 -2", 10, ignored},
		{"IgnoresEmptySpec", "bytes=", 10, ignored},
		{"RefusesStartAtSize", "bytes=10-", 10, unsat},
		{"RefusesStartPastSize", "bytes=20-30", 10, unsat},
		{"RefusesZeroSuffix", "bytes=-0", 10, unsat},
		{"RefusesAnyRangeOfEmptyContent", "bytes=0-", 0, unsat},
		{"RefusesSuffixOfEmptyContent", "bytes=-5", 0, unsat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, ok, err := parseRange(tc.header, tc.size)
			if tc.want.unsat {
				if !errors.Is(err, errUnsatisfiable) || ok {
					t.Fatalf("parseRange(%q, %d) = %+v, %v, %v; want errUnsatisfiable", tc.header, tc.size, r, ok, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRange(%q, %d): %v", tc.header, tc.size, err)
			}
			if ok != tc.want.ok || (ok && (r.start != tc.want.start || r.length != tc.want.length)) {
				t.Fatalf("parseRange(%q, %d) = %+v, %v; want %+v", tc.header, tc.size, r, ok, tc.want)
			}
		})
	}
}

var rangeSpecRE = regexp.MustCompile(`^([0-9]*)-([0-9]*)$`)

// rangeModel is RFC 9110 §14.1.2 for one byte range, in unbounded integers:
// valid says the header is a single well-formed range; then [first, end]
// (end inclusive) is the satisfiable part, empty when first > end.
func rangeModel(h string, size int64) (valid bool, first, end *big.Int) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found {
		return false, nil, nil
	}
	m := rangeSpecRE.FindStringSubmatch(strings.TrimSpace(spec))
	if m == nil || m[1] == "" && m[2] == "" {
		return false, nil, nil
	}
	n := func(s string) *big.Int { v, _ := new(big.Int).SetString(s, 10); return v }
	sz := big.NewInt(size)
	last := new(big.Int).Sub(sz, big.NewInt(1))
	if m[1] == "" { // suffix
		first = new(big.Int).Sub(sz, n(m[2]))
		if first.Sign() < 0 {
			first.SetInt64(0)
		}
		return true, first, last
	}
	first = n(m[1])
	end = last
	if m[2] != "" {
		if n(m[2]).Cmp(first) < 0 {
			return false, nil, nil
		}
		if n(m[2]).Cmp(last) < 0 {
			end = n(m[2])
		}
	}
	return true, first, end
}

func FuzzParseRange(f *testing.F) {
	for _, tc := range []struct {
		h    string
		size int64
	}{
		{"bytes=0-3", 10}, {"bytes=7-", 10}, {"bytes=-2", 10}, {"bytes=-100", 10}, {"bytes=5-100", 10},
		{"bytes=10-", 10}, {"bytes=-0", 10}, {"bytes=0-", 0}, {"bytes=-5", 0}, {"bytes=5-3", 10},
		{"bytes=0-1,4-5", 10}, {"items=0-1", 10}, {"bytes=+1-2", 10}, {" bytes= 1-2 ", 10},
		{"bytes=9223372036854775807-", math.MaxInt64}, {"bytes=0-9223372036854775808", 10},
		{"bytes=-9223372036854775807", math.MaxInt64}, {"bytes=0-0", 1},
	} {
		f.Add(tc.h, tc.size)
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			size = -(size + 1) // a content size is never negative
		}
		r, ok, err := parseRange(h, size)
		if err != nil && !errors.Is(err, errUnsatisfiable) {
			t.Fatalf("parseRange(%q, %d): unexpected error %v", h, size, err)
		}
		if err != nil && ok {
			t.Fatalf("parseRange(%q, %d) is both ok and %v", h, size, err)
		}
		if ok {
			if r.start < 0 || r.length < 1 || r.start > size-r.length {
				t.Fatalf("parseRange(%q, %d) = %+v, outside the content", h, size, r)
			}
		}
		valid, first, end := rangeModel(h, size)
		if (ok || err != nil) && !valid {
			t.Fatalf("parseRange(%q, %d) = %+v, %v, %v for a header that is not one byte range", h, size, r, ok, err)
		}
		if !valid {
			return
		}
		empty := first.Cmp(end) > 0
		if err != nil && !empty {
			t.Fatalf("parseRange(%q, %d) = errUnsatisfiable, but bytes %v-%v are satisfiable", h, size, first, end)
		}
		if ok {
			if empty || r.start != first.Int64() || r.start+r.length-1 != end.Int64() {
				t.Fatalf("parseRange(%q, %d) = %+v, want bytes %v-%v", h, size, r, first, end)
			}
		}
		// A range whose numbers fit in int64 is decided, never ignored.
		fits := true
		if spec := rangeSpecRE.FindStringSubmatch(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(h), "bytes="))); spec != nil {
			for _, s := range spec[1:] {
				if v, ok := new(big.Int).SetString(s, 10); s != "" && (!ok || !v.IsInt64()) {
					fits = false
				}
			}
		}
		if fits && !ok && err == nil {
			t.Fatalf("parseRange(%q, %d) ignored a valid single range (want bytes %v-%v)", h, size, first, end)
		}
	})
}

func TestNormalizeMediaType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ct, want string
		wantErr        bool
	}{
		{"DefaultsEmptyToOctetStream", "", "application/octet-stream", false},
		{"DefaultsBlankToOctetStream", "  \t", "application/octet-stream", false},
		{"KeepsSimpleType", "text/plain", "text/plain", false},
		{"LowercasesType", "Text/HTML", "text/html", false},
		{"LowercasesParameterName", "text/plain; CHARSET=utf-8", "text/plain; charset=utf-8", false},
		{"KeepsParameterValueCase", "text/plain; charset=UTF-8", "text/plain; charset=UTF-8", false},
		{"RemovesSpaces", "  text/plain ;  charset=utf-8 ", "text/plain; charset=utf-8", false},
		{"UnquotesTokenValue", `text/plain; charset="utf-8"`, "text/plain; charset=utf-8", false},
		{"QuotesValueThatNeedsIt", `multipart/form-data; boundary="a b"`, `multipart/form-data; boundary="a b"`, false},
		{"SortsParameters", "text/plain; z=1; a=2", "text/plain; a=2; z=1", false},
		{"KeepsStructuredSuffix", "application/vnd.api+json", "application/vnd.api+json", false},
		{"RejectsMissingType", "/plain", "", true},
		{"RejectsMissingSubtype", "text/", "", true},
		{"RejectsSpaceInType", "text plain/x", "", true},
		{"RejectsDuplicateParameter", "text/plain; a=1; a=2", "", true},
		{"RejectsParameterWithoutValue", "text/plain; charset", "", true},
		{"RejectsUnterminatedQuote", `text/plain; charset="utf-8`, "", true},
		{"RejectsTooLong", "text/plain; x=" + strings.Repeat("a", 250), "", true},
		{"RejectsComma", "text/plain, text/html", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := normalizeMediaType(tc.ct)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("normalizeMediaType(%q) = %q, want an error", tc.ct, got)
				}
				if got != "" {
					t.Fatalf("normalizeMediaType(%q) returned %q with its error", tc.ct, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("normalizeMediaType(%q) = %q, %v; want %q", tc.ct, got, err, tc.want)
			}
		})
	}
}

// A media type is type "/" subtype (RFC 9110 §8.3.1); a bare token is not one.
func TestNormalizeMediaTypeRequiresSubtype(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"text", "attachment", "foo; charset=utf-8"} {
		if got, err := normalizeMediaType(ct); err == nil {
			t.Errorf("normalizeMediaType(%q) = %q, want an error: it has no subtype", ct, got)
		}
	}
}

var mediaTypeRE = regexp.MustCompile(`^[!#$%&'*+.^_` + "`" + `|~0-9a-z-]+/[!#$%&'*+.^_` + "`" + `|~0-9a-z-]+(; |$)`)

func FuzzNormalizeMediaType(f *testing.F) {
	for _, s := range []string{
		"", " ", "text/plain", "Text/HTML; Charset=UTF-8", `text/plain; charset="utf-8"`,
		`multipart/form-data; boundary="a b"`, "text/plain; z=1; a=2", "text/", "/x", "text",
		"text/plain; a=1; a=2", `text/plain; title*=utf-8''%E2%82%AC`, `a/b; x="\"q\\"`,
		"text/plain; x=" + strings.Repeat("a", 250), "application/vnd.api+json",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		out, err := normalizeMediaType(ct)
		if err != nil {
			if out != "" {
				t.Fatalf("normalizeMediaType(%q) returned %q with error %v", ct, out, err)
			}
			return
		}
		if out == "" || len(out) > 255 {
			t.Fatalf("normalizeMediaType(%q) = %q", ct, out)
		}
		if !mediaTypeRE.MatchString(out) {
			t.Fatalf("normalizeMediaType(%q) = %q, which is not a lowercase type/subtype", ct, out)
		}
		again, err := normalizeMediaType(out)
		if err != nil || again != out {
			t.Fatalf("normalizeMediaType(%q) = %q, but normalizing that gives %q, %v", ct, out, again, err)
		}
		// Normalizing keeps the meaning: the same type and parameters.
		if strings.TrimSpace(ct) != "" {
			mt1, p1, err1 := mime.ParseMediaType(ct)
			mt2, p2, err2 := mime.ParseMediaType(out)
			if err1 != nil || err2 != nil || mt1 != mt2 || len(p1) != len(p2) {
				t.Fatalf("normalizeMediaType(%q) = %q changed the media type: %q %v vs %q %v", ct, out, mt1, p1, mt2, p2)
			}
			for k, v := range p1 {
				if p2[k] != v {
					t.Fatalf("normalizeMediaType(%q) = %q changed parameter %s: %q vs %q", ct, out, k, v, p2[k])
				}
			}
		}
	})
}

func TestParseIfExists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, v string
		replace bool
		wantErr bool
	}{
		{"DefaultsToError", "", false, false},
		{"AcceptsError", "error", false, false},
		{"AcceptsReplace", "replace", true, false},
		{"RejectsUppercase", "Replace", false, true},
		{"RejectsSurroundingSpace", " replace", false, true},
		{"RejectsUnknownValue", "sometimes", false, true},
		{"RejectsBooleanLike", "true", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replace, err := parseIfExists(tc.v)
			if (err != nil) != tc.wantErr || replace != tc.replace {
				t.Fatalf("parseIfExists(%q) = %v, %v; want %v, error %v", tc.v, replace, err, tc.replace, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "replace") {
				t.Fatalf("parseIfExists(%q) error %q does not say what is allowed", tc.v, err)
			}
		})
	}
}

func TestSaneRequestID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"AcceptsGeneratedForm", "req_0123456789abcdef01234567", true},
		{"AcceptsUUID", "3f2b8c1e-7d4a-4b9e-9c1f-0a2b3c4d5e6f", true},
		{"AcceptsPunctuation", "a.b_c:d-e", true},
		{"AcceptsLeadingPunctuation", "-x", true},
		{"AcceptsMaxLength", strings.Repeat("a", 128), true},
		{"RejectsEmpty", "", false},
		{"RejectsTooLong", strings.Repeat("a", 129), false},
		{"RejectsSpace", "a b", false},
		{"RejectsNewline", "a\nX-Injected: 1", false},
		{"RejectsCarriageReturn", "a\r", false},
		{"RejectsQuote", `a"b`, false},
		{"RejectsAngleBracket", "<script>", false},
		{"RejectsSlash", "a/b", false},
		{"RejectsNonASCII", "é", false},
		{"RejectsNUL", "a\x00", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := saneRequestID(tc.id); got != tc.ok {
				t.Fatalf("saneRequestID(%q) = %v, want %v", tc.id, got, tc.ok)
			}
		})
	}
}

func TestOptionalQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, query string
		wantInt     int
		wantBool    bool
		wantErr     string
	}{
		{"AbsentLeavesTheDefault", "", 7, true, ""},
		{"EmptyLeavesTheDefault", "n=&b=", 7, true, ""},
		{"ParsesBoth", "n=-3&b=false", -3, false, ""},
		{"BoolWords", "n=1&b=T", 1, true, ""},
		{"RejectsAFraction", "n=1.5", 7, true, "must be an integer"},
		{"RejectsOutOfRange", "n=99999999999999999999", 7, true, "must be an integer"},
		{"RejectsYes", "b=yes", 7, true, "must be true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			n, b := 7, true
			err = errors.Join(queryInt(v, "n", &n), queryBool(v, "b", &b))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if n != tc.wantInt || b != tc.wantBool {
				t.Fatalf("n=%d b=%v, want %d %v", n, b, tc.wantInt, tc.wantBool)
			}
		})
	}
}

func TestParseWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v       string
		most    int
		want    time.Duration
		wantErr string
	}{
		{"", 30, 0, ""},
		{"0", 30, 0, ""},
		{"30", 30, 30 * time.Second, ""},
		{"31", 30, 0, "must be between 0 and 30"},
		{"6", 5, 0, "must be between 0 and 5"},
		{"-1", 30, 0, "must be between 0 and 30"},
		{"1s", 30, 0, "must be an integer number of seconds"},
	} {
		got, err := parseWait(tc.v, tc.most)
		if got != tc.want || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("parseWait(%q, %d) = %v, %v; want %v, %q", tc.v, tc.most, got, err, tc.want, tc.wantErr)
		}
	}
}
