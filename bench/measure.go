package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
)

// rssBudget is DESIGN §11's bound on server memory growth.
const rssBudget = 64 << 20

// memory: the server's RSS, idle and while a large file streams up through
// it and back down.
func (b *bench) memory(ctx context.Context) ([]row, error) {
	c := b.cfg
	label := fmtSize(c.streamSize)
	if c.serverPID <= 0 {
		return []row{{name: "server RSS growth, " + label + " upload", agentfs: "skipped: no -server-pid", budget: "≤ +64 MiB"}}, nil
	}
	// Warm up the connection pools so that they are part of "idle".
	if _, _, err := b.api.putFile(ctx, b.path("warmup"), bytes.NewReader(chunk(0, 4096)), 4096, nil); err != nil {
		return nil, err
	}
	if _, err := b.api.list(ctx, "limit=10"); err != nil {
		return nil, err
	}

	measure := func(what string, transfer func() error) (row, error) {
		idle, err := idleRSS(c.serverPID, 10, 100*time.Millisecond)
		if err != nil {
			return row{}, err
		}
		s := startSampler(c.serverPID, 100*time.Millisecond)
		t0 := time.Now()
		err = transfer()
		d := time.Since(t0)
		peak, n, serr := s.finish()
		if err != nil {
			return row{}, err
		}
		if serr != nil {
			return row{}, serr
		}
		grow := max(0, peak-idle)
		logf("  %s %s: %.0f MiB/s; RSS idle %s, peak %s over %d samples", what, label, mibps(c.streamSize, d), fmtMiB(idle), fmtMiB(peak), n)
		verdict := "meets"
		if grow > rssBudget {
			verdict = "misses"
		}
		return row{
			name:    "server RSS growth, " + label + " " + what,
			agentfs: fmt.Sprintf("+%s (idle %s, peak %s)", fmtMiB(grow), fmtMiB(idle), fmtMiB(peak)),
			budget:  "≤ +64 MiB",
			verdict: verdict,
		}, nil
	}

	var f *file
	up, err := measure("upload", func() (err error) {
		f, _, err = b.api.putFile(ctx, b.path("stream"), newGen(0, c.streamSize), c.streamSize, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 256<<10)
	down, err := measure("download", func() error {
		n, err := b.api.getContent(ctx, f.ID, buf)
		if err == nil && n != c.streamSize {
			err = fmt.Errorf("download of %s: got %d bytes, want %d", f.ID, n, c.streamSize)
		}
		return err
	})
	if err != nil {
		return []row{up}, err
	}
	if err := b.api.deleteFile(ctx, f.ID); err != nil {
		return nil, err
	}
	// Parts sent side by side arrive ahead of the running hash, and the
	// server keeps them in memory until their turn (its hash window).
	multi, err := measure(fmt.Sprintf("upload in parts, %d parallel", c.partWorkers), func() error {
		mf, err := b.uploadInParts(ctx, b.path("stream-parts"), c.streamSize)
		if err == nil {
			err = b.api.deleteFile(ctx, mf.ID)
		}
		return err
	})
	if err != nil {
		return []row{up, down}, err
	}
	return []row{up, down, multi}, nil
}

// uploadInParts sends size bytes through an upload session, c.partWorkers
// parts at a time, and completes it.
func (b *bench) uploadInParts(ctx context.Context, path string, size int64) (*file, error) {
	u, err := b.api.createUpload(ctx, path, size)
	if err != nil {
		return nil, err
	}
	err = inParallel(ctx, b.cfg.partWorkers, u.PartCount, func(ctx context.Context, n int) error {
		off := int64(n-1) * u.PartSize
		l := min(u.PartSize, size-off)
		return b.api.putPart(ctx, u.ID, n, newGen(off, l), l)
	})
	if err != nil {
		b.api.abortUpload(context.WithoutCancel(ctx), u.ID)
		return nil, err
	}
	f, err := b.api.completeUpload(ctx, u.ID)
	if err == nil && f.SizeBytes != size {
		err = fmt.Errorf("multipart file has %d bytes, want %d", f.SizeBytes, size)
	}
	return f, err
}

// upload: one large file, AgentFS POST /v1/files against minio-go
// PutObject, alternating, best of uploadRuns each.
func (b *bench) upload(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.uploadSize
	var agentBest, directBest float64
	var agentCPU, directCPU cpuAcc
	var spareIDs, spareKeys []string
	for i := range c.uploadRuns {
		var ar, dr float64
		agent := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			f, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("upload-%d", i)), newGen(0, size), size, nil)
			if err != nil {
				return err
			}
			ar = mibps(size, time.Since(t0))
			agentCPU.add(c0, b.cpuNow(), gib(size))
			if b.big.fileID == "" {
				b.big.fileID = f.ID
			} else {
				spareIDs = append(spareIDs, f.ID)
			}
			return nil
		}
		direct := func() error {
			key := b.key(fmt.Sprintf("upload-%d", i))
			c0, t0 := b.cpuNow(), time.Now()
			if _, err := b.s3.PutObject(ctx, c.directBucket, key, newGen(0, size), size, putOpts); err != nil {
				return fmt.Errorf("direct PutObject: %w", err)
			}
			dr = mibps(size, time.Since(t0))
			directCPU.add(c0, b.cpuNow(), gib(size))
			if b.big.key == "" {
				b.big.key = key
			} else {
				spareKeys = append(spareKeys, key)
			}
			return nil
		}
		if err := alternate(i, agent, direct); err != nil {
			return nil, err
		}
		logf("  upload %s run %d/%d: AgentFS %.0f MiB/s, direct %.0f MiB/s", fmtSize(size), i+1, c.uploadRuns, ar, dr)
		agentBest, directBest = max(agentBest, ar), max(directBest, dr)
	}
	// For scale: what a client that calls PutObject with minio-go's default
	// options gets (a streaming-signed multipart upload that hashes every
	// chunk). The budget compares against the faster options above.
	key := b.key("upload-defaults")
	t0 := time.Now()
	if _, err := b.s3.PutObject(ctx, c.directBucket, key, newGen(0, size), size,
		minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
		return nil, fmt.Errorf("direct PutObject with default options: %w", err)
	}
	defaults := mibps(size, time.Since(t0))
	spareKeys = append(spareKeys, key)
	b.notes = append(b.notes, fmt.Sprintf("upload %s: the direct column uses the server's own options (one PUT, unsigned payload); "+
		"a direct PutObject with minio-go's default options (streaming-signed multipart) made %.0f MiB/s, so AgentFS ran at %.2f× that.",
		fmtSize(size), defaults, agentBest/defaults))
	for _, id := range spareIDs {
		if err := b.api.deleteFile(ctx, id); err != nil {
			return nil, err
		}
	}
	for _, k := range spareKeys {
		_ = b.s3.RemoveObject(ctx, c.directBucket, k, minio.RemoveObjectOptions{})
	}
	b.cpuNote("upload "+fmtSize(size), "GiB", agentCPU, directCPU)
	return []row{rateRow(fmt.Sprintf("upload %s, best of %d", fmtSize(size), c.uploadRuns),
		agentBest, directBest, "MiB/s", 0.95)}, nil
}

// download: the file upload left, AgentFS GET content against minio-go
// GetObject, both read to the end and discarded.
func (b *bench) download(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.uploadSize
	if b.big.fileID == "" {
		f, _, err := b.api.putFile(ctx, b.path("download"), newGen(0, size), size, nil)
		if err != nil {
			return nil, err
		}
		b.big.fileID = f.ID
	}
	if b.big.key == "" {
		key := b.key("download")
		if _, err := b.s3.PutObject(ctx, c.directBucket, key, newGen(0, size), size, putOpts); err != nil {
			return nil, fmt.Errorf("direct PutObject: %w", err)
		}
		b.big.key = key
	}
	buf := make([]byte, 256<<10)
	var agentBest, directBest float64
	var agentCPU, directCPU cpuAcc
	var ratios []string
	within := 0 // runs at 0.9× or better
	for i := range c.uploadRuns {
		var ar, dr float64
		agent := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			n, err := b.api.getContent(ctx, b.big.fileID, buf)
			if err != nil {
				return err
			}
			if n != size {
				return fmt.Errorf("AgentFS download: %d bytes, want %d", n, size)
			}
			ar = mibps(size, time.Since(t0))
			agentCPU.add(c0, b.cpuNow(), gib(size))
			return nil
		}
		direct := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			obj, err := b.s3.GetObject(ctx, c.directBucket, b.big.key, minio.GetObjectOptions{})
			if err != nil {
				return fmt.Errorf("direct GetObject: %w", err)
			}
			n, err := drain(obj, buf)
			obj.Close()
			if err != nil {
				return fmt.Errorf("direct GetObject: %w", err)
			}
			if n != size {
				return fmt.Errorf("direct download: %d bytes, want %d", n, size)
			}
			dr = mibps(size, time.Since(t0))
			directCPU.add(c0, b.cpuNow(), gib(size))
			return nil
		}
		if err := alternate(i, agent, direct); err != nil {
			return nil, err
		}
		logf("  download %s run %d/%d: AgentFS %.0f MiB/s, direct %.0f MiB/s", fmtSize(size), i+1, c.uploadRuns, ar, dr)
		agentBest, directBest = max(agentBest, ar), max(directBest, dr)
		ratios = append(ratios, fmt.Sprintf("%.2f×", ar/dr))
		if ar >= 0.9*dr {
			within++
		}
	}
	b.notes = append(b.notes, fmt.Sprintf("download %s, each run against the direct run beside it: %s (%d of %d at 0.9× or better; DESIGN asks 4 of 5).",
		fmtSize(size), strings.Join(ratios, ", "), within, c.uploadRuns))
	if err := b.api.deleteFile(ctx, b.big.fileID); err != nil {
		return nil, err
	}
	_ = b.s3.RemoveObject(ctx, c.directBucket, b.big.key, minio.RemoveObjectOptions{})
	b.cpuNote("download "+fmtSize(size), "GiB", agentCPU, directCPU)
	return []row{rateRow(fmt.Sprintf("download %s, best of %d", fmtSize(size), c.uploadRuns),
		agentBest, directBest, "MiB/s", 0.9)}, nil
}

// small: many small uploads from concurrent clients, unique paths.
func (b *bench) small(ctx context.Context) ([]row, error) {
	c := b.cfg
	data := chunk(0, int(c.smallSize))
	label := fmtSize(c.smallSize)

	c0 := b.cpuNow()
	dn, dd, dlat, err := concurrently(ctx, c.smallClients, c.smallDuration, c.smallMax, func(ctx context.Context, i int) error {
		_, err := b.s3.PutObject(ctx, c.directBucket, b.key(fmt.Sprintf("small/%d", i)), bytes.NewReader(data), int64(len(data)), putOpts)
		if err != nil {
			return fmt.Errorf("direct PutObject: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var agentCPU, directCPU cpuAcc
	c1 := b.cpuNow()
	directCPU.add(c0, c1, float64(dn)/1000)
	an, ad, alat, err := concurrently(ctx, c.smallClients, c.smallDuration, c.smallMax, func(ctx context.Context, i int) error {
		_, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("small/%d", i)), bytes.NewReader(data), int64(len(data)), nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	agentCPU.add(c1, b.cpuNow(), float64(an)/1000)
	b.cpuNote(label+" uploads", "1000 uploads", agentCPU, directCPU)
	ar, dr := float64(an)/ad.Seconds(), float64(dn)/dd.Seconds()
	logf("  %s × %d clients: AgentFS %d in %s (p50 %s), direct %d in %s (p50 %s)",
		label, c.smallClients, an, ad.Round(time.Millisecond), fmtMS(percentile(alat, 50)),
		dn, dd.Round(time.Millisecond), fmtMS(percentile(dlat, 50)))
	b.notes = append(b.notes, fmt.Sprintf("%s uploads: %d clients for %s per side; p50 latency AgentFS %s, direct %s.",
		label, c.smallClients, c.smallDuration, fmtMS(percentile(alat, 50)), fmtMS(percentile(dlat, 50))))
	return []row{rateRow(fmt.Sprintf("%s uploads/s, %d clients", label, c.smallClients), ar, dr, "/s", 0.75)}, nil
}

// multipart: an upload session with parallel parts against a direct
// minio-go multipart upload of the same size and part size.
func (b *bench) multipart(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.multipartSize
	var partSize int64
	var partCount int
	var agentBest, directBest float64
	var agentCPU, directCPU cpuAcc
	var completes []string
	for i := range c.multipartRuns {
		var ar, dr float64
		agent := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			u, err := b.api.createUpload(ctx, b.path(fmt.Sprintf("multipart-%d", i)), size)
			if err != nil {
				return err
			}
			partSize, partCount = u.PartSize, u.PartCount
			err = inParallel(ctx, c.partWorkers, u.PartCount, func(ctx context.Context, n int) error {
				off := int64(n-1) * u.PartSize
				l := min(u.PartSize, size-off)
				return b.api.putPart(ctx, u.ID, n, newGen(off, l), l)
			})
			if err != nil {
				b.api.abortUpload(context.WithoutCancel(ctx), u.ID)
				return err
			}
			tc := time.Now()
			f, err := b.api.completeUpload(ctx, u.ID)
			if err != nil {
				return err
			}
			ar = mibps(size, time.Since(t0))
			agentCPU.add(c0, b.cpuNow(), gib(size))
			took := time.Since(tc).Round(10 * time.Millisecond)
			completes = append(completes, took.String())
			logf("  AgentFS multipart: %d parts of %s, complete took %s", u.PartCount, fmtSize(u.PartSize), took)
			if f.SizeBytes != size {
				return fmt.Errorf("multipart file has %d bytes, want %d", f.SizeBytes, size)
			}
			return b.api.deleteFile(ctx, f.ID)
		}
		direct := func() error {
			key := b.key(fmt.Sprintf("multipart-%d", i))
			c0, t0 := b.cpuNow(), time.Now()
			id, err := b.core.NewMultipartUpload(ctx, c.directBucket, key, minio.PutObjectOptions{ContentType: "application/octet-stream"})
			if err != nil {
				return fmt.Errorf("direct NewMultipartUpload: %w", err)
			}
			parts := make([]minio.CompletePart, partCount)
			err = inParallel(ctx, c.partWorkers, partCount, func(ctx context.Context, n int) error {
				off := int64(n-1) * partSize
				l := min(partSize, size-off)
				p, err := b.core.PutObjectPart(ctx, c.directBucket, key, id, n, newGen(off, l), l, minio.PutObjectPartOptions{DisableContentSha256: true})
				if err != nil {
					return fmt.Errorf("direct PutObjectPart %d: %w", n, err)
				}
				parts[n-1] = minio.CompletePart{PartNumber: n, ETag: p.ETag}
				return nil
			})
			if err != nil {
				_ = b.core.AbortMultipartUpload(context.WithoutCancel(ctx), c.directBucket, key, id)
				return err
			}
			if _, err := b.core.CompleteMultipartUpload(ctx, c.directBucket, key, id, parts, minio.PutObjectOptions{}); err != nil {
				return fmt.Errorf("direct CompleteMultipartUpload: %w", err)
			}
			dr = mibps(size, time.Since(t0))
			directCPU.add(c0, b.cpuNow(), gib(size))
			return b.s3.RemoveObject(ctx, c.directBucket, key, minio.RemoveObjectOptions{})
		}
		// The server picks the part size, so AgentFS goes first in the
		// first round.
		if err := alternate(i, agent, direct); err != nil {
			return nil, err
		}
		logf("  multipart %s run %d/%d: AgentFS %.0f MiB/s, direct %.0f MiB/s", fmtSize(size), i+1, c.multipartRuns, ar, dr)
		agentBest, directBest = max(agentBest, ar), max(directBest, dr)
	}
	b.cpuNote("multipart "+fmtSize(size), "GiB", agentCPU, directCPU)
	b.notes = append(b.notes, fmt.Sprintf("multipart %s: AgentFS complete took %s (per run).", fmtSize(size), strings.Join(completes, ", ")))
	return []row{rateRow(fmt.Sprintf("multipart %s, %d × %s parts, %d parallel, best of %d", fmtSize(size), partCount, fmtSize(partSize), c.partWorkers, c.multipartRuns),
		agentBest, directBest, "MiB/s", 0.85)}, nil
}

// replay: keyed 4 KiB uploads, then the same requests again; the replays
// must not add an object to the server's bucket.
func (b *bench) replay(ctx context.Context) ([]row, error) {
	c := b.cfg
	const size = 4096
	n := c.replayN
	req := func(i int) (string, []byte, http.Header) {
		h := http.Header{"Content-Type": {"application/octet-stream"}}
		h.Set("Idempotency-Key", fmt.Sprintf("bench-%s-replay-%d", b.tag, i))
		return b.path(fmt.Sprintf("replay/%d", i)), chunk(int64(i)*size, size), h
	}
	ids := make([]string, n)
	first := make([]time.Duration, n)
	for i := range n {
		p, data, h := req(i)
		t0 := time.Now()
		f, resp, err := b.api.putFile(ctx, p, bytes.NewReader(data), size, h)
		if err != nil {
			return nil, err
		}
		first[i] = time.Since(t0)
		if resp.Header.Get("Idempotent-Replayed") == "true" {
			return nil, fmt.Errorf("first keyed upload %d answered as a replay", i)
		}
		ids[i] = f.ID
	}
	before, err := b.countObjects(ctx)
	if err != nil {
		return nil, err
	}
	replays := make([]time.Duration, n)
	for i := range n {
		p, data, h := req(i)
		t0 := time.Now()
		f, resp, err := b.api.putFile(ctx, p, bytes.NewReader(data), size, h)
		if err != nil {
			return nil, fmt.Errorf("replay %d: %w", i, err)
		}
		replays[i] = time.Since(t0)
		if resp.Header.Get("Idempotent-Replayed") != "true" || f.ID != ids[i] {
			return nil, fmt.Errorf("replay %d: Idempotent-Replayed %q, file %s (first was %s)", i, resp.Header.Get("Idempotent-Replayed"), f.ID, ids[i])
		}
	}
	after, err := b.countObjects(ctx)
	if err != nil {
		return nil, err
	}
	fp, rp := percentile(first, 50), percentile(replays, 50)
	logf("  replay p50 %s, first p50 %s; objects in bucket %s: %d before the replays, %d after", fmtMS(rp), fmtMS(fp), c.s3Bucket, before, after)
	verdict := fmt.Sprintf("meets (S3 objects %d → %d)", before, after)
	if before != after {
		verdict = fmt.Sprintf("misses (S3 objects %d → %d)", before, after)
	}
	return []row{{
		name:    fmt.Sprintf("keyed 4 KiB replay p50 vs first upload p50, %d each", n),
		agentfs: fmt.Sprintf("%s vs %s", fmtMS(rp), fmtMS(fp)),
		ratio:   ratio(float64(rp), float64(fp)),
		budget:  "no S3 write",
		verdict: verdict,
	}}, nil
}

// countObjects counts the objects in the server's bucket.
func (b *bench) countObjects(ctx context.Context) (int, error) {
	n := 0
	for o := range b.s3.ListObjects(ctx, b.cfg.s3Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return 0, fmt.Errorf("list bucket %s: %w", b.cfg.s3Bucket, o.Err)
		}
		n++
	}
	return n, nil
}

// batch: one batch of small utf8 puts, waited for, against the same number
// of standalone uploads from concurrent clients.
func (b *bench) batch(ctx context.Context) ([]row, error) {
	c := b.cfg
	n, size := c.batchItems, c.batchItemSize
	name := fmt.Sprintf("batch of %d × %s puts, items/s", n, fmtSize(size))
	textHdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}

	sn, sd, _, err := concurrently(ctx, c.smallClients, 0, n, func(ctx context.Context, i int) error {
		data := text(int64(i)*size, int(size))
		_, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("standalone/%d", i)), bytes.NewReader(data), size, textHdr)
		return err
	})
	if err != nil {
		return nil, err
	}
	sr := float64(sn) / sd.Seconds()
	standalone := fmtRate(sr, "/s") + fmt.Sprintf(" (AgentFS standalone, %d clients)", c.smallClients)
	logf("  %d standalone %s uploads from %d clients: %s, %.0f/s", sn, fmtSize(size), c.smallClients, sd.Round(time.Millisecond), sr)

	type op struct {
		Op       string `json:"op"`
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	}
	ops := make([]op, n)
	for i := range ops {
		ops[i] = op{Op: "put", Path: b.path(fmt.Sprintf("batch/%d", i)), Content: string(text(int64(i)*size, int(size))), Encoding: "utf8"}
	}
	body, err := json.Marshal(map[string]any{"operations": ops})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var bt batch
	_, err = b.api.call(ctx, http.MethodPost, "/v1/batch", bytes.NewReader(body), int64(len(body)), jsonHeader("bench-"+b.tag+"-batch"), &bt, http.StatusAccepted)
	var se *statusError
	if errors.As(err, &se) && (se.status == http.StatusNotFound || se.status == http.StatusMethodNotAllowed || se.status == http.StatusNotImplemented) {
		logf("  POST /v1/batch answered %d: not served yet", se.status)
		return []row{{name: name, agentfs: fmt.Sprintf("not served yet (POST /v1/batch: %d)", se.status), direct: standalone, budget: "reported"}}, nil
	}
	if err != nil {
		return nil, err
	}
	for !terminal(bt.Status) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := b.api.call(ctx, http.MethodGet, "/v1/batch/"+url.PathEscape(bt.ID), nil, 0, nil, &bt, http.StatusOK); err != nil {
			return nil, err
		}
	}
	d := time.Since(t0)
	if bt.Counts.Succeeded != n {
		detail := ""
		for _, it := range bt.Items {
			if it.Error != nil {
				detail = ": first item error " + it.Error.Code + " " + it.Error.Detail
				break
			}
		}
		return nil, fmt.Errorf("batch %s ended %s with %d of %d items succeeded%s", bt.ID, bt.Status, bt.Counts.Succeeded, n, detail)
	}
	br := float64(n) / d.Seconds()
	logf("  batch of %d: %s, %.0f items/s", n, d.Round(time.Millisecond), br)
	return []row{{
		name:    name,
		agentfs: fmtRate(br, "/s"),
		direct:  standalone,
		ratio:   ratio(br, sr),
		budget:  "reported",
	}}, nil
}

func terminal(status string) bool {
	return status == "succeeded" || status == "partially_succeeded" || status == "failed"
}

// list: listing one run's newest 100 files with 10 k and then 1 M rows in
// the files table, seeded with SQL. One row in 100 belongs to the listed
// run (so it holds 1% of the seeded rows at each point), and seeded rows
// are newer the later they are inserted, as real uploads would be.
func (b *bench) list(ctx context.Context) ([]row, error) {
	c := b.cfg
	name := fmt.Sprintf("run listing p50, limit 100, %s → %s rows", count(c.listSmall), count(c.listLarge))
	if c.databaseURL == "" {
		return []row{{name: name, agentfs: "skipped: no -database-url", budget: "flat"}}, nil
	}
	conn, err := pgx.Connect(ctx, c.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var subject string
	if err := conn.QueryRow(ctx, `SELECT subject FROM files WHERE id = $1`, b.firstFileID(ctx)).Scan(&subject); err != nil {
		return nil, fmt.Errorf("find the token's subject: %w", err)
	}
	base := time.Now().Add(-24 * time.Hour)
	seeded := 0
	seed := func(upto int) error {
		const step = 100_000
		for seeded < upto {
			to := min(seeded+step, upto)
			_, err := conn.Exec(ctx, `
INSERT INTO files (id, subject, path, size_bytes, content_type, sha256, blob_key,
                   agent_id, run_id, last_agent_id, last_run_id, created_at, updated_at)
SELECT 'file_seed' || $1 || '_' || g, $2, 'bench-seed/' || $1 || '/' || g, 0, 'application/octet-stream',
       'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', 'bench-seed/' || $1 || '/' || g,
       'seed-agent', 'seed-' || $1 || '-' || lpad((g % 100)::text, 2, '0'),
       'seed-agent', 'seed-' || $1 || '-' || lpad((g % 100)::text, 2, '0'),
       $3::timestamptz + g * interval '1 millisecond', $3::timestamptz + g * interval '1 millisecond'
FROM generate_series($4::bigint, $5::bigint) AS g`, b.tag, subject, base, seeded+1, to)
			if err != nil {
				return fmt.Errorf("seed files: %w", err)
			}
			seeded = to
		}
		// A table in use is vacuumed by autovacuum; do it now, so that
		// the timed calls neither race a vacuum of the fresh rows nor pay
		// for setting their hint bits.
		if _, err := conn.Exec(ctx, `VACUUM (ANALYZE) files`); err != nil {
			return fmt.Errorf("vacuum files: %w", err)
		}
		// Write out the pages the load dirtied, so that the checkpointer
		// does not do it during the timed calls. Needs a superuser (the
		// throwaway cluster's role is one); without, it is skipped.
		if _, err := conn.Exec(ctx, `CHECKPOINT`); err != nil {
			logf("  CHECKPOINT skipped: %v", err)
		}
		return nil
	}
	run := "seed-" + b.tag + "-07"
	query := "run_id=" + url.QueryEscape(run) + "&limit=100"
	const warmup = 5
	var work []string // Postgres work per call at each point
	measure := func() (time.Duration, time.Duration, error) {
		w0, err := quietFilesWork(ctx, conn)
		if err != nil {
			return 0, 0, err
		}
		for range warmup {
			if _, err := b.api.list(ctx, query); err != nil {
				return 0, 0, err
			}
		}
		lat := make([]time.Duration, c.listCalls)
		for i := range lat {
			t0 := time.Now()
			got, err := b.api.list(ctx, query)
			if err != nil {
				return 0, 0, err
			}
			lat[i] = time.Since(t0)
			if got != 100 {
				return 0, 0, fmt.Errorf("listing run %s returned %d files, want 100", run, got)
			}
		}
		// The timing moves with whatever else the cores are doing; the
		// rows and pages each call touched do not, so they are shown too.
		calls := int64(warmup + c.listCalls)
		w1, err := filesWorkAfter(ctx, conn, w0, calls)
		if err != nil {
			return 0, 0, err
		}
		work = append(work, w1.since(w0, calls))
		return percentile(lat, 50), percentile(lat, 90), nil
	}

	t0 := time.Now()
	if err := seed(c.listSmall); err != nil {
		return nil, err
	}
	logf("  seeded %d rows in %s", seeded, time.Since(t0).Round(time.Millisecond))
	small50, small90, err := measure()
	if err != nil {
		return nil, err
	}
	var total1 int64
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM files`).Scan(&total1)
	logf("  %d seeded rows (%d in the table): p50 %s, p90 %s", seeded, total1, fmtMS(small50), fmtMS(small90))

	t0 = time.Now()
	if err := seed(c.listLarge); err != nil {
		return nil, err
	}
	logf("  seeded %d rows in %s", seeded, time.Since(t0).Round(time.Millisecond))
	large50, large90, err := measure()
	if err != nil {
		return nil, err
	}
	var total2 int64
	_ = conn.QueryRow(ctx, `SELECT count(*) FROM files`).Scan(&total2)
	logf("  %d seeded rows (%d in the table): p50 %s, p90 %s", seeded, total2, fmtMS(large50), fmtMS(large90))
	b.notes = append(b.notes, fmt.Sprintf("listing: the listed run holds 1%% of the seeded rows (%d, then %d); the files table held %d, then %d rows in all; p90 %s, then %s.",
		c.listSmall/100, c.listLarge/100, total1, total2, fmtMS(small90), fmtMS(large90)))
	b.notes = append(b.notes, fmt.Sprintf("listing, Postgres work per call on the files table (from its statistics counters): %s, then %s.", work[0], work[1]))

	r := float64(large50) / float64(small50)
	verdict := "meets"
	if r > 1.5 {
		verdict = "misses"
	}
	return []row{{
		name:    name,
		agentfs: fmt.Sprintf("%s → %s", fmtMS(small50), fmtMS(large50)),
		ratio:   fmt.Sprintf("%.2f×", r),
		budget:  "flat (≤ 1.5×)",
		verdict: verdict,
	}}, nil
}

// firstFileID returns the id of a file this token can see, to learn the
// token's subject from the database.
func (b *bench) firstFileID(ctx context.Context) string {
	var page struct {
		Data []file `json:"data"`
	}
	if _, err := b.api.call(ctx, http.MethodGet, "/v1/files?limit=1&include_deleted=true", nil, 0, nil, &page, http.StatusOK); err == nil && len(page.Data) > 0 {
		return page.Data[0].ID
	}
	f, _, err := b.api.putFile(ctx, b.path("subject-probe"), bytes.NewReader(chunk(0, 16)), 16, nil)
	if err != nil {
		return ""
	}
	return f.ID
}

func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// tableWork is the cumulative index scans, rows fetched through indexes
// and pages touched (shared buffer hits and reads) on the files table.
type tableWork struct{ scans, rows, pages int64 }

func filesWork(ctx context.Context, conn *pgx.Conn) (tableWork, error) {
	var w tableWork
	err := conn.QueryRow(ctx, `
SELECT coalesce(t.idx_scan, 0), coalesce(t.idx_tup_fetch, 0),
       coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0) +
       coalesce(io.idx_blks_hit, 0) + coalesce(io.idx_blks_read, 0)
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
WHERE t.relname = 'files'`).Scan(&w.scans, &w.rows, &w.pages)
	if err != nil {
		return w, fmt.Errorf("read statistics of files: %w", err)
	}
	return w, nil
}

// quietFilesWork returns the counters once every backend has flushed what
// it did before: this connection's seeding at once, the server's backends
// within Postgres's ten-second idle flush interval.
func quietFilesWork(ctx context.Context, conn *pgx.Conn) (tableWork, error) {
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return tableWork{}, fmt.Errorf("flush statistics: %w", err)
	}
	select {
	case <-ctx.Done():
		return tableWork{}, context.Cause(ctx)
	case <-time.After(11 * time.Second):
	}
	return filesWork(ctx, conn)
}

// filesWorkAfter waits until the statistics show at least calls index
// scans since from (server backends flush their counters lazily, within
// about ten seconds) and returns them.
func filesWorkAfter(ctx context.Context, conn *pgx.Conn, from tableWork, calls int64) (tableWork, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		w, err := filesWork(ctx, conn)
		if err != nil || w.scans-from.scans >= calls || time.Now().After(deadline) {
			return w, err
		}
		select {
		case <-ctx.Done():
			return w, context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (w tableWork) since(from tableWork, calls int64) string {
	if w.scans-from.scans < calls {
		return "not reported in time"
	}
	per := func(v int64) float64 { return float64(v) / float64(calls) }
	return fmt.Sprintf("%.1f rows fetched, %.1f pages", per(w.rows-from.rows), per(w.pages-from.pages))
}

// alternate runs one round of a side-by-side measurement: AgentFS first in
// even rounds, direct first in odd ones, so neither side always meets a
// warm (or a busy) machine.
func alternate(round int, agent, direct func() error) error {
	first, second := agent, direct
	if round%2 == 1 {
		first, second = direct, agent
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}
