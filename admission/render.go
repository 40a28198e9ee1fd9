package admission

import (
	"encoding/json"
	"net/http"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/render"
)

// What every effect shares: the admission it names and the content known
// up front, and the responses the core renders and records.

// named is an effect's admission, embedded in the effect.
type named struct{ adm admission }

func (n named) admission() admission { return n.adm }

// fixed is content known before the write runs: the canonical hash of a
// JSON body, or none.
type fixed struct {
	sum []byte
	err error
}

func (f fixed) content() ([]byte, error) { return f.sum, f.err }

// jsonContent is the content fingerprint of a JSON request, from its
// values with defaults filled in (canonical: key order does not matter).
func jsonContent(v map[string]any) fixed {
	normal, _ := json.Marshal(v)
	sum, err := idempotency.JSONContentHash(normal)
	return fixed{sum: sum, err: err}
}

// fileOutcome is the response to a write that left f: 201 with Location for
// a new file, else 200. A put recorded by any door replays as this.
func (c *Core) fileOutcome(f *agentfs.File, created bool) idempotency.Outcome {
	out := outcome(http.StatusOK, render.File(c.cfg.PublicURL, f), "file", f.ID)
	out.Header["ETag"] = f.ETag()
	if created {
		out.Status = http.StatusCreated
		out.Header["Location"] = "/v1/files/" + f.ID
	}
	return out
}

// changedFile is the response to a change of one file (200 with the file),
// from what a storage helper answered.
func (c *Core) changedFile(f *agentfs.File, _ bool, err error) (idempotency.Outcome, error) {
	if err != nil {
		return idempotency.Outcome{}, err
	}
	return c.fileOutcome(f, false), nil
}

// uploadOutcome shows a session: 201 with Location when it was just
// created, else 200.
func (c *Core) uploadOutcome(u *agentfs.Upload, f *agentfs.File, created bool, requestID string) idempotency.Outcome {
	out := outcome(http.StatusOK, render.Upload(c.cfg.PublicURL, u, f, requestID, c.cfg.Now()), "upload", u.ID)
	if created {
		out.Status = http.StatusCreated
		out.Header["Location"] = "/v1/uploads/" + u.ID
	}
	return out
}

// batchOutcome shows a batch: 202 with Location when just admitted.
func (c *Core) batchOutcome(b *agentfs.Batch, files map[string]*agentfs.File, status int) idempotency.Outcome {
	out := outcome(status, render.Batch(c.cfg.PublicURL, b, files), "batch", b.ID)
	if status == http.StatusAccepted {
		out.Header["Location"] = "/v1/batch/" + b.ID
	}
	return out
}

// outcome is a JSON response naming the resource it shows.
func outcome(status int, body any, object, id string) idempotency.Outcome {
	b, _ := json.Marshal(body)
	return idempotency.Outcome{Status: status, Header: map[string]string{}, Body: append(b, '\n'),
		Resource: idempotency.Resource{Object: object, ID: id}}
}

// PublicURL is the base of the URLs the core's answers carry.
func (c *Core) PublicURL() string { return c.cfg.PublicURL }
