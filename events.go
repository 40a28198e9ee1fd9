package agentfs

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventCursor is a position in a subject's event feed: after the event at
// Position (0 is before the first), seen at At (how old the cursor is, for
// the retention). A cursor belongs to the subject it was made for.
type EventCursor struct {
	Position int64
	At       time.Time
	Subject  string
}

// Errors of event cursors.
var (
	// ErrInvalidEventCursor says a cursor was not made by this server for
	// this subject.
	ErrInvalidEventCursor = errors.New("cursor is not one this server issued for this subject")
	// ErrCursorExpired says the events after a cursor may have been removed
	// by the retention: a follower must start again.
	ErrCursorExpired = errors.New("cursor is older than the event retention")
	// ErrTooManyWaiters says a subject already has as many requests
	// waiting for events on this instance as it may: one more would only
	// hold a connection, so it is told to come back (429).
	ErrTooManyWaiters = errors.New("too many requests of this subject are waiting for events")
)

func subjectTag(subject string) string {
	sum := sha256.Sum256([]byte("agentfs events " + subject))
	return hex.EncodeToString(sum[:6])
}

// String encodes the cursor as an opaque token.
func (c EventCursor) String() string {
	raw := fmt.Sprintf("e2|%d|%d|%s", c.Position, c.At.UnixMicro(), subjectTag(c.Subject))
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseEventCursor decodes a token made by EventCursor.String for subject.
func ParseEventCursor(s, subject string) (EventCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 120 {
		return EventCursor{}, ErrInvalidEventCursor
	}
	f := strings.Split(string(raw), "|")
	if len(f) != 4 || f[0] != "e2" || f[3] != subjectTag(subject) {
		return EventCursor{}, ErrInvalidEventCursor
	}
	pos, err1 := strconv.ParseInt(f[1], 10, 64)
	us, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || pos < 0 || us < 0 {
		return EventCursor{}, ErrInvalidEventCursor
	}
	return EventCursor{Position: pos, At: time.UnixMicro(us).UTC(), Subject: subject}, nil
}

// Watch is a path one session of the /mcp door subscribed to (an MCP
// resource subscription): the session hears of every event on the path
// that commits after After, and of every event below it when the path is
// a prefix (it ends with "/", or is "" for all the subject's files).
// Watches are kept in Postgres, so that whichever instance streams a
// session's notifications knows what the session subscribed to on another.
type Watch struct {
	Session string
	Path    string
	// After is the feed's end when the watch was made.
	After EventCursor
}

// Covers reports whether an event on path p concerns the watch.
func (w Watch) Covers(p string) bool {
	if w.Path == "" || strings.HasSuffix(w.Path, "/") {
		return strings.HasPrefix(p, w.Path)
	}
	return p == w.Path
}

// MaxWatchesPerSession bounds the paths one session watches.
const MaxWatchesPerSession = 1000

// ErrTooManyWatches says a session already watches MaxWatchesPerSession
// paths.
var ErrTooManyWatches = errors.New("the session already watches as many paths as it may")
