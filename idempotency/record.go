package idempotency

import "time"

// Resource names what a write created or changed.
type Resource struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// Outcome is a response as recorded for replay: what the first request with
// a key answered, so that every repeat answers the same.
type Outcome struct {
	Status   int
	Header   map[string]string // ETag, Location
	Body     []byte
	Resource Resource
}

// Record is what a key holds: a claim while its first request runs, then
// that request's outcome.
type Record struct {
	Key         string
	Method      string
	Route       string
	Completed   bool
	ContentHash []byte
	Outcome     Outcome
	CreatedAt   time.Time
	CompletedAt *time.Time
	ExpiresAt   *time.Time
}

// Result is how an admitted write ended, as its door answers it: the
// outcome, and whether it was replayed from a key's record rather than run.
type Result struct {
	Outcome
	Replayed bool
}

// ReplayHeader marks a response replayed from a recorded outcome.
const ReplayHeader = "Idempotent-Replayed"
