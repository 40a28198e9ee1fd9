package agentfs_test

import (
	"encoding/base64"
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
)

const (
	sumA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	sumB = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
)

// etagCase is a header, and whether it matches the etag of sumA.
type etagCase struct {
	name, header string
	want         bool
}

// checkETag holds match, named fn, to each case against the etag of sumA.
func checkETag(t *testing.T, fn string, match func(header, etag string) bool, cases []etagCase) {
	t.Helper()
	etag := `"` + sumA + `"`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := match(tc.header, etag); got != tc.want {
				t.Fatalf("%s(%q, %q) = %v, want %v", fn, tc.header, etag, got, tc.want)
			}
		})
	}
}

func TestETagMatches(t *testing.T) {
	t.Parallel()
	etag := `"` + sumA + `"`
	checkETag(t, "ETagMatches", agentfs.ETagMatches, []etagCase{
		{"MatchesStar", "*", true},
		{"MatchesStarWithSpaces", "  *  ", true},
		{"MatchesExactEtag", etag, true},
		{"MatchesEtagWithSurroundingSpace", " " + etag + " ", true},
		{"MatchesEtagFirstInList", etag + `, "` + sumB + `"`, true},
		{"MatchesEtagLastInList", `"` + sumB + `",` + etag, true},
		{"MatchesEtagInListWithTabs", `"x",	` + etag + `	,"y"`, true},
		{"RejectsOtherEtag", `"` + sumB + `"`, false},
		{"RejectsWeakEtag", "W/" + etag, false},
		{"RejectsUnquotedEtag", sumA, false},
		{"RejectsUppercaseHex", `"` + strings.ToUpper(sumA) + `"`, false},
		{"RejectsEmptyHeader", "", false},
		{"RejectsOnlyCommas", ",,", false},
		{"RejectsStarInsideList", `"` + sumB + `", *`, false},
		{"RejectsPrefixOfEtag", `"` + sumA[:10] + `"`, false},
		{"RejectsEtagWithExtraText", etag + "x", false},
	})
}

// TestETagMatchesWeak holds If-None-Match to RFC 9110's weak comparison:
// the W/ prefix of either side is ignored, the opaque tags must still be
// identical.
func TestETagMatchesWeak(t *testing.T) {
	t.Parallel()
	etag := `"` + sumA + `"`
	checkETag(t, "ETagMatchesWeak", agentfs.ETagMatchesWeak, []etagCase{
		{"MatchesStar", "*", true},
		{"MatchesExactEtag", etag, true},
		{"MatchesWeakEtag", "W/" + etag, true},
		{"MatchesWeakEtagWithSpace", "  W/" + etag + " ", true},
		{"MatchesWeakEtagInList", `W/"` + sumB + `", W/` + etag, true},
		{"MatchesStrongEtagAfterWeakOther", `W/"` + sumB + `",` + etag, true},
		{"RejectsOtherWeakEtag", `W/"` + sumB + `"`, false},
		{"RejectsLowercaseWeakPrefix", "w/" + etag, false},
		{"RejectsWeakPrefixTwice", "W/W/" + etag, false},
		{"RejectsUnquotedWeakEtag", "W/" + sumA, false},
		{"RejectsBareWeakPrefix", "W/", false},
		{"RejectsEmptyHeader", "", false},
		{"RejectsOnlyCommas", ",,", false},
		{"RejectsStarInsideList", `"` + sumB + `", *`, false},
	})
}

func FuzzETagMatches(f *testing.F) {
	etag := `"` + sumA + `"`
	for _, tc := range [][2]string{
		{"*", etag}, {" * ", etag}, {etag, etag}, {"W/" + etag, etag}, {`"a", "b"`, `"b"`},
		{",,,", `"a"`}, {"", `"a"`}, {`"a",*`, `"b"`}, {"\t" + etag + "\t", etag},
	} {
		f.Add(tc[0], tc[1])
	}
	f.Fuzz(func(t *testing.T, header, etag string) {
		got := agentfs.ETagMatches(header, etag)
		if !agentfs.ETagMatches("*", etag) {
			t.Fatalf(`ETagMatches("*", %q) = false`, etag)
		}
		if !agentfs.ETagMatches(" * ", etag) {
			t.Fatalf(`ETagMatches(" * ", %q) = false`, etag)
		}
		if strings.TrimSpace(header) == "*" && !got {
			t.Fatalf("ETagMatches(%q, %q) = false for a star header", header, etag)
		}
		// Only a star or a list member that is exactly the etag matches.
		if got && strings.TrimSpace(header) != "*" {
			found := false
			for _, m := range strings.Split(header, ",") {
				if strings.TrimSpace(m) == etag {
					found = true
				}
			}
			if !found {
				t.Fatalf("ETagMatches(%q, %q) = true, but no list member is the etag", header, etag)
			}
		}
		// A real etag (quoted, no comma, no outer space) in a list always matches.
		if etag != "" && !strings.Contains(etag, ",") && strings.TrimSpace(etag) == etag {
			if !agentfs.ETagMatches(`"other", `+etag, etag) {
				t.Fatalf("ETagMatches did not find %q in a list", etag)
			}
			if strings.HasPrefix(etag, `"`) && agentfs.ETagMatches("W/"+etag, etag) {
				t.Fatalf("ETagMatches(W/%s, %s) = true: weak etags must not match strongly", etag, etag)
			}
			if !agentfs.ETagMatchesWeak("W/"+etag, etag) || !agentfs.ETagMatchesWeak(`"other", W/`+etag, etag) {
				t.Fatalf("ETagMatchesWeak did not find W/%s", etag)
			}
		}
		// Weak comparison only adds the W/ forms: whatever matches strongly
		// matches weakly, and a weak match is a strong one once W/ is gone.
		weak := agentfs.ETagMatchesWeak(header, etag)
		if got && !weak {
			t.Fatalf("ETagMatches(%q, %q) but not ETagMatchesWeak", header, etag)
		}
		if weak && !got && !strings.Contains(header, "W/") && !strings.HasPrefix(etag, "W/") {
			t.Fatalf("ETagMatchesWeak(%q, %q) without a W/ anywhere, but not ETagMatches", header, etag)
		}
	})
}

func TestPutCheckAgainst(t *testing.T) {
	t.Parallel()
	live := func(mod func(*agentfs.File)) *agentfs.File {
		f := &agentfs.File{ID: "file_live", Path: "a/b.txt", SHA256: sumA, Version: 3}
		if mod != nil {
			mod(f)
		}
		return f
	}
	blocked := func(f *agentfs.File) { f.Blocked, f.BlockReason = true, "legal hold" }
	etag := `"` + sumA + `"`
	other := `"` + sumB + `"`

	type want int
	const (
		allowed want = iota
		precondition
		exists
		isBlocked
	)
	for _, tc := range []struct {
		name string
		put  agentfs.Put
		live *agentfs.File
		want want
	}{
		{"AllowsNewFile", agentfs.Put{}, nil, allowed},
		{"AllowsNewFileWithReplace", agentfs.Put{Replace: true}, nil, allowed},
		{"AllowsNewFileWithIfNoneMatchStar", agentfs.Put{IfNoneMatchAny: true}, nil, allowed},
		{"RejectsExistingPathWithoutReplace", agentfs.Put{}, live(nil), exists},
		{"AllowsReplaceOfLiveFile", agentfs.Put{Replace: true}, live(nil), allowed},
		{"AllowsReplaceWithMatchingIfMatch", agentfs.Put{Replace: true, IfMatch: etag}, live(nil), allowed},
		{"AllowsReplaceWithIfMatchList", agentfs.Put{Replace: true, IfMatch: other + ", " + etag}, live(nil), allowed},
		{"AllowsReplaceWithIfMatchStar", agentfs.Put{Replace: true, IfMatch: "*"}, live(nil), allowed},
		{"FailsIfMatchOnOtherEtag", agentfs.Put{Replace: true, IfMatch: other}, live(nil), precondition},
		{"FailsIfMatchOnWeakEtag", agentfs.Put{Replace: true, IfMatch: "W/" + etag}, live(nil), precondition},
		{"FailsIfMatchWhenNoFile", agentfs.Put{Replace: true, IfMatch: etag}, nil, precondition},
		{"FailsIfMatchStarWhenNoFile", agentfs.Put{Replace: true, IfMatch: "*"}, nil, precondition},
		{"FailsIfNoneMatchStarOnLiveFile", agentfs.Put{Replace: true, IfNoneMatchAny: true}, live(nil), precondition},
		{"PreconditionBeatsPathExists", agentfs.Put{IfNoneMatchAny: true}, live(nil), precondition},
		{"PreconditionBeatsBlock", agentfs.Put{Replace: true, IfMatch: other}, live(blocked), precondition},
		{"PathExistsBeatsBlock", agentfs.Put{}, live(blocked), exists},
		{"RejectsReplaceOfBlockedFile", agentfs.Put{Replace: true}, live(blocked), isBlocked},
		{"RejectsConditionalReplaceOfBlockedFile", agentfs.Put{Replace: true, IfMatch: etag}, live(blocked), isBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			put := tc.put
			put.Path = "a/b.txt"
			err := put.CheckAgainst(tc.live)
			var pe *agentfs.PathExistsError
			var be *agentfs.BlockedError
			switch tc.want {
			case allowed:
				if err != nil {
					t.Fatalf("CheckAgainst = %v, want nil", err)
				}
			case precondition:
				if !errors.Is(err, agentfs.ErrPreconditionFailed) {
					t.Fatalf("CheckAgainst = %v, want ErrPreconditionFailed", err)
				}
			case exists:
				if !errors.As(err, &pe) {
					t.Fatalf("CheckAgainst = %v, want *PathExistsError", err)
				}
				if pe.ExistingFileID != tc.live.ID || pe.Path != "a/b.txt" {
					t.Fatalf("PathExistsError = %+v, want file %s at a/b.txt", pe, tc.live.ID)
				}
			case isBlocked:
				if !errors.As(err, &be) || !errors.Is(err, agentfs.ErrBlocked) {
					t.Fatalf("CheckAgainst = %v, want *BlockedError matching ErrBlocked", err)
				}
				if be.FileID != tc.live.ID || be.Reason != "legal hold" {
					t.Fatalf("BlockedError = %+v, want file %s with its reason", be, tc.live.ID)
				}
			}
		})
	}
}

func TestCursor(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		for _, c := range []agentfs.Cursor{
			{CreatedAt: at, ID: "file_" + strings.Repeat("a", 26)},
			{CreatedAt: time.UnixMicro(0).UTC(), ID: "file_" + strings.Repeat("0", 26)},
			{CreatedAt: time.UnixMicro(math.MaxInt64).UTC(), ID: "file_" + strings.Repeat("z", 26)},
		} {
			got, err := agentfs.ParseCursor(c.String(), "file")
			if err != nil {
				t.Fatalf("ParseCursor(%q) for %+v: %v", c.String(), c, err)
			}
			if !got.CreatedAt.Equal(c.CreatedAt) || got.ID != c.ID {
				t.Fatalf("round trip of %+v gave %+v", c, got)
			}
		}
	})

	t.Run("ParsesToUTC", func(t *testing.T) {
		t.Parallel()
		local := agentfs.Cursor{CreatedAt: at.In(time.FixedZone("X", 5*3600)), ID: "file_" + strings.Repeat("x", 26)}
		got, err := agentfs.ParseCursor(local.String(), "file")
		if err != nil {
			t.Fatal(err)
		}
		if got.CreatedAt.Location() != time.UTC || !got.CreatedAt.Equal(at) {
			t.Fatalf("ParseCursor gave %v, want %v in UTC", got.CreatedAt, at)
		}
	})

	t.Run("TruncatesToMicroseconds", func(t *testing.T) {
		t.Parallel()
		c := agentfs.Cursor{CreatedAt: at.Add(789 * time.Nanosecond), ID: "file_" + strings.Repeat("x", 26)}
		got, err := agentfs.ParseCursor(c.String(), "file")
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(at) {
			t.Fatalf("got %v, want %v", got.CreatedAt, at)
		}
	})

	t.Run("IsURLSafe", func(t *testing.T) {
		t.Parallel()
		s := agentfs.Cursor{CreatedAt: at, ID: "file_???>>>~~~"}.String()
		if strings.ContainsAny(s, "+/=") {
			t.Fatalf("cursor %q is not URL-safe", s)
		}
	})

	enc := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for _, tc := range []struct{ name, token string }{
		{"RejectsEmpty", ""},
		{"RejectsNonBase64", "!!!"},
		{"RejectsPaddedBase64", base64.URLEncoding.EncodeToString([]byte("1|file_a"))},
		{"RejectsStdBase64Alphabet", strings.ReplaceAll(strings.ReplaceAll(enc("1|file_>?>?"), "-", "+"), "_", "/")},
		{"RejectsMissingSeparator", enc("1file_a")},
		{"RejectsWrongIDPrefix", enc("1|upl_a")},
		{"RejectsMalformedID", enc("1|file_\x00")},
		{"RejectsIDOutsideAlphabet", enc("1|file_" + strings.Repeat("i", 26))},
		{"RejectsEmptyTime", enc("|file_a")},
		{"RejectsNonNumericTime", enc("abc|file_a")},
		{"RejectsNegativeTime", enc("-1|file_a")},
		{"RejectsTimeOverflow", enc("9223372036854775808|file_a")},
		{"RejectsFractionalTime", enc("1.5|file_a")},
		{"RejectsLongID", enc("1|file_" + strings.Repeat("a", 60))},
		{"RejectsOversizedToken", enc(strings.Repeat("0", 200) + "1|file_a")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := agentfs.ParseCursor(tc.token, "file")
			if !errors.Is(err, agentfs.ErrInvalidCursor) {
				t.Fatalf("ParseCursor(%q) = %+v, %v; want ErrInvalidCursor", tc.token, c, err)
			}
			if c != (agentfs.Cursor{}) {
				t.Fatalf("ParseCursor(%q) returned a non-zero cursor with its error: %+v", tc.token, c)
			}
		})
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{
		agentfs.Cursor{CreatedAt: time.UnixMicro(1714979289123456), ID: "file_abc"}.String(),
		agentfs.Cursor{CreatedAt: time.UnixMicro(0), ID: "file_"}.String(),
		agentfs.Cursor{CreatedAt: time.UnixMicro(math.MaxInt64), ID: "file_a|b"}.String(),
		"", "!!!", "MXxmaWxlX2E", "MXxmaWxlX2E=", "LTF8ZmlsZV9h", "KDF8ZmlsZV9h", "MHxmaWxlX+I",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := agentfs.ParseCursor(s, "file")
		if err != nil {
			if !errors.Is(err, agentfs.ErrInvalidCursor) {
				t.Fatalf("ParseCursor(%q) error %v is not ErrInvalidCursor", s, err)
			}
			return
		}
		if !strings.HasPrefix(c.ID, "file_") || len(c.ID) > 64 {
			t.Fatalf("ParseCursor(%q) accepted id %q", s, c.ID)
		}
		if c.CreatedAt.UnixMicro() < 0 || c.CreatedAt.Location() != time.UTC {
			t.Fatalf("ParseCursor(%q) accepted time %v", s, c.CreatedAt)
		}
		again, err := agentfs.ParseCursor(c.String(), "file")
		if err != nil {
			t.Fatalf("ParseCursor(%q) = %+v, whose String %q does not parse: %v", s, c, c.String(), err)
		}
		if !again.CreatedAt.Equal(c.CreatedAt) || again.ID != c.ID {
			t.Fatalf("ParseCursor(%q) = %+v, but its String parses to %+v", s, c, again)
		}
		if again.String() != c.String() {
			t.Fatalf("String is not canonical: %q then %q", c.String(), again.String())
		}
	})
}

var fileIDRE = regexp.MustCompile(`^file_[0-9a-hjkmnp-tv-z]{26}$`)

func FuzzCursorString(f *testing.F) {
	f.Add(int64(1714979289123456), "file_abc")
	f.Add(int64(1714979289123456), "file_"+strings.Repeat("a", 26))
	f.Add(int64(0), "file_")
	f.Add(int64(math.MaxInt64), "file_a|b|c")
	f.Add(int64(-1), "file_a")
	f.Add(int64(1), "upl_a")
	f.Add(int64(1), "file_\xff\x00")
	f.Add(int64(1), "file_"+strings.Repeat("a", 59))
	f.Add(int64(1), "file_"+strings.Repeat("a", 60))
	f.Fuzz(func(t *testing.T, us int64, id string) {
		c := agentfs.Cursor{CreatedAt: time.UnixMicro(us), ID: id}
		got, err := agentfs.ParseCursor(c.String(), "file")
		valid := us >= 0 && fileIDRE.MatchString(id)
		if !valid {
			if err == nil {
				t.Fatalf("ParseCursor accepted %+v: %+v", c, got)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseCursor(%q) for %+v: %v", c.String(), c, err)
		}
		if !got.CreatedAt.Equal(c.CreatedAt) || got.CreatedAt.UnixMicro() != us || got.ID != id {
			t.Fatalf("round trip of %+v gave %+v", c, got)
		}
	})
}
