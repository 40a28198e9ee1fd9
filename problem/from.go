package problem

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
)

// From translates any error a handler returned into the problem to answer
// with. Errors it does not know become a generic INTERNAL problem; the
// second result says so, so the caller can log the cause.
func From(err error) (p *Problem, unexpected bool) {
	for _, t := range translations {
		if p, ok := t(err); ok {
			return p, false
		}
	}
	var he *echo.HTTPError
	switch {
	case errors.Is(err, agentfs.ErrUnavailable):
		return New(StorageUnavailable, "storage is unavailable, retry later"), true
	case errors.As(err, &he):
		return fromHTTPError(he), he.Code >= 500
	case errors.Is(err, context.Canceled):
		return New(RequestTimeout, "the request was cancelled before it completed"), false
	}
	return New(Internal, "an internal error occurred"), true
}

// translation turns one kind of domain error into its problem; ok is false
// when err is not of that kind.
type translation func(err error) (p *Problem, ok bool)

// translations are the domain errors a client is answered about, the first
// that err matches winning (a *Problem is answered as it is).
var translations = []translation{
	as(func(p *Problem) *Problem { return p }),
	as(forbidden),
	as(func(e *agentfs.OutsideGrantError) *Problem {
		return New(Forbidden, fmt.Sprintf("the token may write only in %s; %q is outside them; nothing was done",
			strings.Join(e.Prefixes, ", "), e.Path))
	}),
	as(func(e *agentfs.PinnedError) *Problem {
		return New(Forbidden, e.Error()+"; leave the header out or send the pinned value; nothing was done")
	}),
	as(func(e *agentfs.GrantSpentError) *Problem {
		return New(Forbidden, e.Error()+"; its max_bytes is spent for good, so this write was refused and nothing of it stored")
	}),
	as(func(e *agentfs.ExceedsParentError) *Problem {
		return New(Forbidden, "a token cannot exceed the token that makes it: "+e.Error()+"; no token was made")
	}),
	as(func(e *agentfs.InvalidGrantError) *Problem { return Validation(e.Field, e.Reason) }),
	is(agentfs.ErrTokenRevoked, fixed(Unauthenticated, "the token is revoked or expired")),
	as(changedSinceRun),
	as(func(e *agentfs.CheckpointExistsError) *Problem { return New(CheckpointExists, e.Error()) }),
	as(mergeConflict),
	as(func(e *agentfs.PointError) *Problem { return Validation(e.Field, e.Reason) }),
	is(agentfs.ErrCursorExpired, fixed(CursorExpired, "the point is older than the event retention and is not a checkpoint")),
	as(idempotencyConflict),
	as(inProgress),
	as(pathExists),
	as(func(e *agentfs.BlockedError) *Problem { return New(ContentBlocked, "file is blocked: "+e.Reason) }),
	is(agentfs.ErrBlocked, fixed(ContentBlocked, "file is blocked")),
	as(func(*http.MaxBytesError) *Problem { return New(PayloadTooLarge, "the body exceeds the upload limit") }),
	is(agentfs.ErrTooLarge, fixed(PayloadTooLarge, "the body exceeds the upload limit")),
	as(func(e *agentfs.UploadStateError) *Problem { return uploadState(e.Status) }),
	as(uploadBusy),
	as(partAssembled),
	as(partsMissing),
	is(agentfs.ErrSizeMismatch, func(err error) *Problem {
		return New(SizeMismatch, "the body's size is not the size required: "+err.Error())
	}),
	is(agentfs.ErrPartOutOfRange, func(err error) *Problem { return Validation("part_number", err.Error()) }),
	is(agentfs.ErrUploadCompleting, uploadCompleting),
	is(agentfs.ErrIfMatchWithoutReplace, func(error) *Problem {
		return Validation("If-Match", "asks for a conditional replace; send if_exists=replace with it")
	}),
	as(quotaExceeded),
	as(tooManyUploads),
	is(agentfs.ErrBadBody, fixed(InvalidRequest, "the request body could not be read")),
	is(agentfs.ErrBodyStalled, fixed(RequestTimeout, "the request body stalled longer than the idle limit; nothing was stored")),
	as(func(e *agentfs.SearchFieldError) *Problem { return Validation(e.Field, e.Reason) }),
	is(agentfs.ErrSearchTooBroad, fixed(SearchTooBroad, "the search could not finish within the search timeout; "+
		"narrow it with a longer literal in the pattern, a prefix, a glob or a run_id")),
	is(agentfs.ErrInvalidSearchCursor, fixed(InvalidRequest, "cursor is not one this server issued for this search; start again without it")),
	is(agentfs.ErrNotFound, fixed(NotFound, "no such resource")),
	is(agentfs.ErrPreconditionFailed, fixed(PreconditionFailed, "the precondition did not hold")),
	is(agentfs.ErrChecksumMismatch, fixed(ChecksumMismatch, "the content does not match Content-Digest; nothing was stored")),
}

// as translates the errors of type E found in err's chain with answer.
func as[E error](answer func(E) *Problem) translation {
	return func(err error) (*Problem, bool) {
		var e E
		if !errors.As(err, &e) {
			return nil, false
		}
		return answer(e), true
	}
}

// is translates err when its chain holds target, with answer.
func is(target error, answer func(err error) *Problem) translation {
	return func(err error) (*Problem, bool) {
		if !errors.Is(err, target) {
			return nil, false
		}
		return answer(err), true
	}
}

// fixed answers an error with the same problem whatever it says.
func fixed(code, detail string) func(error) *Problem {
	return func(error) *Problem { return New(code, detail) }
}

// retryAfter is the Retry-After of a wait, in whole seconds, at least one.
func retryAfter(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

func changedSinceRun(e *agentfs.ChangedSinceRunError) *Problem {
	return New(ChangedSinceRun, "another run changed "+e.FileID+" after run "+strconv.Quote(e.RunID)+
		" last did; revert with force to undo anyway")
}

func idempotencyConflict(e *agentfs.ConflictError) *Problem {
	return New(IdempotencyConflict, "Idempotency-Key "+strconv.Quote(e.Key)+
		" was used for a different request; use a new key for a new request")
}

// mergeConflict lists every conflict, so the caller can choose a side.
func mergeConflict(e *agentfs.MergeConflictError) *Problem {
	p := New(MergeConflict, e.Error())
	p.Conflicts = MergeConflicts(e.Conflicts)
	return p
}

// MergeConflicts shows the conflicts of a merge (never nil), in a
// MERGE_CONFLICT problem and in a merge's answer alike.
func MergeConflicts(cs []agentfs.MergeConflict) []api.MergeConflict {
	side := func(s *agentfs.FileSide) *api.MergeSide {
		if s == nil {
			return nil
		}
		return &api.MergeSide{FileID: s.FileID, Version: int64(s.Version), SHA256: s.SHA256}
	}
	out := make([]api.MergeConflict, 0, len(cs))
	for _, c := range cs {
		var won *string
		if c.Won != "" {
			won = &c.Won
		}
		out = append(out, api.MergeConflict{Path: c.Path, Base: side(c.Base), Fork: side(c.Fork), Target: side(c.Target),
			Resolution: won})
	}
	return out
}

// pathExists names the file that holds the path, so the caller can
// decide to replace it.
func pathExists(e *agentfs.PathExistsError) *Problem {
	p := New(PathExists, "a live file already holds path "+strconv.Quote(e.Path))
	p.ExistingFileID = e.ExistingFileID
	return p
}

// maxInProgressWait caps the Retry-After of OPERATION_IN_PROGRESS: the
// first request may finish any moment, well before its lease would lapse.
const maxInProgressWait = 5 * time.Second

func inProgress(e *agentfs.InProgressError) *Problem {
	p := New(OperationInProgress, "a request with this Idempotency-Key is still running; retry the same key later")
	p.RetryAfter = max(1, int(min(e.RetryAfter, maxInProgressWait).Seconds()))
	return p.WithHeader("Link", "</v1/operations/"+url.PathEscape(e.Key)+`>; rel="monitor"`)
}

// uploadBusy is the answer to a request that found its upload session held
// by another: nothing was done, and the same request may be sent again.
func uploadBusy(e *agentfs.UploadBusyError) *Problem {
	p := New(OperationInProgress, e.Reason+"; nothing was done, send the same request again after Retry-After seconds")
	p.RetryAfter = retryAfter(e.RetryAfter)
	return p
}

func uploadCompleting(error) *Problem {
	p := New(OperationInProgress, "another request is completing this upload; retry shortly")
	p.RetryAfter = 1
	return p
}

// partAssembled refuses other bytes for a part that a complete that did
// not finish has already assembled.
func partAssembled(e *agentfs.PartAssembledError) *Problem {
	return Validation("body", fmt.Sprintf("part %d of this upload was already assembled, by a complete that did not finish, "+
		"from other bytes than these; the upload takes that part again only with the same bytes. Complete the upload, "+
		"or abort it and start a new one", e.Number))
}

// partsMissing lists the parts a complete lacks, so the caller sends just
// those.
func partsMissing(e *agentfs.PartsMissingError) *Problem {
	p := New(PartsMissing, "the upload lacks parts; send them, then complete again")
	p.MissingParts = e.Missing
	return p
}

// forbidden is the answer to a caller whose token lacks a scope the
// operation needs: it says which, so the caller knows what token to ask
// for.
func forbidden(e *agentfs.ForbiddenError) *Problem {
	p := New(Forbidden, "the token lacks the "+e.Scope+" scope, which this request needs; nothing was done")
	p.MissingScope = e.Scope
	return p
}

func quotaExceeded(e *agentfs.QuotaExceededError) *Problem {
	p := New(QuotaExceeded, fmt.Sprintf("this subject may write %d bytes per %v and has %d left in this window; nothing of this request was stored",
		e.Limit, e.Window, max(0, e.Limit-e.Used)))
	p.RetryAfter = retryAfter(e.RetryAfter)
	return p
}

// tooManyUploads is the quota on open upload sessions: it says how to
// free one.
func tooManyUploads(e *agentfs.TooManyUploadsError) *Problem {
	p := New(QuotaExceeded, fmt.Sprintf("this subject has %d upload sessions open, the most it may; complete or abort one "+
		"(GET /v1/uploads lists them), or wait for one to expire; no session was made", e.Limit))
	p.RetryAfter = retryAfter(e.RetryAfter)
	return p
}

func uploadState(status string) *Problem {
	switch status {
	case agentfs.UploadCompleted:
		return New(UploadCompleted, "the upload session is completed; it takes no more parts")
	case agentfs.UploadExpired:
		return New(UploadExpired, "the upload session expired; start a new one")
	}
	return New(UploadAborted, "the upload session is "+status+"; start a new one")
}

// httpErrors are the problems of the errors Echo itself answers (no
// route, a body over its limit, ...), by their status.
var httpErrors = map[int]struct{ code, detail string }{
	http.StatusNotFound:              {NotFound, "no such route"},
	http.StatusMethodNotAllowed:      {MethodNotAllowed, "this route does not take this method"},
	http.StatusRequestEntityTooLarge: {PayloadTooLarge, "the body exceeds the limit"},
	http.StatusUnsupportedMediaType:  {UnsupportedMediaType, "unsupported Content-Type"},
	http.StatusBadRequest:            {InvalidRequest, "the request could not be parsed"},
	http.StatusUnauthorized:          {Unauthenticated, "missing or invalid bearer token"},
	http.StatusServiceUnavailable:    {StorageUnavailable, "service unavailable"},
	http.StatusRequestTimeout:        {RequestTimeout, "the request timed out"},
	http.StatusForbidden:             {Forbidden, "not allowed"},
	http.StatusLengthRequired:        {LengthRequired, "Content-Length is required"},
	http.StatusTooManyRequests:       {RateLimited, "too many requests"},
}

func fromHTTPError(he *echo.HTTPError) *Problem {
	if p, ok := httpErrors[he.Code]; ok {
		return New(p.code, p.detail)
	}
	return New(Internal, "an internal error occurred")
}
