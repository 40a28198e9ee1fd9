package agentfs

import (
	"fmt"
	"slices"
)

// Scopes a token may carry.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// Writes the admission core runs, beside the batch operations (OpPut,
// OpDelete, OpRestore, OpCopy, OpUndo). Each is also the operation of the
// write's idempotency fingerprint, so a name here never changes.
const (
	OpMove           = "move"
	OpRevert         = "revert"
	OpSetExpiry      = "set_expiry"
	OpCreateLink     = "create_link"
	OpRevokeLink     = "revoke_link"
	OpCreateUpload   = "create_upload"
	OpPutPart        = "put_part"
	OpCompleteUpload = "complete_upload"
	OpAbortUpload    = "abort_upload"
	OpBatch          = "batch"
	OpCancelBatch    = "cancel_batch"
	OpRevertRun      = "revert_run"
	// Points in time (DESIGN §18).
	OpCreateCheckpoint = "create_checkpoint"
	OpDeleteCheckpoint = "delete_checkpoint"
	OpRestorePoint     = "restore_point" // POST /v1/restore, its dry run included
)

// Reads the read gate (package reads) serves.
const (
	OpGetFile      = "get_file"
	OpListFiles    = "list_files"
	OpReadContent  = "read_content" // a file's bytes, or a version's
	OpListVersions = "list_versions"
	OpGetVersion   = "get_version"
	OpListLinks    = "list_links"
	OpGetUpload    = "get_upload"
	OpListUploads  = "list_uploads"
	OpGetBatch     = "get_batch"
	OpListBatches  = "list_batches"
	OpGetOperation = "get_operation"
	OpListEvents   = "list_events"
	OpGetRun       = "get_run"
	OpRunArchive   = "run_archive"
	// Points in time (DESIGN §18); as_of reads are the reads they qualify.
	OpListCheckpoints = "list_checkpoints"
	OpGetCheckpoint   = "get_checkpoint"
	OpDiff            = "diff"
)

var (
	needsRead      = []string{ScopeRead}
	needsWrite     = []string{ScopeWrite}
	needsReadWrite = []string{ScopeRead, ScopeWrite}
)

// operationScopes is the one table from an operation to the scopes a
// caller's token must carry to run it, whichever door asks: the admission
// core checks a write against it before it claims a key (so a refused
// request is answered before anything is claimed, and a replay only to a
// caller that may make the request), the read gate a read before it asks
// the store, and the REST routes check the operation each route runs. A
// share link serves bytes to anyone who has it, so making one needs read;
// it is a keyed write that records state, so it needs write too.
var operationScopes = map[string][]string{
	OpPut: needsWrite, OpDelete: needsWrite, OpRestore: needsWrite, OpCopy: needsWrite, OpUndo: needsWrite,
	OpMove: needsWrite, OpRevert: needsWrite, OpSetExpiry: needsWrite, OpRevokeLink: needsWrite,
	OpCreateUpload: needsWrite, OpPutPart: needsWrite, OpCompleteUpload: needsWrite, OpAbortUpload: needsWrite,
	OpBatch: needsWrite, OpCancelBatch: needsWrite, OpRevertRun: needsWrite,
	OpCreateLink:       needsReadWrite,
	OpCreateCheckpoint: needsWrite, OpDeleteCheckpoint: needsWrite, OpRestorePoint: needsReadWrite, OpRestoreTo: needsWrite,

	OpGetFile: needsRead, OpListFiles: needsRead, OpReadContent: needsRead, OpListVersions: needsRead, OpGetVersion: needsRead,
	OpListLinks: needsRead, OpGetUpload: needsRead, OpListUploads: needsRead, OpGetBatch: needsRead, OpListBatches: needsRead,
	OpGetOperation: needsRead, OpListEvents: needsRead, OpGetRun: needsRead, OpRunArchive: needsRead,
	OpListCheckpoints: needsRead, OpGetCheckpoint: needsRead, OpDiff: needsRead,
}

// ScopesFor returns the scopes op needs; ok is false for an operation the
// table does not know, which no caller may run.
func ScopesFor(op string) (scopes []string, ok bool) {
	s, ok := operationScopes[op]
	return slices.Clone(s), ok
}

// Operations lists every operation the table knows, sorted, for the tests
// that hold each door to it.
func Operations() []string {
	var ops []string
	for op := range operationScopes {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	return ops
}

// ForbiddenError says the caller's token lacks Scope, which Op needs:
// 403 FORBIDDEN, refused before anything ran or was claimed.
type ForbiddenError struct {
	Op    string
	Scope string
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("the token lacks the %s scope, which %s needs", e.Scope, e.Op)
}

// Principal is the authenticated caller of a request: the subject that owns
// every resource it creates, and what its token may do.
type Principal struct {
	Subject string
	Scopes  []string
	// TokenID names the token itself (tok_…): what a recorded secret is
	// bound to, so that only the token that made a request sees it again.
	TokenID string
}

// Can reports whether the principal's token carries scope.
func (p Principal) Can(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Can reports whether the caller's token carries scope.
func (who Caller) Can(scope string) bool { return slices.Contains(who.Scopes, scope) }

// Allow says whether who may run op: nil, or a *ForbiddenError naming the
// first scope op needs that who's token lacks. An operation the table does
// not know is refused.
func (who Caller) Allow(op string) error {
	need, ok := operationScopes[op]
	if !ok {
		return fmt.Errorf("agentfs: operation %q is not in the scope table", op)
	}
	for _, s := range need {
		if !who.Can(s) {
			return &ForbiddenError{Op: op, Scope: s}
		}
	}
	return nil
}
