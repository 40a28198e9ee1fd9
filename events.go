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
