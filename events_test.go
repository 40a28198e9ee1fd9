package agentfs_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
)

func TestEventCursor(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	mine := agentfs.EventCursor{Subject: "alice", At: at, Position: 123456789}

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		for _, c := range []agentfs.EventCursor{
			mine,
			{Subject: "alice", At: time.UnixMicro(0).UTC()},
			{Subject: "bob/with:odd@chars", At: at, Position: 1<<63 - 1},
		} {
			s := c.String()
			if strings.ContainsAny(s, "+/=") {
				t.Fatalf("cursor %q is not URL-safe", s)
			}
			got, err := agentfs.ParseEventCursor(s, c.Subject)
			if err != nil || got.Position != c.Position || !got.At.Equal(c.At) || got.Subject != c.Subject || got.At.Location() != time.UTC {
				t.Fatalf("round trip of %+v gave %+v, %v", c, got, err)
			}
		}
	})

	t.Run("BelongsToItsSubject", func(t *testing.T) {
		t.Parallel()
		for _, other := range []string{"bob", "Alice", "alice ", ""} {
			if _, err := agentfs.ParseEventCursor(mine.String(), other); !errors.Is(err, agentfs.ErrInvalidEventCursor) {
				t.Fatalf("alice's cursor parsed for %q: %v", other, err)
			}
		}
	})

	enc := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	raw, _ := base64.RawURLEncoding.DecodeString(mine.String())
	tag := string(raw[strings.LastIndex(string(raw), "|")+1:])
	for name, token := range map[string]string{
		"Empty":              "",
		"NotBase64":          "!!!",
		"Padded":             base64.URLEncoding.EncodeToString(raw) + "==",
		"OldVersion":         enc("e1|1|1|1|" + tag),
		"TooFewFields":       enc("e2|1|" + tag),
		"TooManyFields":      enc("e2|1|1|1|" + tag),
		"NegativePosition":   enc("e2|-1|1|" + tag),
		"NegativeTime":       enc("e2|1|-1|" + tag),
		"PositionNotANumber": enc("e2|x|1|" + tag),
		"PositionOverflow":   enc("e2|9223372036854775808|1|" + tag),
		"TimeNotANumber":     enc("e2|1|now|" + tag),
		"TagOfNobody":        enc("e2|1|1|000000000000"),
		"TooLong":            enc("e2|1|1|" + tag + strings.Repeat("x", 200)),
		"AFileListCursor":    agentfs.Cursor{CreatedAt: at, ID: "file_" + strings.Repeat("a", 26)}.String(),
	} {
		t.Run("Rejects"+name, func(t *testing.T) {
			t.Parallel()
			if got, err := agentfs.ParseEventCursor(token, "alice"); !errors.Is(err, agentfs.ErrInvalidEventCursor) {
				t.Fatalf("ParseEventCursor(%q) = %+v, %v", token, got, err)
			}
		})
	}
}

// FuzzParseEventCursor: whatever it is given, ParseEventCursor either
// refuses with ErrInvalidEventCursor or returns a cursor of the subject
// asked for that encodes back to a token it parses the same way.
func FuzzParseEventCursor(f *testing.F) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Add(agentfs.EventCursor{Subject: "alice", At: at, Position: 7}.String(), "alice")
	f.Add(agentfs.EventCursor{Subject: "bob", At: at}.String(), "alice")
	f.Add("ZTF8MXwxfDF8eA", "alice")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, token, subject string) {
		c, err := agentfs.ParseEventCursor(token, subject)
		if err != nil {
			if !errors.Is(err, agentfs.ErrInvalidEventCursor) {
				t.Fatalf("ParseEventCursor(%q): %v", token, err)
			}
			return
		}
		if c.Subject != subject || c.Position < 0 || c.At.Before(time.UnixMicro(0)) {
			t.Fatalf("ParseEventCursor(%q, %q) = %+v", token, subject, c)
		}
		again, err := agentfs.ParseEventCursor(c.String(), subject)
		if err != nil || again != c {
			t.Fatalf("re-encoding %+v gave %+v, %v", c, again, err)
		}
	})
}

func TestWatchCovers(t *testing.T) {
	for _, c := range []struct {
		watch, path string
		want        bool
	}{
		{"a.txt", "a.txt", true}, {"a.txt", "a.txt.bak", false}, {"a.txt", "b/a.txt", false},
		{"docs/", "docs/x.md", true}, {"docs/", "docs/deep/y.md", true}, {"docs/", "docs", false}, {"docs/", "docsx/y", false},
		{"", "anything/at/all", true},
	} {
		if got := (agentfs.Watch{Path: c.watch}).Covers(c.path); got != c.want {
			t.Errorf("watch %q covers %q: %v", c.watch, c.path, got)
		}
	}
}
