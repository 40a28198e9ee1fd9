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
)

// Batch is many operations admitted by one request and run in order in the
// background, each item's effect committed with its status.
type Batch struct {
	ID          string
	Subject     string
	Status      string
	By          Attribution
	RequestID   string // of the request that admitted it
	Items       []BatchItem
	Tally       ItemCounts // the counts of a batch listed without its items
	CreatedAt   time.Time
	StartedAt   *time.Time
	CompletedAt *time.Time
}

// BatchItem is one operation of a batch and its outcome.
type BatchItem struct {
	Index       int
	Op          string
	Path        string // put and copy: the target path
	FileID      string // delete, restore: the file; copy: the source
	Content     []byte // put: the decoded content (loaded only to run it)
	ContentType string
	Replace     bool
	ExpiresIn   time.Duration // put: the file expires this long after it is written; 0: never
	Key         string        // the item's own Idempotency-Key, if any
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
	Limit  int
	After  *Cursor
}
