package agentfs

import "time"

// Batch and item states.
const (
	BatchQueued             = "queued"
	BatchRunning            = "running"
	BatchSucceeded          = "succeeded"
	BatchPartiallySucceeded = "partially_succeeded"
	BatchFailed             = "failed"
	ItemPending             = "pending"
	ItemSucceeded           = "succeeded"
	ItemFailed              = "failed"
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
	Key         string // the item's own Idempotency-Key, if any
	Status      string
	Replayed    bool
	ResultID    string // the file the item left
	Error       []byte // the problem (JSON) of a failed item
}

// Terminal reports whether no item is left to run.
func (b *Batch) Terminal() bool {
	return b.Status == BatchSucceeded || b.Status == BatchPartiallySucceeded || b.Status == BatchFailed
}

// Counts tallies the items by state.
func (b *Batch) Counts() (succeeded, failed, pending int) {
	for _, it := range b.Items {
		switch it.Status {
		case ItemSucceeded:
			succeeded++
		case ItemFailed:
			failed++
		default:
			pending++
		}
	}
	return succeeded, failed, pending
}
