package agentfs_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/agentfs/agentfs"
)

// TestBodyError holds the classes of a failed body read: those with a
// meaning of their own keep it, the rest are an unreadable body.
func TestBodyError(t *testing.T) {
	t.Parallel()
	quota := &agentfs.QuotaExceededError{Used: 10, Limit: 10}
	for _, tc := range []struct {
		name string
		err  error
		is   error // what errors.Is must still find
		bad  bool  // classified as ErrBadBody
	}{
		{"KeepsTooLarge", agentfs.ErrTooLarge, agentfs.ErrTooLarge, false},
		{"KeepsStalled", fmt.Errorf("read: %w", agentfs.ErrBodyStalled), agentfs.ErrBodyStalled, false},
		{"KeepsUnavailable", fmt.Errorf("reserve quota: %w", agentfs.ErrUnavailable), agentfs.ErrUnavailable, false},
		{"KeepsQuotaExceeded", fmt.Errorf("read: %w", quota), quota, false},
		{"KeepsMaxBytes", &http.MaxBytesError{Limit: 1}, nil, false},
		{"ClassifiesOthers", io.ErrUnexpectedEOF, io.ErrUnexpectedEOF, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := agentfs.BodyError(tc.err)
			if errors.Is(got, agentfs.ErrBadBody) != tc.bad {
				t.Fatalf("BodyError(%v) = %v; ErrBadBody %v, want %v", tc.err, got, !tc.bad, tc.bad)
			}
			if tc.is != nil && !errors.Is(got, tc.is) {
				t.Fatalf("BodyError(%v) = %v lost %v", tc.err, got, tc.is)
			}
		})
	}
	if agentfs.BodyError(nil) != nil {
		t.Fatal("BodyError(nil) is not nil")
	}
}
