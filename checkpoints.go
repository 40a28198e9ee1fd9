package agentfs

import (
	"strconv"
	"time"
)

// Checkpoint names a point of a subject's history so it outlives the event
// retention and keeps the versions it needs (DESIGN §18): a position, not a
// copy, so making one costs the same at any number of files.
type Checkpoint struct {
	ID        string
	Subject   string
	Name      string // "" when unnamed
	Prefix    string
	Note      string
	Position  int64
	By        Attribution
	CreatedAt time.Time
}

// Point is the moment the checkpoint names.
func (c *Checkpoint) Point() Point {
	return Point{Position: c.Position, At: c.CreatedAt, CheckpointID: c.ID}
}

// NewCheckpoint is a request to make a checkpoint (POST /v1/checkpoints).
type NewCheckpoint struct {
	Subject string
	Name    string
	Prefix  string
	Note    string
	By      Attribution
}

// MaxCheckpointNote bounds a checkpoint's note, in bytes.
const MaxCheckpointNote = 4096

// CheckpointFilter selects a page of a subject's checkpoints, newest first.
type CheckpointFilter struct {
	Prefix string
	Limit  int
	After  *Cursor
}

// CheckpointExistsError says the subject already has a checkpoint of this
// name (409 CHECKPOINT_EXISTS).
type CheckpointExistsError struct {
	Name string
}

func (e *CheckpointExistsError) Error() string {
	return "a checkpoint named " + strconv.Quote(e.Name) + " already exists"
}

// Events of checkpoints; they name no file (file_id is empty, path is the
// checkpoint's prefix) and carry the checkpoint's id.
const (
	EventCheckpointCreated = "checkpoint.created"
	EventCheckpointDeleted = "checkpoint.deleted"
)
