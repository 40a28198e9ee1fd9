package agentfs

import "time"

// Batch and item states.
const (
	BatchQueued             = "queued"
	BatchRunning            = "running"
	BatchSucceeded          = "succeeded"
	BatchPartiallySucceeded = "partially_succeeded"
	BatchFailed             = "failed"
	BatchCanceled           = "canceled"
	ItemPending             = "pending"
	ItemSucceeded           = "succeeded"
	ItemFailed              = "failed"
	ItemCanceled            = "canceled"
)

// Batch operations.
const (
	OpPut     = "put"
	OpDelete  = "delete"
	OpRestore = "restore"
	OpCopy    = "copy"
	// OpUndo brings one file back to its state before a run (POST
	// /v1/runs/{run_id}/revert makes these items, never a request).
	OpUndo = "undo"
	// OpRestoreTo brings one file back to its state at a point (POST
	// /v1/restore makes these items, never a request): its Undo carries
	// that state, with no run id, and a change after After fails it with
	// ErrPreconditionFailed unless Force.
	OpRestoreTo = "restore_to"
)

// How a batch put's content is encoded in the request's JSON string.
const (
	ContentUTF8   = "utf8"
	ContentBase64 = "base64"
)

// Batch is many operations admitted by one request and run in order in the
// background, each item's effect committed with its status.
type Batch struct {
	ID        string
	Subject   string
	Status    string
	By        Attribution
	RequestID string // of the request that admitted it
	// TokenID and Prefixes are the grant the batch was admitted with: the
	// token that made it, and the folders every item is held to (none:
	// every path).
	TokenID  string
	Prefixes []string
	// MaxBytes is the creator's byte budget (Grant.MaxBytes; 0: none),
	// which each item's bytes are reserved against as it runs.
	MaxBytes    int64
	Items       []BatchItem
	Tally       ItemCounts // the counts of a batch listed without its items
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// BatchItem is one operation of a batch and its outcome.
type BatchItem struct {
	Index   int
	Op      string
	Path    string // put and copy: the target path
	FileID  string // delete, restore: the file; copy: the source
	Content []byte // put: the decoded content (loaded only to run it)
	// Text is a put's content as a batch request carried it, until the
	// batch is stored: a JSON string (quotes and escapes included) whose
	// bytes, decoded as Encoding (ContentUTF8 or ContentBase64) says, are
	// the content. A batch is admitted and stored without a decoded copy
	// of each content; the item's content is decoded when it runs.
	Text        []byte
	Encoding    string
	ContentType string
	Replace     bool
	ExpiresIn   time.Duration // put: the file expires this long after it is written; 0: never
	Key         string        // the item's own Idempotency-Key, if any
	Undo        *Undo         // undo: the file's state before the run
	Status      string
	Replayed    bool
	ResultID    string // the file the item left
	Error       []byte // the problem (JSON) of a failed item
}

// Terminal reports whether no item is left to run.
func (b *Batch) Terminal() bool { return TerminalBatch(b.Status) }

// TerminalBatch reports whether a batch in this state is over.
func TerminalBatch(status string) bool {
	return status == BatchSucceeded || status == BatchPartiallySucceeded || status == BatchFailed || status == BatchCanceled
}

// ItemCounts tallies a batch's items by state.
type ItemCounts struct {
	Total, Succeeded, Failed, Pending, Canceled int
}

// Counts tallies the items by state; a batch listed without its items
// carries them in Tally.
func (b *Batch) Counts() ItemCounts {
	if b.Items == nil {
		return b.Tally
	}
	c := ItemCounts{Total: len(b.Items)}
	for _, it := range b.Items {
		switch it.Status {
		case ItemSucceeded:
			c.Succeeded++
		case ItemFailed:
			c.Failed++
		case ItemCanceled:
			c.Canceled++
		default:
			c.Pending++
		}
	}
	return c
}

// BatchFilter selects batches to list, newest first.
type BatchFilter struct {
	Status string
	// RunID, when set, keeps the batches made by that run's requests;
	// Open keeps those not yet terminal (queued or running).
	RunID string
	Open  bool
	Limit int
	After *Cursor
}

// Undo is what undoing a run does to one file: bring it back to the state
// it had before the run's first change to it.
type Undo struct {
	RunID string `json:"run_id"`
	// Existed is false when the run created the file: undoing deletes it.
	Existed bool `json:"existed"`
	// Live, Path and Version are the file's state before the run.
	Live    bool   `json:"live"`
	Path    string `json:"path"`
	Version int    `json:"version"`
	// After is the position of the run's last event on the file: a change
	// by anyone else after it fails the item (CHANGED_SINCE_RUN) unless
	// Force.
	After int64 `json:"after"`
	Force bool  `json:"force"`
	// Chain, on the first item of a restore whose files trade paths in a
	// ring (two that swapped, or more that went round), moves the ring's
	// other files to their paths within this item's transaction: the file
	// steps aside to a path of its own first, each file of Chain then takes
	// the path the one before it freed, and the file comes back to Path
	// last. Each of them must not have changed after After unless Force.
	Chain []UndoMove `json:"chain,omitempty"`
}

// UndoMove is a file of an Undo's Chain and the path it goes back to.
type UndoMove struct {
	FileID string `json:"file_id"`
	Path   string `json:"path"`
}

// ChangedSinceRunError says another run changed a file after the run being
// undone last did, so undoing it would undo that change too.
type ChangedSinceRunError struct {
	FileID string
	RunID  string
}

func (e *ChangedSinceRunError) Error() string {
	return "file " + e.FileID + " was changed by another run after run " + e.RunID
}
