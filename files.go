package agentfs

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Put asks to store content at a path: a new file, or a replace of the live
// file there when Replace is set.
type Put struct {
	Subject     string
	Path        string
	ContentType string
	Replace     bool
	// IfMatch is the raw If-Match header: the live file must carry one of
	// its etags ("*" matches any live file).
	IfMatch string
	// IfNoneMatchAny is "If-None-Match: *": the path must hold no live file.
	IfNoneMatchAny bool
	// Size is the declared length of the content, -1 when unknown.
	Size int64
	// MaxBytes caps the content; more is ErrTooLarge.
	MaxBytes int64
	// Digest is the SHA-256 the caller sent in Content-Digest, if any; the
	// content must match it.
	Digest []byte
	// ExpiresIn, when positive, makes the file expire this long after the
	// write; 0 keeps a replaced file's expiry (a new file never expires).
	ExpiresIn time.Duration
	// Meta is the file's mode, mtime and kind as the write sets them.
	Meta FileMeta
	By   Attribution
	// Bulk marks one write of many (a batch item): its bytes stay out of
	// the blob cache, which a bulk load would fill with what reads seldom
	// ask for again, pushing out what they do (and the memory a batch may
	// take is bounded by its body alone, DESIGN §11).
	Bulk bool
}

// CheckAgainst decides the put against the live file at its path (nil when
// there is none): preconditions first (412), then if_exists (409), then a
// block on the file (451). It runs before the body is read and again in the
// committing transaction.
func (p *Put) CheckAgainst(live *File) error {
	if p.IfNoneMatchAny && live != nil {
		return ErrPreconditionFailed
	}
	if p.IfMatch != "" && (live == nil || !ETagMatches(p.IfMatch, live.ETag())) {
		return ErrPreconditionFailed
	}
	if live == nil {
		return nil
	}
	if !p.Replace {
		return &PathExistsError{Path: p.Path, ExistingFileID: live.ID}
	}
	if live.Blocked {
		return &BlockedError{FileID: live.ID, Reason: live.BlockReason}
	}
	return nil
}

// ETagMatches reports whether an If-Match header value names etag: "*" or
// a comma-separated list of quoted etags, compared strongly (RFC 9110
// §13.1.1: a weak W/ etag never matches), since If-Match guards a write
// that must not land on other bytes.
func ETagMatches(header, etag string) bool { return etagListHas(header, etag, false) }

// ETagMatchesWeak reports whether an If-None-Match header value names etag,
// compared weakly (RFC 9110 §13.1.2): W/"x" and "x" are the same etag, so a
// cache that holds either form is told 304 Not Modified.
func ETagMatchesWeak(header, etag string) bool { return etagListHas(header, etag, true) }

func etagListHas(header, etag string, weak bool) bool {
	header = strings.TrimSpace(header)
	if header == "*" {
		return true
	}
	if weak {
		etag = strings.TrimPrefix(etag, "W/")
	}
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(v)
		if weak {
			v = strings.TrimPrefix(v, "W/")
		}
		if v != "" && v == etag {
			return true
		}
	}
	return false
}

// FileFilter selects files to list, newest first.
type FileFilter struct {
	RunID     string
	AgentID   string
	LastRunID string
	// WrittenByRun selects the files a run created or last wrote (a run's
	// archive).
	WrittenByRun   string
	Prefix         string
	Path           string
	IncludeDeleted bool
	Limit          int
	After          *Cursor
	// Fields, when set, are the members of the File object (JSON names)
	// the listing answers with: the store may leave the others zero.
	// id, created_at and what filters and pages need are always read.
	Fields []string
}

// Cursor is a position in a listing: the last file of the previous page.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// ErrInvalidCursor says a cursor was not made by this server.
var ErrInvalidCursor = errors.New("cursor is not one this server issued")

// String encodes the cursor as an opaque token.
func (c Cursor) String() string {
	raw := strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "|" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a token made by Cursor.String for a listing of
// resources whose ids carry prefix ("file", "upl", "batch").
func ParseCursor(s, prefix string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 200 {
		return Cursor{}, ErrInvalidCursor
	}
	micros, id, ok := strings.Cut(string(raw), "|")
	if !ok || !WellFormedID(prefix, id) {
		return Cursor{}, ErrInvalidCursor
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	if err != nil || us < 0 {
		return Cursor{}, ErrInvalidCursor
	}
	return Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: id}, nil
}

// IDAlphabet is the lowercase base32 alphabet of every resource id: a type
// prefix, '_', then 26 of these characters (128 random bits).
const IDAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// WellFormedID reports whether id has the form of a resource id with this
// prefix ("file", "upl", "batch"); an empty prefix accepts any.
func WellFormedID(prefix, id string) bool {
	p, rest, ok := strings.Cut(id, "_")
	if !ok || p == "" || len(p) > 8 || (prefix != "" && p != prefix) || len(rest) != 26 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 'a' || p[i] > 'z' {
			return false
		}
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(IDAlphabet, rune(rest[i])) {
			return false
		}
	}
	return true
}

// BlobLink is a presigned GET of one version's blob on the S3 service's
// public endpoint: anyone holding URL reads exactly those bytes until
// Expires, without AgentFS (GET …/content?redirect=true).
type BlobLink struct {
	URL     string
	Expires time.Time
}
