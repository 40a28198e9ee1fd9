package render

import (
	"fmt"
	"strings"

	"github.com/agentfs/agentfs/api"
)

// RecoveryText is a run's recovery as text for a person or a model: what
// is confirmed, what each key and open session or batch is, and the next
// actions numbered in order, each with its exact request. The CLI prints
// it and the MCP tool run_recovery answers it.
func RecoveryText(r api.RunRecovery) string {
	var b strings.Builder
	c := r.Confirmed
	fmt.Fprintf(&b, "Run %s, as of event cursor %s.\n", r.RunID, r.AsOf)
	fmt.Fprintf(&b, "Confirmed: %d events (%d created, %d replaced, %d deleted, %d restored, %d moved, %d reverted); %d live files.\n",
		c.Events, c.Counts.Created, c.Counts.Replaced, c.Counts.Deleted, c.Counts.Restored, c.Counts.Moved, c.Counts.Reverted, c.LiveFiles)
	if len(r.Operations) > 0 {
		b.WriteString("Keys of the run, newest first:\n")
	}
	for _, o := range r.Operations {
		fmt.Fprintf(&b, "- %s %s: %s %s. %s\n", o.IdempotencyKey, o.Status, o.Method, o.Route, sentence(o.Next.Text))
	}
	for _, u := range r.InFlight.Uploads {
		missing := "none missing"
		if len(u.MissingParts) > 0 {
			missing = "missing " + partRanges(u.MissingParts)
		}
		fmt.Fprintf(&b, "- upload %s (%s) %s: %d of %d parts received, %s. %s\n", u.ID, u.Path, u.Status,
			len(u.PartsReceived), u.PartCount, missing, sentence(u.Next.Text))
	}
	for _, bt := range r.InFlight.Batches {
		fmt.Fprintf(&b, "- batch %s %s: %d of %d items done. %s\n", bt.ID, bt.Status,
			bt.Counts.Total-bt.Counts.Pending, bt.Counts.Total, sentence(bt.Next.Text))
	}
	if len(r.NextActions) == 0 {
		b.WriteString("Next actions: none; nothing of this run is left to redo or wait for.\n")
	}
	if len(r.NextActions) > 0 {
		b.WriteString("Next actions, in order:\n")
	}
	for i, n := range r.NextActions {
		fmt.Fprintf(&b, "%d. %s %s", i+1, n.Method, n.Path)
		if n.IdempotencyKey != "" {
			fmt.Fprintf(&b, " with Idempotency-Key %s", n.IdempotencyKey)
		}
		if n.AfterSeconds > 0 {
			fmt.Fprintf(&b, " after %d s", n.AfterSeconds)
		}
		fmt.Fprintf(&b, ": %s\n", sentence(n.Text))
	}
	if r.NextCursor != nil {
		fmt.Fprintf(&b, "More keys of the run follow: ask again with cursor %s.\n", *r.NextCursor)
	}
	if r.PredatesRunRecord > 0 {
		fmt.Fprintf(&b, "%d kept keys were claimed before the server recorded runs on keys; any may be this run's and none is listed.\n", r.PredatesRunRecord)
	}
	return b.String()
}

// sentence is s ending with a full stop.
func sentence(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}
