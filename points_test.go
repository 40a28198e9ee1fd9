package agentfs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs"
)

func TestParsePoint(t *testing.T) {
	mine := agentfs.EventCursor{Position: 42, At: time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC), Subject: "me"}.String()
	theirs := agentfs.EventCursor{Position: 42, At: time.Now(), Subject: "other"}.String()
	for _, tc := range []struct {
		in   string
		kind agentfs.PointKind
		bad  bool
	}{
		{in: "now", kind: agentfs.PointNow},
		{in: "ckpt_0123456789abcdefghjkmnpqrs", kind: agentfs.PointCheckpointID},
		{in: "2026-05-01T10:00:00Z", kind: agentfs.PointTime},
		{in: "2026-05-01T10:00:00.123456+02:00", kind: agentfs.PointTime},
		{in: mine, kind: agentfs.PointCursor},
		{in: "before-refactor", kind: agentfs.PointCheckpointName},
		{in: "v1.2", kind: agentfs.PointCheckpointName},
		{in: "", bad: true},
		{in: theirs, bad: true},
		{in: "ckpt_short", bad: true},
		{in: "ckpt_0123456789ABCDEFGHJKMNPQRS", bad: true},
		{in: "-leading-dash", bad: true},
		{in: "has space", bad: true},
		{in: "2026-13-01T10:00:00Z", bad: true},
		{in: strings.Repeat("a", 200), bad: true},
		{in: "\xff", bad: true},
	} {
		spec, err := agentfs.ParsePoint("as_of", tc.in, "me")
		var pe *agentfs.PointError
		switch {
		case tc.bad && !errors.As(err, &pe):
			t.Errorf("ParsePoint(%q) = %+v, %v; want a *PointError", tc.in, spec, err)
		case tc.bad && pe.Field != "as_of":
			t.Errorf("ParsePoint(%q) names field %q", tc.in, pe.Field)
		case !tc.bad && err != nil:
			t.Errorf("ParsePoint(%q): %v", tc.in, err)
		case !tc.bad && spec.Kind != tc.kind:
			t.Errorf("ParsePoint(%q) kind %d, want %d", tc.in, spec.Kind, tc.kind)
		}
	}
	spec, _ := agentfs.ParsePoint("from", mine, "me")
	if spec.Cursor.Position != 42 {
		t.Errorf("cursor point at %d, want 42", spec.Cursor.Position)
	}
}

func TestCheckCheckpointName(t *testing.T) {
	cursor := agentfs.EventCursor{Position: 1, At: time.Now(), Subject: "x"}.String()
	for name, ok := range map[string]bool{
		"before-refactor": true, "release/1.0": true, "now": false, "ckpt_anything": false,
		"2026-01-02T03:04:05Z": false, cursor: false, "": false, strings.Repeat("n", 129): false, " x": false,
	} {
		if err := agentfs.CheckCheckpointName(name); (err == nil) != ok {
			t.Errorf("CheckCheckpointName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// FuzzParsePoint: any text parses to a point of a known kind or a
// *PointError, never a panic, and a name it accepts as a checkpoint name
// is one CheckCheckpointName accepts.
func FuzzParsePoint(f *testing.F) {
	for _, s := range []string{"now", "ckpt_0123456789abcdefghjkmnpqrs", "2026-05-01T10:00:00Z", "name", "ZTJ8MXwyfGFi", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := agentfs.ParsePoint("p", s, "me")
		if err != nil {
			var pe *agentfs.PointError
			if !errors.As(err, &pe) {
				t.Fatalf("ParsePoint(%q) error %T", s, err)
			}
			return
		}
		if spec.Kind == agentfs.PointCheckpointName {
			if cerr := agentfs.CheckCheckpointName(s); cerr != nil {
				t.Fatalf("%q parses as a checkpoint name but cannot be one: %v", s, cerr)
			}
		}
	})
}
