package problem_test

import (
	"testing"

	"github.com/agentfs/agentfs/problem"
)

// TestRecorded holds the catalog to the idempotency rules' table: what a keyed write
// keeps under its key and what releases it.
func TestRecorded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want bool
	}{
		{problem.NotFound, true}, {problem.PathExists, true},
		{problem.PreconditionFailed, true}, {problem.ContentBlocked, true},
		{problem.SizeMismatch, true}, {problem.PartsMissing, true},
		{problem.UploadCompleted, true}, {problem.UploadAborted, true}, {problem.UploadExpired, true},
		{problem.ChecksumMismatch, false}, {problem.RequestTimeout, false},
		{problem.RateLimited, false}, {problem.QuotaExceeded, false}, {problem.Internal, false},
		{problem.StorageUnavailable, false}, {problem.PayloadTooLarge, false},
		{problem.OperationInProgress, false}, {problem.ValidationFailed, false}, {problem.InvalidRequest, false},
	} {
		if got := problem.Recorded(problem.New(tc.code, "")); got != tc.want {
			t.Errorf("%s: recorded %v, want %v", tc.code, got, tc.want)
		}
	}
}
