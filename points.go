package agentfs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// PointKind says how a point was written (DESIGN §18).
type PointKind int

// The ways of writing a point.
const (
	PointNow            PointKind = iota // "now": the current end of the feed
	PointCursor                          // an event cursor (every next_cursor of the feed)
	PointCheckpointID                    // "ckpt_…"
	PointCheckpointName                  // a checkpoint's name
	PointTime                            // an RFC 3339 time: the last event committed at or before it
)

// PointSpec is a point as the caller wrote it, parsed but not yet resolved
// against the subject's history (storage does that: Store.ResolvePoint).
type PointSpec struct {
	// Field names the parameter that carried it (as_of, from, to), for the
	// problem a bad point answers.
	Field  string
	Kind   PointKind
	Raw    string
	Cursor EventCursor // PointCursor
	Time   time.Time   // PointTime
}

// Point is a resolved moment of one subject's history: every event at a
// position up to Position has committed, and At is the point's time (a
// file whose expires_at is at or before At was no longer live).
type Point struct {
	Position int64
	At       time.Time
	// CheckpointID is set when the point is a checkpoint; a checkpoint
	// outlives the event retention.
	CheckpointID string
}

// Cursor is the point as an event cursor, which names it in answers.
func (p Point) Cursor(subject string) EventCursor {
	return EventCursor{Position: p.Position, At: p.At, Subject: subject}
}

// PointError is a point that is malformed or not allowed (422).
type PointError struct {
	Field  string
	Reason string
}

func (e *PointError) Error() string { return e.Field + ": " + e.Reason }

// ErrPointInFuture is the reason of a point after the subject's present.
var ErrPointInFuture = errors.New("the point is in the future")

// maxPointLen bounds a point's text: a cursor, a checkpoint id or name and
// an RFC 3339 time are all shorter.
const maxPointLen = 160

// ParsePoint reads a point from untrusted text s, for subject: "now", a
// checkpoint id ("ckpt_…"), an RFC 3339 time, an event cursor of subject,
// or else a checkpoint name. A cursor of another subject, or text that is
// none of these, is a *PointError naming field.
func ParsePoint(field, s, subject string) (PointSpec, error) {
	spec := PointSpec{Field: field, Raw: s}
	bad := func(reason string) (PointSpec, error) {
		return PointSpec{}, &PointError{Field: field, Reason: reason}
	}
	switch {
	case s == "":
		return bad("is empty; give an event cursor, a checkpoint id or name, an RFC 3339 time or now")
	case len(s) > maxPointLen || !utf8.ValidString(s):
		return bad("is not a point")
	case s == "now":
		spec.Kind = PointNow
		return spec, nil
	case strings.HasPrefix(s, "ckpt_"):
		if !validResourceID(s, "ckpt_") {
			return bad("is not a checkpoint id")
		}
		spec.Kind = PointCheckpointID
		return spec, nil
	}
	if looksLikeTime(s) {
		t, ok := parsePointTime(s)
		if !ok {
			return bad("is not an RFC 3339 time")
		}
		spec.Kind, spec.Time = PointTime, t
		return spec, nil
	}
	if looksLikeCursor(s) {
		c, err := ParseEventCursor(s, subject)
		if err != nil {
			return bad("is not an event cursor of this subject")
		}
		spec.Kind, spec.Cursor = PointCursor, c
		return spec, nil
	}
	if !ValidTagValue(s) {
		return bad("is not a point: give an event cursor, a checkpoint id or name, an RFC 3339 time or now")
	}
	spec.Kind = PointCheckpointName
	return spec, nil
}

// looksLikeTime reports whether s starts as a date (YYYY-MM-DD): such text
// is a time or malformed, never a checkpoint name.
func looksLikeTime(s string) bool {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parsePointTime reads an RFC 3339 time (with or without fractional
// seconds).
func parsePointTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 1970 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// looksLikeCursor reports whether s is an event cursor of any subject.
func looksLikeCursor(s string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && strings.HasPrefix(string(raw), "e2|")
}

// validResourceID reports whether s is prefix followed by the 26 base32
// characters of a server-made id.
func validResourceID(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != 26 {
		return false
	}
	for _, r := range rest {
		if !strings.ContainsRune("0123456789abcdefghjkmnpqrstvwxyz", r) {
			return false
		}
	}
	return true
}

// CheckCheckpointName says why name cannot name a checkpoint (nil when it
// can): 1–128 characters of the tag set, and not text that reads as
// another kind of point.
func CheckCheckpointName(name string) error {
	switch {
	case !ValidTagValue(name):
		return fmt.Errorf("must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ - starting with a letter or digit")
	case name == "now" || strings.HasPrefix(name, "ckpt_"):
		return fmt.Errorf("reads as another point (now or a checkpoint id)")
	}
	if looksLikeTime(name) {
		return fmt.Errorf("reads as a time (it starts as a date)")
	}
	if looksLikeCursor(name) {
		return fmt.Errorf("reads as an event cursor")
	}
	return nil
}

// AsOfFilter selects an as-of listing page: the files live at Point under
// Prefix, in path order after After.
type AsOfFilter struct {
	Point  Point
	Prefix string
	After  string
	Limit  int
}

// DiffRequest asks what changed under Prefix between two resolved points,
// a page by path after (AfterPath, AfterID).
type DiffRequest struct {
	From, To  Point
	Prefix    string
	AfterPath string
	AfterID   string
	Limit     int
	// Content says the caller reads the bytes too (format=patch), which
	// needs the content-read operation besides the diff's.
	Content bool
}

// Kinds of change a diff lists.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
	ChangeMoved    = "moved"
)

// Change is one file that differs between two points: its state at each
// (nil where it was not live).
type Change struct {
	Path         string // at To, or at From for a deletion
	Kind         string
	FileID       string
	PreviousPath string // at From, for a move
	From, To     *FileState
	// Blocked says the file is blocked now: its bytes at either point are
	// not served (a patch shows it as binary).
	Blocked bool
}

// FileState is a file's content at a point.
type FileState struct {
	Path        string
	Version     int
	SHA256      string
	SizeBytes   int64
	ContentType string
	BlobKey     string
}

// RestoreRequest puts a subject's files under Prefix back to their state
// at To (POST /v1/restore, DESIGN §18).
type RestoreRequest struct {
	Prefix string
	To     PointSpec
	Force  bool
}
