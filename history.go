package agentfs

import (
	"errors"
	"regexp"
	"strings"
	"time"
)

// FileVersion is one content of a file: every write that changes a file's
// bytes or content type makes one. The previous ones stay readable until
// the retention drops them.
type FileVersion struct {
	FileID      string
	Subject     string
	Version     int
	SizeBytes   int64
	ContentType string
	SHA256      string
	BlobKey     string
	By          Attribution // of the write that made it
	CreatedAt   time.Time
	Current     bool
}

// ETag names the version's content, like File.ETag.
func (v *FileVersion) ETag() string { return `"` + v.SHA256 + `"` }

// VersionFilter selects versions of a file to list, newest first.
type VersionFilter struct {
	Limit  int
	Before int // list versions below this number; 0: from the newest
}

// Move asks to give a file another path, keeping its id, url, version and
// history.
type Move struct {
	Subject string
	FileID  string
	Path    string
	Replace bool // soft-delete a live file at the destination
	// Overwrite makes the file's bytes the next version of a live file at
	// the destination (which keeps its id and history) and deletes the
	// moved file: the atomic save of editors and git.
	Overwrite bool
	IfMatch   string // the file must carry this etag
}

// Revert asks to make an earlier version's content the current one, as a
// new version sharing that version's blob.
type Revert struct {
	Subject string
	FileID  string
	Version int
	IfMatch string
	By      Attribution
}

// Expiry asks to change a file's metadata without a new version (PATCH
// /v1/files/{id}): when it expires (set, or cleared when At is nil, unless
// KeepExpiry), and its mode and mtime when they are set.
type Expiry struct {
	Subject    string
	FileID     string
	At         *time.Time
	KeepExpiry bool // leave expires_at as it is
	Mode       *int
	MTime      *time.Time
	IfMatch    string
}

// Limits on expiry times (lifecycle).
const (
	MinExpiresIn = 60 * time.Second
	MaxExpiresIn = 365 * 24 * time.Hour
)

// Link is a share link: a secret URL that serves a file's bytes without a
// token. Only the SHA-256 of its secret is kept.
type Link struct {
	ID        string
	Subject   string
	FileID    string
	Version   int // 0: always the current content
	ExpiresAt time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	By        Attribution
	// Secret is the link's secret, known only to the request that created
	// it; empty whenever the link is read back.
	Secret string
}

// Shared is what a share link serves: the file and the version it shows.
type Shared struct {
	Link    *Link
	File    *File        // as it is now
	Version *FileVersion // the content to serve
}

// NewLink is what a caller asks of a new share link.
type NewLink struct {
	Subject   string
	FileID    string
	Version   int
	ExpiresIn time.Duration
	By        Attribution
}

// Limits on share links (lifecycle).
const (
	MinLinkExpiresIn     = 60 * time.Second
	MaxLinkExpiresIn     = 7 * 24 * time.Hour
	DefaultLinkExpiresIn = time.Hour
)

// SharePathRedacted is what RedactSharePaths leaves of a share link's path:
// the route's own template, so a trace or a problem still says which route
// was asked.
const SharePathRedacted = "/s/{secret}"

// sharePath finds a share link's secret in a URL or a path: what follows
// /s/ (or its percent-encoded spellings) up to the next separator.
var sharePath = regexp.MustCompile(`(?i)(?:/|%2f)(?:s|%73)(?:/|%2f)([^/?#\s"'<>]+)`)

// RedactSharePaths returns s with the secret of every share link path in
// it replaced, wherever it stands (a URL, a path, an error, a span name):
// a link's secret is its whole authority, so nothing that is logged,
// traced or exported may carry it. The route templates /s/:secret and
// /s/{secret} are left as they are.
func RedactSharePaths(s string) string {
	if !strings.ContainsAny(s, "/%") {
		return s
	}
	return sharePath.ReplaceAllStringFunc(s, func(m string) string {
		if seg := sharePath.FindStringSubmatch(m)[1]; seg == ":secret" || seg == "{secret}" {
			return m
		}
		return SharePathRedacted
	})
}

// Event types: every effect on a file commits one (the run ledger).
const (
	EventCreated  = "file.created"
	EventReplaced = "file.replaced"
	EventDeleted  = "file.deleted"
	EventRestored = "file.restored"
	EventMoved    = "file.moved"
	EventReverted = "file.reverted"
	EventExpired  = "file.expired"
	EventPurged   = "file.purged"
)

// EventTypes lists every event type.
var EventTypes = []string{EventCreated, EventReplaced, EventDeleted, EventRestored, EventMoved,
	EventReverted, EventExpired, EventPurged, EventCheckpointCreated, EventCheckpointDeleted}

// Origin is what caused an effect, as its event records it: the request's
// attribution, its Idempotency-Key and id, and the batch it ran in.
type Origin struct {
	By        Attribution
	Key       string
	RequestID string
	BatchID   string
	// ForkID and Via name the fork or merge the effect belongs to (Via
	// ViaFork or ViaMerge; "" for every other write).
	ForkID string
	Via    string
}

// OriginOf is the origin of a caller's write.
func OriginOf(who Caller) Origin {
	return Origin{By: who.By, Key: who.Key, RequestID: who.RequestID}
}

// Event is one effect on a file, in the order effects became visible.
type Event struct {
	ID           string
	Subject      string
	Type         string
	FileID       string
	Path         string
	PreviousPath string
	Version      int
	SizeBytes    int64
	SHA256       string
	Origin       Origin
	At           time.Time
	// CheckpointID names the checkpoint of a checkpoint.* event (which
	// names no file).
	CheckpointID string
	// Position is the event's place in its subject's feed: events are
	// numbered 1, 2, 3… in the order their transactions committed.
	Position int64
}

// Errors of history and lifecycle.
var (
	// ErrLinkGone says a share link is unknown, expired or revoked, or
	// what it shares is deleted or swept: all the same to its holder.
	ErrLinkGone = errors.New("share link is unknown, expired or revoked")
)

// EventFilter selects a subject's events, oldest first.
type EventFilter struct {
	After   *EventCursor // nil: from the oldest kept event
	RunID   string
	AgentID string
	FileID  string
	Prefix  string
	Types   []string
	Limit   int
}

// RunSummary is what one run did, from its events.
type RunSummary struct {
	RunID        string
	AgentIDs     []string
	FirstAt      time.Time
	LastAt       time.Time
	Counts       map[string]int // by event type
	BytesWritten int64
	LiveFiles    int
	// LastPosition is the feed position of the run's newest event: where
	// a listing of runs, newest activity first, goes on from.
	LastPosition int64
}
