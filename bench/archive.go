package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// archive: a run of -archive-files files totalling -archive-size, then
// GET /v1/runs/{run}/archive?format=zip streamed to the end while the
// server's RSS is sampled; the budget is the RSS growth above idle.
func (b *bench) archive(ctx context.Context) ([]row, error) {
	c := b.cfg
	label := fmtSize(c.archiveSize)
	name := fmt.Sprintf("server RSS growth, %s run archive (zip, %d files)", label, c.archiveFiles)
	if c.serverPID <= 0 {
		return []row{{name: name, agentfs: "skipped: no -server-pid", budget: "≤ +64 MiB"}}, nil
	}
	run := "bench-" + b.tag + "-archive"
	hdr := http.Header{"Content-Type": {"application/octet-stream"}, "X-Run-Id": {run}}
	each := c.archiveSize / int64(c.archiveFiles)
	var ids []string
	defer func() {
		for _, id := range ids {
			_ = b.api.deleteFile(context.WithoutCancel(ctx), id)
		}
	}()
	for i := range c.archiveFiles {
		size := each
		if i == c.archiveFiles-1 {
			size = c.archiveSize - each*int64(c.archiveFiles-1)
		}
		f, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("archive/%03d.bin", i)), b.data.reader(int64(i)*each, size), size, hdr)
		if err != nil {
			return nil, err
		}
		ids = append(ids, f.ID)
	}
	if err := b.warmUp(ctx); err != nil {
		return nil, err
	}

	path := "/v1/runs/" + url.PathEscape(run) + "/archive?format=zip"
	var got int64
	var tail []byte
	buf := make([]byte, readBufferSize)
	r, d, err := b.rssMeasure(name, func() error {
		resp, err := b.api.request(ctx, http.MethodGet, path, nil, 0, nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
			return &statusError{method: http.MethodGet, path: path, status: resp.StatusCode, body: string(bytes.TrimSpace(msg))}
		}
		t := &tailWriter{keep: 64}
		got, err = io.CopyBuffer(t, resp.Body, buf)
		tail = t.buf
		return err
	})
	var se *statusError
	if errors.As(err, &se) && (se.status == http.StatusNotFound || se.status == http.StatusMethodNotAllowed) {
		return []row{{name: name, agentfs: fmt.Sprintf("not served yet (GET %s: %d)", path, se.status), budget: "≤ +64 MiB"}}, nil
	}
	if err != nil {
		return nil, err
	}
	if got < c.archiveSize {
		return nil, fmt.Errorf("run archive: %d bytes, less than the run's %d", got, c.archiveSize)
	}
	entries, err := zipEntries(tail)
	if err != nil {
		return nil, fmt.Errorf("run archive: %w", err)
	}
	if entries != c.archiveFiles {
		return nil, fmt.Errorf("run archive: %d entries, want %d", entries, c.archiveFiles)
	}
	rate := mibps(got, d)
	logf("  run archive of %d files, %s: %s of zip in %s, %.0f MiB/s", c.archiveFiles, label, fmtSize(got), d.Round(1e6), rate)
	r.agentfs += fmt.Sprintf("; %.0f MiB/s", rate)
	b.notes = append(b.notes, fmt.Sprintf("run archive: %d files of %s in one run, streamed as zip (%d bytes, %d entries) at %.0f MiB/s, read into %s buffers.",
		c.archiveFiles, fmtSize(each), got, entries, rate, fmtSize(readBufferSize)))
	return []row{r}, nil
}

// tailWriter discards what it is given but keeps the last keep bytes.
type tailWriter struct {
	keep int
	buf  []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	if len(p) >= t.keep {
		t.buf = append(t.buf[:0], p[len(p)-t.keep:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.keep; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// zipEntries reads the entry count from the end-of-central-directory
// record that ends a zip without a comment (as Go's archive/zip writes
// it), or from the zip64 record before it when that count overflowed.
func zipEntries(tail []byte) (int, error) {
	const eocd = 22
	if len(tail) < eocd {
		return 0, errors.New("shorter than an end-of-central-directory record")
	}
	rec := tail[len(tail)-eocd:]
	if !bytes.Equal(rec[:4], []byte("PK\x05\x06")) {
		return 0, errors.New("does not end with a zip end-of-central-directory record")
	}
	n := int(binary.LittleEndian.Uint16(rec[10:12]))
	if n == 0xffff {
		return 0, errors.New("zip64 entry count: not read by the bench")
	}
	return n, nil
}
