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
	// Secrets names the members of Body that hold a secret shown only to
	// the token that made the request (a share link's url). A record keeps
	// them sealed and its Body shows them null (see secrets.go).
	Secrets []string
}

// Record is what a key holds: a claim while its first request runs, then
// that request's outcome.
type Record struct {
	Key         string
	Method      string
	Route       string
	Completed   bool
	ContentHash []byte
	// Outcome is the answer as recorded: its Secrets are null in its Body,
	// their values sealed in Sealed.
	Outcome Outcome
	// Sealed holds the values of Outcome.Secrets.
	Sealed      Sealed
	CreatedAt   time.Time
	CompletedAt *time.Time
	ExpiresAt   *time.Time
	// Abandoned says the claim's owner died: its lease lapsed with nothing
	// recorded, so nothing happened under the key and the same request may
	// be sent again with it (DESIGN §6, §25).
	Abandoned bool
	// RetryAfter is how long an in-progress claim's lease still runs.
	RetryAfter time.Duration
}

// Sealed is what a record keeps of its answer's secret members: their
// values sealed by RecordKeys (nil when there are none, or when no record
// key was set), and the token (its id) they are replayed to.
type Sealed struct {
	Data []byte
	For  string
}

// Result is how an admitted write ended, as its door answers it: the
// outcome, and whether it was replayed from a key's record rather than run.
type Result struct {
	Outcome
	Replayed bool
	// Redacted names the members of a replayed Body shown null because
	// they hold a secret kept for another token (or one this server can no
	// longer open): the answer says so in RedactedHeader.
	Redacted []string
}

// ReplayHeader marks a response replayed from a recorded outcome.
const ReplayHeader = "Idempotent-Replayed"

// RedactedHeader names, on a replay, the members of the answer shown null
// because they hold a secret that only the token that made the request
// may see again.
const RedactedHeader = "Idempotent-Redacted"
