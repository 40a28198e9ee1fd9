package render

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
)

// Recovery shows what a run left behind with the next safe request for
// each thing it left open (DESIGN §25). NextActions are, in order: the
// polls of keys still running, the missing parts and the complete of each
// open upload session, the keys whose claims were abandoned (sent again
// oldest first, each with its key), and the waits on open batches.
// Completed keys need nothing.
func Recovery(r *agentfs.Recovery) api.RunRecovery {
	out := api.RunRecovery{Object: "run_recovery", RunID: r.RunID, AsOf: r.AsOf.String(),
		Confirmed:   api.RecoveryConfirmed{Events: r.Events, LiveFiles: r.Summary.LiveFiles, Counts: Run(&r.Summary).Counts},
		Operations:  make([]api.RecoveryOp, 0, len(r.Operations)),
		InFlight:    api.RecoveryInFlight{Uploads: []api.RecoveryUpload{}, Batches: []api.RecoveryBatch{}},
		NextActions: []api.Next{}, PredatesRunRecord: r.PredatesRunRecord, HasMore: r.Next != nil}
	if r.LastEvent != nil {
		s := r.LastEvent.String()
		out.Confirmed.LastEventCursor = &s
	}
	if r.Next != nil {
		s := r.Next.String()
		out.NextCursor = &s
	}
	var resend []api.Next
	for _, o := range r.Operations {
		op := recoveryOp(r.RunID, o)
		out.Operations = append(out.Operations, op)
		switch o.Status {
		case agentfs.KeyInProgress:
			out.NextActions = append(out.NextActions, op.Next)
		case agentfs.KeyAbandoned:
			resend = append(resend, op.Next)
		}
	}
	for _, u := range r.Uploads {
		ru, steps := recoveryUpload(u)
		out.InFlight.Uploads = append(out.InFlight.Uploads, ru)
		out.NextActions = append(out.NextActions, steps...)
	}
	slices.Reverse(resend) // the operations are newest first
	out.NextActions = append(out.NextActions, resend...)
	for _, b := range r.Batches {
		rb := recoveryBatch(b)
		out.InFlight.Batches = append(out.InFlight.Batches, rb)
		out.NextActions = append(out.NextActions, rb.Next)
	}
	return out
}

func recoveryOp(runID string, o agentfs.KeyOperation) api.RecoveryOp {
	op := api.RecoveryOp{IdempotencyKey: o.Key, Method: o.Method, Route: o.Route, Status: o.Status, At: o.At}
	poll := "/v1/operations/" + url.PathEscape(o.Key)
	switch o.Status {
	case agentfs.KeyCompleted:
		status := o.ResponseStatus
		op.ResponseStatus = &status
		what := fmt.Sprintf("answered %d", status)
		if o.ResourceID != "" {
			op.Resource = &api.OperationResource{Object: o.ResourceObject, ID: o.ResourceID}
			what += " (" + o.ResourceID + ")"
		}
		op.Next = api.Next{Text: fmt.Sprintf("nothing to redo: %s completed, %s; GET %s reads the recorded answer", o.Key, what, poll),
			Method: http.MethodGet, Path: poll}
	case agentfs.KeyInProgress:
		secs := int(o.RetryAfter.Seconds())
		op.Next = api.Next{Text: fmt.Sprintf("wait: %s is still running; GET %s after %d s says how it ended", o.Key, poll, secs),
			Method: http.MethodGet, Path: poll, AfterSeconds: secs}
	default:
		path := resendPath(o)
		op.Next = api.Next{Text: fmt.Sprintf("send %s %s again with Idempotency-Key %s, X-Run-ID %s and the same body: its first attempt died before anything was recorded, so nothing happened",
			o.Method, path, o.Key, runID), Method: o.Method, Path: path, IdempotencyKey: o.Key}
	}
	return op
}

// resendPath is the request to send again for an abandoned key: the one
// recorded, else a put's route with its path, else the route template.
func resendPath(o agentfs.KeyOperation) string {
	switch {
	case o.RequestURI != "":
		return o.RequestURI
	case o.Method == http.MethodPost && o.Route == "/v1/files" && len(o.Paths) == 1:
		return "/v1/files?path=" + url.QueryEscape(o.Paths[0])
	}
	return o.Route
}

// recoveryUpload shows an open session and the steps that finish it:
// each missing part, then the complete (a session being completed is
// waited on).
func recoveryUpload(u *agentfs.Upload) (api.RecoveryUpload, []api.Next) {
	ru := api.RecoveryUpload{ID: u.ID, Path: u.Path, Status: u.Status, PartCount: u.PartCount,
		SizeBytes: u.SizeBytes, IfExists: "error", PartsReceived: []int{}, MissingParts: []int{}}
	if u.Replace {
		ru.IfExists = "replace"
	}
	have := map[int]bool{}
	for _, p := range u.Parts {
		have[p.Number] = true
		ru.PartsReceived = append(ru.PartsReceived, p.Number)
	}
	for n := 1; n <= u.PartCount; n++ {
		if !have[n] {
			ru.MissingParts = append(ru.MissingParts, n)
		}
	}
	base := "/v1/uploads/" + u.ID
	complete := api.Next{Method: http.MethodPost, Path: base + "/complete"}
	if u.Status == agentfs.UploadCompleting {
		ru.Next = api.Next{Text: "wait: " + u.ID + " is being completed; GET " + base + " after 2 s shows how it ended",
			Method: http.MethodGet, Path: base, AfterSeconds: 2}
		return ru, []api.Next{ru.Next}
	}
	if len(ru.MissingParts) == 0 {
		complete.Text = "complete " + u.ID + ": all " + strconv.Itoa(u.PartCount) + " parts are in; POST " + complete.Path
		ru.Next = complete
		return ru, []api.Next{complete}
	}
	complete.Text = "complete " + u.ID + " (" + u.Path + ") once its parts are in: POST " + complete.Path
	steps := make([]api.Next, 0, len(ru.MissingParts)+1)
	for _, n := range ru.MissingParts {
		part := base + "/parts/" + strconv.Itoa(n)
		steps = append(steps, api.Next{Text: fmt.Sprintf("PUT part %d of %s (%s): its bytes %d to %d", n, u.ID, u.Path,
			int64(n-1)*u.PartSize, min(int64(n)*u.PartSize, u.SizeBytes)-1), Method: http.MethodPut, Path: part})
	}
	ru.Next = steps[0]
	ru.Next.Text = fmt.Sprintf("PUT parts %s of %s (%s), then POST %s", partRanges(ru.MissingParts), u.ID, u.Path, complete.Path)
	return ru, append(steps, complete)
}

// partRanges spells part numbers as ranges: "2, 5–7".
func partRanges(ns []int) string {
	var out []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j == i {
			out = append(out, strconv.Itoa(ns[i]))
		} else {
			out = append(out, strconv.Itoa(ns[i])+"–"+strconv.Itoa(ns[j]))
		}
		i = j + 1
	}
	return strings.Join(out, ", ")
}

func recoveryBatch(b *agentfs.Batch) api.RecoveryBatch {
	n := b.Counts()
	rb := api.RecoveryBatch{ID: b.ID, Status: b.Status,
		Counts: api.BatchCounts{Total: n.Total, Succeeded: n.Succeeded, Failed: n.Failed, Pending: n.Pending, Canceled: n.Canceled}}
	wait := "/v1/batch/" + b.ID + "?wait=30"
	rb.Next = api.Next{Text: fmt.Sprintf("wait: %s is %s with %d of %d items left and resumes by itself; GET %s until it ends",
		b.ID, b.Status, n.Pending, n.Total, wait), Method: http.MethodGet, Path: wait}
	return rb
}
