package agentfs

import (
	"fmt"
	"slices"
)

// Scopes a token may carry.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	// ScopeShare makes share links (with read), which serve a file's bytes
	// to anyone who holds one.
	ScopeShare = "share"
	// ScopeDelegate makes child tokens (POST /v1/tokens), each within the
	// grant of the token that makes it.
	ScopeDelegate = "delegate"
)

// AllScopes lists every scope, sorted.
var AllScopes = []string{ScopeDelegate, ScopeRead, ScopeShare, ScopeWrite}

// RootScopes is what the scopes stored with a root token (one the
// operator made, with no parent) let it do. Making a share link needed
// read and write before share was a scope of its own, so a root token with
// both may share: tokens made before keep exactly what they could do, and
// so does the old spelling of agentfs token create --scopes read,write.
func RootScopes(stored []string) []string {
	out := slices.Clone(stored)
	if slices.Contains(out, ScopeRead) && slices.Contains(out, ScopeWrite) && !slices.Contains(out, ScopeShare) {
		out = append(out, ScopeShare)
		slices.Sort(out)
	}
	return out
}

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
	OpCreateToken    = "create_token"
	OpRevokeToken    = "revoke_token"
	// Points in time (DESIGN §18).
	OpCreateCheckpoint = "create_checkpoint"
	OpDeleteCheckpoint = "delete_checkpoint"
	OpRestorePoint     = "restore_point" // POST /v1/restore, its dry run included
	// Webhooks (DESIGN §23).
	OpCreateWebhook       = "create_webhook"
	OpUpdateWebhook       = "update_webhook"
	OpDeleteWebhook       = "delete_webhook"
	OpRotateWebhookSecret = "rotate_webhook_secret"
	OpReplayWebhook       = "replay_webhook"
	// Forks and merges (DESIGN §19).
	OpCreateFork = "create_fork"
	OpMerge      = "merge" // POST /v1/forks/{id}/merge, its dry run included
	OpDeleteFork = "delete_fork"
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
	OpListRuns     = "list_runs"
	OpRunArchive   = "run_archive"
	OpSearch       = "search" // the lines of files' contents that match a pattern
	OpListTokens   = "list_tokens"
	OpGetToken     = "get_token"
	// Points in time (DESIGN §18); as_of reads are the reads they qualify.
	OpListCheckpoints = "list_checkpoints"
	OpGetCheckpoint   = "get_checkpoint"
	OpDiff            = "diff"
	// Webhooks and their delivery logs: what a webhook delivers are reads
	// of its maker's, so making and seeing one needs write and read.
	OpListWebhooks          = "list_webhooks"
	OpGetWebhook            = "get_webhook"
	OpListWebhookDeliveries = "list_webhook_deliveries"
	OpListForks             = "list_forks"
	OpGetFork               = "get_fork"
	// OpRunRecovery is a run's recovery (DESIGN §25).
	OpRunRecovery = "run_recovery"
)

var (
	needsRead      = []string{ScopeRead}
	needsWrite     = []string{ScopeWrite}
	needsReadWrite = []string{ScopeRead, ScopeWrite}
	needsReadShare = []string{ScopeRead, ScopeShare}
	needsDelegate  = []string{ScopeDelegate}
	// needsNothing: what any token may do to itself and its descendants
	// (list them, revoke them), which only ever takes authority away.
	needsNothing = []string{}
)

// operationScopes is the one table from an operation to the scopes a
// caller's token must carry to run it, whichever door asks: the admission
// core checks a write against it before it claims a key (so a refused
// request is answered before anything is claimed, and a replay only to a
// caller that may make the request), the read gate a read before it asks
// the store, and the REST routes check the operation each route runs. A
// share link serves bytes to anyone who has it, so making one needs read
// and share (a root token with read and write has share: RootScopes).
var operationScopes = map[string][]string{
	OpPut: needsWrite, OpDelete: needsWrite, OpRestore: needsWrite, OpCopy: needsWrite, OpUndo: needsWrite,
	OpMove: needsWrite, OpRevert: needsWrite, OpSetExpiry: needsWrite, OpRevokeLink: needsWrite,
	OpCreateUpload: needsWrite, OpPutPart: needsWrite, OpCompleteUpload: needsWrite, OpAbortUpload: needsWrite,
	OpBatch: needsWrite, OpCancelBatch: needsWrite, OpRevertRun: needsWrite,
	OpCreateLink:  needsReadShare,
	OpCreateToken: needsDelegate, OpRevokeToken: needsNothing,
	OpCreateCheckpoint: needsWrite, OpDeleteCheckpoint: needsWrite, OpRestorePoint: needsReadWrite, OpRestoreTo: needsWrite,
	OpCreateWebhook: needsReadWrite, OpUpdateWebhook: needsReadWrite, OpDeleteWebhook: needsReadWrite,
	OpRotateWebhookSecret: needsReadWrite, OpReplayWebhook: needsReadWrite,
	OpCreateFork: needsReadWrite, OpMerge: needsReadWrite, OpDeleteFork: needsWrite,

	OpGetFile: needsRead, OpListFiles: needsRead, OpReadContent: needsRead, OpListVersions: needsRead, OpGetVersion: needsRead,
	OpListLinks: needsRead, OpGetUpload: needsRead, OpListUploads: needsRead, OpGetBatch: needsRead, OpListBatches: needsRead,
	OpGetOperation: needsRead, OpListEvents: needsRead, OpGetRun: needsRead, OpListRuns: needsRead, OpRunArchive: needsRead,
	OpSearch: needsRead, OpListTokens: needsNothing, OpGetToken: needsNothing,
	OpListCheckpoints: needsRead, OpGetCheckpoint: needsRead, OpDiff: needsRead,
	OpListWebhooks: needsReadWrite, OpGetWebhook: needsReadWrite, OpListWebhookDeliveries: needsReadWrite,
	OpListForks: needsRead, OpGetFork: needsRead, OpRunRecovery: needsRead,
}

// readOperations are the operations the read gate serves; every other
// operation of the table is a write the admission core runs.
var readOperations = map[string]bool{
	OpGetFile: true, OpListFiles: true, OpReadContent: true, OpListVersions: true, OpGetVersion: true,
	OpListLinks: true, OpGetUpload: true, OpListUploads: true, OpGetBatch: true, OpListBatches: true,
	OpGetOperation: true, OpListEvents: true, OpGetRun: true, OpListRuns: true, OpRunArchive: true, OpListTokens: true, OpGetToken: true,
	OpSearch: true, OpListCheckpoints: true, OpGetCheckpoint: true, OpDiff: true,
	OpListWebhooks: true, OpGetWebhook: true, OpListWebhookDeliveries: true,
	OpListForks: true, OpGetFork: true, OpRunRecovery: true,
}

// IsRead reports whether op is a read (served by the read gate) rather
// than a write (run by the admission core).
func IsRead(op string) bool { return readOperations[op] }

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
	// Grant is what the token may do: its scopes, prefixes, pins, expiry
	// and byte budget.
	Grant Grant
	// TokenID names the token itself (tok_…): what a recorded secret is
	// bound to, so that only the token that made a request sees it again,
	// and what a delegated token's parent is.
	TokenID string
}

// Can reports whether the principal's token carries scope.
func (p Principal) Can(scope string) bool { return p.Grant.Can(scope) }

// Can reports whether the caller's token carries scope.
func (who Caller) Can(scope string) bool { return who.Grant.Can(scope) }

// Allow says whether who may run op: nil, a *ForbiddenError naming the
// first scope op needs that who's token lacks, or a *PinnedError when the
// request names another run or agent than its token is pinned to. An
// operation the table does not know is refused.
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
	if _, err := who.Grant.Attribute(who.By); err != nil {
		return err
	}
	return nil
}

// Permit checks that who may write path (Grant.Permit).
func (who Caller) Permit(path string) error { return who.Grant.Permit(path) }
