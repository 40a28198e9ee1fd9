package agentfs

import "time"

// Recovery is what a run left behind, true at one point of the subject's
// event feed (DESIGN §25): what it confirmed, the keys its requests
// claimed, and its upload sessions and batches still in flight, for the
// worker that takes the run over.
type Recovery struct {
	RunID string
	// AsOf is the event cursor everything below holds at.
	AsOf EventCursor
	// Summary is what the run's events did (zero when it has none).
	Summary RunSummary
	// Events counts the run's events; LastEvent is the cursor at its last
	// one (nil: none).
	Events    int
	LastEvent *EventCursor
	// Operations is one page of the run's keys, newest first; Next is the
	// cursor of the next page (nil on the last).
	Operations []KeyOperation
	Next       *Cursor
	Uploads    []*Upload
	Batches    []*Batch
	// PredatesRunRecord counts the subject's kept keys claimed before keys
	// recorded their run: any of them may be this run's, and none is
	// listed.
	PredatesRunRecord int
}

// Statuses of a key in a run's recovery.
const (
	KeyCompleted  = "completed"
	KeyInProgress = "in_progress"
	// KeyAbandoned is a claim whose owner died: its lease lapsed with
	// nothing recorded, so nothing happened and the same key may be sent
	// again (DESIGN §6).
	KeyAbandoned = "abandoned"
)

// KeyOperation is one key a run's request claimed, as a recovery lists it.
type KeyOperation struct {
	Key, Method, Route string
	// RequestURI is the path and query of the request that claimed the key
	// ("" when not a REST request of its own); Paths are where its effect
	// writes.
	RequestURI string
	Paths      []string
	Status     string
	// ResponseStatus and Resource are the recorded outcome's (completed).
	ResponseStatus int
	ResourceObject string
	ResourceID     string
	// RetryAfter is how long an in-progress claim's lease still runs.
	RetryAfter time.Duration
	CreatedAt  time.Time
	// At is when it completed, else when it was claimed.
	At time.Time
}

// RecoveryFilter pages a run's recovery: Limit keys per page, after the
// cursor of the page before.
type RecoveryFilter struct {
	Limit int
	After *Cursor
}
