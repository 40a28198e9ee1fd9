package handlers

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
)

// TestParseKeyCursor: a recovery page's cursor is the one Cursor.String
// made of a key; anything else is a 400 problem, never a panic.
func TestParseKeyCursor(t *testing.T) {
	at := time.UnixMicro(1796141234873495).UTC()
	good := agentfs.Cursor{CreatedAt: at, ID: "op-42:a.b"}.String()
	if c, err := parseKeyCursor(good); err != nil || c.ID != "op-42:a.b" || !c.CreatedAt.Equal(at) {
		t.Fatalf("parseKeyCursor(%q) = %+v, %v", good, c, err)
	}
	if c, err := parseKeyCursor(""); err != nil || c != nil {
		t.Fatalf("an empty cursor is the first page: %+v, %v", c, err)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{"bogus!", enc("123"), enc("x|op-1"), enc("-5|op-1"), enc("123|"), enc("123|-bad key"),
		enc("123|" + string(make([]byte, 300)))} {
		if _, err := parseKeyCursor(bad); err == nil {
			t.Errorf("parseKeyCursor(%q) accepted", bad)
		}
	}
}

func FuzzParseKeyCursor(f *testing.F) {
	f.Add(agentfs.Cursor{CreatedAt: time.Now(), ID: "k1"}.String())
	f.Add("")
	f.Add("MTIzfA")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseKeyCursor(s)
		if err != nil || c == nil {
			return
		}
		again, err := parseKeyCursor(c.String())
		if err != nil || again.ID != c.ID || !again.CreatedAt.Equal(c.CreatedAt) {
			t.Fatalf("%q parsed as %+v, which does not round-trip: %+v, %v", s, c, again, err)
		}
	})
}
