package agentfs

import (
	"errors"
	"fmt"
	"time"
)

// Upload session states.
const (
	UploadPending    = "pending"
	UploadCompleting = "completing"
	UploadCompleted  = "completed"
	UploadAborted    = "aborted"
	UploadExpired    = "expired"
	UploadFailed     = "failed"
)

// S3 multipart limits the part plan must respect.
const (
	MinPartSize = 5 << 20
	MaxParts    = 10000
)

// Upload is a multipart upload session: a large file sent in parts that go
// straight into an S3 multipart upload, then assembled into a file.
type Upload struct {
	ID          string
	Subject     string
	Path        string
	SizeBytes   int64
	ContentType string
	Replace     bool
	SHA256      string // the whole file's, when the caller declared it
	PartSize    int64
	PartCount   int
	Status      string
	Parts       []Part
	ExpiresAt   time.Time
	FileID      string
	Error       []byte // the problem that failed it (JSON)
	By          Attribution
	CreatedAt   time.Time

	S3UploadID  string
	BlobKey     string
	HashedParts int    // parts 1..HashedParts are folded into HashState
	HashState   []byte // a marshalled SHA-256 of the content so far
	Assembled   bool   // the S3 multipart upload was completed into BlobKey
	ExpiresIn   time.Duration
}

// NewUpload is what a caller asks of a new upload session.
type NewUpload struct {
	Subject     string
	Path        string
	SizeBytes   int64
	ContentType string
	Replace     bool
	SHA256      string
	By          Attribution
	PartSize    int64         // preferred; the plan may grow it
	TTL         time.Duration // how long the session lives
	ExpiresIn   time.Duration // the file expires this long after it is written; 0: never
	// MaxOpen bounds the subject's sessions open at once (pending or
	// completing) when a new one would be made; 0: no bound.
	MaxOpen int
}

// CompleteRequest overrides a session's if_exists and declared sha256, and
// adds a precondition, at complete time.
type CompleteRequest struct {
	Replace *bool
	SHA256  string
	IfMatch string
}

// Part is one received part of an upload.
type Part struct {
	Number    int
	SizeBytes int64
	SHA256    string
	ETag      string // S3's, for the complete request
}

// PlanParts chooses the part size for a file: the preferred size (at least
// 5 MiB), grown in whole MiB until the file needs at most 10,000 parts.
func PlanParts(size, preferred int64) (partSize int64, count int) {
	partSize = max(preferred, MinPartSize)
	if need := (size + MaxParts - 1) / MaxParts; need > partSize {
		partSize = (need + (1<<20 - 1)) &^ (1<<20 - 1)
	}
	count = int((size + partSize - 1) / partSize)
	return partSize, max(count, 1)
}

// PartSizeOf returns the exact size part n must have.
func (u *Upload) PartSizeOf(n int) (int64, error) {
	if n < 1 || n > u.PartCount {
		return 0, fmt.Errorf("%w: part number must be between 1 and %d", ErrPartOutOfRange, u.PartCount)
	}
	if n < u.PartCount {
		return u.PartSize, nil
	}
	return u.SizeBytes - int64(u.PartCount-1)*u.PartSize, nil
}

// MissingParts lists the part numbers not received yet.
func (u *Upload) MissingParts() []int {
	have := make(map[int]bool, len(u.Parts))
	for _, p := range u.Parts {
		have[p.Number] = true
	}
	var missing []int
	for n := 1; n <= u.PartCount; n++ {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

// UploadStateError says a session is no longer pending.
type UploadStateError struct{ Status string }

func (e *UploadStateError) Error() string { return "upload session is " + e.Status }

// UploadBusyError says another request holds the session for a while: a
// complete of it (or of another session of its path) is running, or a part
// of it is still on its way. Nothing was done; the same request may be sent
// again after RetryAfter, by when the holder has finished or its lease
// has lapsed.
type UploadBusyError struct {
	Reason     string        // what holds the session, in the API's words
	RetryAfter time.Duration // at most what is left of the holder's lease, at least 1 s
}

func (e *UploadBusyError) Error() string { return e.Reason }

// TooManyUploadsError says a subject already has as many upload sessions
// open (pending or completing) as it may, so no new one is made: each
// holds an S3 multipart upload until it ends. RetryAfter is how long until
// the first of them expires, by when one is free at the latest; completing
// or aborting one frees it sooner.
type TooManyUploadsError struct {
	Limit      int
	RetryAfter time.Duration
}

func (e *TooManyUploadsError) Error() string {
	return fmt.Sprintf("the subject has %d upload sessions open, the most it may", e.Limit)
}

// PartAssembledError says a part came with other bytes than the part a
// session already assembled: an earlier complete assembled the session's
// parts and then did not commit (the path was taken meanwhile, S3 or
// Postgres failed), so the session can still be completed but its parts can
// no longer change.
type PartAssembledError struct{ Number int }

func (e *PartAssembledError) Error() string {
	return fmt.Sprintf("part %d was already assembled with other bytes", e.Number)
}

// PartsMissingError says a complete came before every part.
type PartsMissingError struct{ Missing []int }

func (e *PartsMissingError) Error() string { return fmt.Sprintf("parts missing: %v", e.Missing) }

// Errors of upload sessions.
var (
	// ErrSizeMismatch says a body's size is not the size required.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrPartOutOfRange says a part number is outside 1..part_count.
	ErrPartOutOfRange = errors.New("part number out of range")
	// ErrUploadCompleting says another request is assembling the session.
	ErrUploadCompleting = errors.New("upload is being completed by another request")
	// ErrIfMatchWithoutReplace says If-Match came without if_exists=replace.
	ErrIfMatchWithoutReplace = errors.New("If-Match asks for a conditional replace; send if_exists=replace with it")
)

// UploadFilter selects upload sessions to list, newest first.
type UploadFilter struct {
	Status string
	Path   string
	// RunID, when set, keeps the sessions made by that run's requests;
	// Open keeps those still in flight (pending and unexpired, or
	// completing), as a run's recovery lists them.
	RunID string
	Open  bool
	Limit int
	After *Cursor
}
