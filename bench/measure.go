package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// rssBudget is the bound on server memory growth.
const rssBudget = 64 << 20

// rssMeasure samples the server's RSS while transfer runs and makes the
// row: growth above the idle RSS measured just before, against the budget.
// It also returns the transfer's duration.
func (b *bench) rssMeasure(name string, transfer func() error) (row, time.Duration, error) {
	pid := b.cfg.serverPID
	idle, err := idleRSS(pid, 10, 100*time.Millisecond)
	if err != nil {
		return row{}, 0, err
	}
	s := startSampler(pid, 100*time.Millisecond)
	t0 := time.Now()
	err = transfer()
	d := time.Since(t0)
	peak, n, serr := s.finish()
	if err != nil {
		return row{}, d, err
	}
	if serr != nil {
		return row{}, d, serr
	}
	grow := max(0, peak-idle)
	logf("  %s: RSS idle %s, peak %s over %d samples", name, fmtMiB(idle), fmtMiB(peak), n)
	verdict := "meets"
	if grow > rssBudget {
		verdict = "misses"
	}
	return row{
		name:    name,
		agentfs: fmt.Sprintf("+%s (idle %s, peak %s)", fmtMiB(grow), fmtMiB(idle), fmtMiB(peak)),
		budget:  "≤ +64 MiB",
		verdict: verdict,
	}, d, nil
}

// warmUp makes one small upload and one listing, so that the server's
// connection pools are part of "idle".
func (b *bench) warmUp(ctx context.Context) error {
	if _, _, err := b.api.putFile(ctx, b.path("warmup/"+fmt.Sprint(time.Now().UnixNano())), b.data.reader(0, 4096), 4096, nil); err != nil {
		return err
	}
	_, err := b.api.list(ctx, "limit=10")
	return err
}

// memory: the server's RSS, idle and while a large file streams up through
// it and back down.
func (b *bench) memory(ctx context.Context) ([]row, error) {
	c := b.cfg
	label := fmtSize(c.streamSize)
	if c.serverPID <= 0 {
		return []row{{name: "server RSS growth, " + label + " upload", agentfs: "skipped: no -server-pid", budget: "≤ +64 MiB"}}, nil
	}
	if err := b.warmUp(ctx); err != nil {
		return nil, err
	}
	var f *file
	up, d, err := b.rssMeasure("server RSS growth, "+label+" upload", func() (err error) {
		f, _, err = b.api.putFile(ctx, b.path("stream"), b.data.reader(0, c.streamSize), c.streamSize, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	logf("  upload %s: %.0f MiB/s", label, mibps(c.streamSize, d))
	buf := make([]byte, readBufferSize)
	down, d, err := b.rssMeasure("server RSS growth, "+label+" download", func() error {
		n, err := b.api.getContent(ctx, f.ID, buf)
		if err == nil && n != c.streamSize {
			err = fmt.Errorf("download of %s: got %d bytes, want %d", f.ID, n, c.streamSize)
		}
		return err
	})
	if err != nil {
		return []row{up}, err
	}
	logf("  download %s: %.0f MiB/s", label, mibps(c.streamSize, d))
	if err := b.api.deleteFile(ctx, f.ID); err != nil {
		return nil, err
	}
	// Parts sent side by side arrive ahead of the running hash, and the
	// server keeps them in memory until their turn (its hash window).
	multi, d, err := b.rssMeasure(fmt.Sprintf("server RSS growth, %s upload in parts, %d parallel", label, c.partWorkers), func() error {
		mf, err := b.uploadInParts(ctx, b.path("stream-parts"), c.streamSize)
		if err == nil {
			err = b.api.deleteFile(ctx, mf.ID)
		}
		return err
	})
	if err != nil {
		return []row{up, down}, err
	}
	logf("  upload in parts %s: %.0f MiB/s", label, mibps(c.streamSize, d))
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
		return b.api.putPart(ctx, u.ID, n, b.data.reader(off, l), l)
	})
	if err != nil {
		b.api.abortUpload(context.WithoutCancel(ctx), u.ID)
		return nil, err
	}
	f, err := b.api.completeUpload(ctx, u.ID)
	if err == nil && f.SizeBytes != size {
		err = fmt.Errorf("the file of the upload session has %d bytes, want %d", f.SizeBytes, size)
	}
	return f, err
}

// upload: one large file from memory, AgentFS POST /v1/files against one
// direct unsigned PUT (the fastest way to store a body of known length)
// and against minio-go's default PutObject, all three sending the same
// in-memory bytes, in rotating order; the medians count.
func (b *bench) upload(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.uploadSize
	var agent, unsigned, defaults []float64
	var agentCPU, unsignedCPU, defaultsCPU cpuAcc
	var spareIDs, spareKeys []string
	for i := range c.uploadRuns {
		var ar, ur, dr float64
		viaAgentFS := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			f, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("upload-%d", i)), b.data.reader(0, size), size, nil)
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
		unsignedPUT := func() error {
			key := b.key(fmt.Sprintf("upload-%d", i))
			c0, t0 := b.cpuNow(), time.Now()
			if _, err := b.s3.PutObject(ctx, c.directBucket, key, b.data.reader(0, size), size, putOpts); err != nil {
				return fmt.Errorf("direct unsigned PUT: %w", err)
			}
			ur = mibps(size, time.Since(t0))
			unsignedCPU.add(c0, b.cpuNow(), gib(size))
			if b.big.key == "" {
				b.big.key = key
			} else {
				spareKeys = append(spareKeys, key)
			}
			return nil
		}
		defaultPut := func() error {
			key := b.key(fmt.Sprintf("upload-defaults-%d", i))
			c0, t0 := b.cpuNow(), time.Now()
			if _, err := b.s3.PutObject(ctx, c.directBucket, key, b.data.reader(0, size), size,
				minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
				return fmt.Errorf("direct PutObject with default options: %w", err)
			}
			dr = mibps(size, time.Since(t0))
			defaultsCPU.add(c0, b.cpuNow(), gib(size))
			spareKeys = append(spareKeys, key)
			return nil
		}
		if err := rotate(i, viaAgentFS, unsignedPUT, defaultPut); err != nil {
			return nil, err
		}
		logf("  upload %s run %d/%d: AgentFS %.0f MiB/s, unsigned PUT %.0f MiB/s (%.2f×), default PutObject %.0f MiB/s (%.2f×)",
			fmtSize(size), i+1, c.uploadRuns, ar, ur, ar/ur, dr, ar/dr)
		agent, unsigned, defaults = append(agent, ar), append(unsigned, ur), append(defaults, dr)
	}
	for _, id := range spareIDs {
		if err := b.api.deleteFile(ctx, id); err != nil {
			return nil, err
		}
	}
	for _, k := range spareKeys {
		_ = b.s3.RemoveObject(ctx, c.directBucket, k, minio.RemoveObjectOptions{})
	}
	b.notes = append(b.notes, fmt.Sprintf("upload %s, per run (AgentFS ÷ unsigned PUT; ÷ default PutObject): %s; %s. "+
		"All three send the same bytes from one buffer in memory; the default PutObject of a seekable body is minio-go's parallel "+
		"multipart upload with streaming signatures.", fmtSize(size), runRatios(agent, unsigned), runRatios(agent, defaults)))
	b.cpuNote("upload "+fmtSize(size)+" (direct: the unsigned PUT)", "GiB", agentCPU, unsignedCPU)
	b.notes = append(b.notes, fmt.Sprintf("upload %s, CPU seconds per GiB of minio-go's default PutObject: %s.",
		fmtSize(size), defaultsCPU.per(false, b.s3CPUName())))
	runs := fmt.Sprintf("median of %d", c.uploadRuns)
	return []row{
		withDirect(rateRow(fmt.Sprintf("upload %s vs one unsigned PUT, %s", fmtSize(size), runs), median(agent), median(unsigned), "MiB/s", 0.95), "unsigned PUT"),
		withBudgetNote(withDirect(rateRow(fmt.Sprintf("upload %s vs default PutObject, %s", fmtSize(size), runs), median(agent), median(defaults), "MiB/s", 1.5), "default PutObject"), "the easier baseline"),
	}, nil
}

// download: the file upload left, AgentFS GET content against minio-go
// GetObject, both read to the end into the same size of buffer. the budget's
// budget counts the runs that meet the ratio.
func (b *bench) download(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.uploadSize
	if b.big.fileID == "" {
		f, _, err := b.api.putFile(ctx, b.path("download"), b.data.reader(0, size), size, nil)
		if err != nil {
			return nil, err
		}
		b.big.fileID = f.ID
	}
	if b.big.key == "" {
		key := b.key("download")
		if _, err := b.s3.PutObject(ctx, c.directBucket, key, b.data.reader(0, size), size, putOpts); err != nil {
			return nil, fmt.Errorf("direct PutObject: %w", err)
		}
		b.big.key = key
	}
	buf := make([]byte, readBufferSize)
	var agent, direct []float64
	var agentCPU, directCPU cpuAcc
	for i := range c.downloadRuns {
		var ar, dr float64
		viaAgentFS := b.timedDownload("AgentFS download", size, func() (int64, error) {
			return b.api.getContent(ctx, b.big.fileID, buf)
		}, &ar, &agentCPU)
		getObject := b.timedDownload("direct download", size, func() (int64, error) {
			return b.directGet(ctx, b.big.key, buf)
		}, &dr, &directCPU)
		if err := rotate(i, viaAgentFS, getObject); err != nil {
			return nil, err
		}
		logf("  download %s run %d/%d: AgentFS %.0f MiB/s, direct %.0f MiB/s (%.2f×)", fmtSize(size), i+1, c.downloadRuns, ar, dr, ar/dr)
		agent, direct = append(agent, ar), append(direct, dr)
	}
	if err := b.api.deleteFile(ctx, b.big.fileID); err != nil {
		return nil, err
	}
	_ = b.s3.RemoveObject(ctx, c.directBucket, b.big.key, minio.RemoveObjectOptions{})
	b.cpuNote("download "+fmtSize(size), "GiB", agentCPU, directCPU)
	b.notes = append(b.notes, fmt.Sprintf("download %s, per run (AgentFS ÷ GetObject, both reading into %s buffers): %s.",
		fmtSize(size), fmtSize(readBufferSize), runRatios(agent, direct)))

	const budget = 0.9
	need := (4*c.downloadRuns + 4) / 5 // the budget: 4 of 5
	met := 0
	for i := range agent {
		if agent[i]/direct[i] >= budget {
			met++
		}
	}
	verdict := fmt.Sprintf("misses (%d of %d runs)", met, c.downloadRuns)
	if met >= need {
		verdict = fmt.Sprintf("meets (%d of %d runs)", met, c.downloadRuns)
	}
	return []row{{
		name:    fmt.Sprintf("download %s vs GetObject, median of %d", fmtSize(size), c.downloadRuns),
		agentfs: fmtRate(median(agent), "MiB/s"),
		direct:  fmtRate(median(direct), "MiB/s") + " (GetObject)",
		ratio:   ratio(median(agent), median(direct)),
		budget:  fmt.Sprintf("≥ %g× in ≥ %d of %d runs", budget, need, c.downloadRuns),
		verdict: verdict,
	}, b.cpuRow("AgentFS CPU per GiB downloaded", "GiB", agentCPU, 0.25, 0)}, nil
}

// timedDownload is one download of size bytes by get, for rotate: its
// rate (MiB/s) goes to rate and its CPU to acc; fewer or more bytes than
// size fail, named what.
func (b *bench) timedDownload(what string, size int64, get func() (int64, error), rate *float64, acc *cpuAcc) func() error {
	return func() error {
		c0, t0 := b.cpuNow(), time.Now()
		n, err := get()
		if err != nil {
			return err
		}
		if n != size {
			return fmt.Errorf("%s: %d bytes, want %d", what, n, size)
		}
		*rate = mibps(size, time.Since(t0))
		acc.add(c0, b.cpuNow(), gib(size))
		return nil
	}
}

// small: many small uploads from concurrent clients, unique paths, the same
// bytes on both sides.
func (b *bench) small(ctx context.Context) ([]row, error) {
	c := b.cfg
	data := b.data.bytes(0, c.smallSize)
	label := fmtSize(c.smallSize)

	c0 := b.cpuNow()
	dn, dd, dlat, err := concurrently(ctx, c.smallClients, c.smallDuration, c.smallMax, func(ctx context.Context, i int) error {
		_, err := b.s3.PutObject(ctx, c.directBucket, b.key(fmt.Sprintf("small/%d", i)), bytesReader(data), int64(len(data)), putOpts)
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
		_, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("small/%d", i)), bytesReader(data), int64(len(data)), nil)
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
	return []row{withDirect(rateRow(fmt.Sprintf("%s uploads/s, %d clients", label, c.smallClients), ar, dr, "/s", 0.75), "PutObject"),
		b.cpuRow("CPU per 1000 uploads of "+label+": server; postgres", "1000", agentCPU, 0.25, 0.25)}, nil
}

// multipart: an upload session with parallel parts against a direct
// minio-go multipart upload of the same size and part size, both sending
// parts from the same buffer; the medians count.
func (b *bench) multipart(ctx context.Context) ([]row, error) {
	c := b.cfg
	size := c.multipartSize
	var partSize int64
	var partCount int
	var agent, direct []float64
	var agentCPU, directCPU cpuAcc
	var completes []string
	for i := range c.multipartRuns {
		var ar, dr float64
		viaAgentFS := func() error {
			c0, t0 := b.cpuNow(), time.Now()
			u, err := b.api.createUpload(ctx, b.path(fmt.Sprintf("multipart-%d", i)), size)
			if err != nil {
				return err
			}
			partSize, partCount = u.PartSize, u.PartCount
			err = inParallel(ctx, c.partWorkers, u.PartCount, func(ctx context.Context, n int) error {
				off := int64(n-1) * u.PartSize
				l := min(u.PartSize, size-off)
				return b.api.putPartDigest(ctx, u.ID, n, b.data.bytes(off, l))
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
		directMultipart := func() error {
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
				p, err := b.core.PutObjectPart(ctx, c.directBucket, key, id, n, b.data.reader(off, l), l, minio.PutObjectPartOptions{DisableContentSha256: true})
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
		if err := rotate(i, viaAgentFS, directMultipart); err != nil {
			return nil, err
		}
		logf("  multipart %s run %d/%d: AgentFS %.0f MiB/s, direct %.0f MiB/s", fmtSize(size), i+1, c.multipartRuns, ar, dr)
		agent, direct = append(agent, ar), append(direct, dr)
	}
	b.cpuNote("multipart "+fmtSize(size), "GiB", agentCPU, directCPU)
	b.notes = append(b.notes, fmt.Sprintf("multipart %s: AgentFS complete took %s (per run); each AgentFS part carried its Content-Digest, hashed by this client as it sent it (as client.UploadFile does).", fmtSize(size), strings.Join(completes, ", ")))
	return []row{withDirect(rateRow(fmt.Sprintf("multipart %s, %d × %s parts, %d parallel, median of %d",
		fmtSize(size), partCount, fmtSize(partSize), c.partWorkers, c.multipartRuns),
		median(agent), median(direct), "MiB/s", 0.85), "multipart"),
		b.cpuRow("AgentFS CPU per GiB uploaded in parts", "GiB", agentCPU, 1.5, 0)}, nil
}

// rotate runs one round of a side-by-side measurement, each side once,
// starting with side round modulo their number, so that no side always
// meets a warm (or a busy) machine.
func rotate(round int, sides ...func() error) error {
	for k := range sides {
		if err := sides[(round+k)%len(sides)](); err != nil {
			return err
		}
	}
	return nil
}

// alternated times two kinds of call n times each after warmup rounds,
// one call at a time, in rotating order (rotate); a and b answer how long
// their call i took.
func alternated(warmup, n int, a, b func(i int) (time.Duration, error)) (as, bs []time.Duration, err error) {
	for i := range warmup + n {
		var da, db time.Duration
		err := rotate(i,
			func() (err error) { da, err = a(i); return err },
			func() (err error) { db, err = b(i); return err })
		if err != nil {
			return nil, nil, err
		}
		if i >= warmup {
			as, bs = append(as, da), append(bs, db)
		}
	}
	return as, bs, nil
}

// p50RatioRow is a row whose budget is a bound on the p50 of as over that
// of bs.
func p50RatioRow(name string, as, bs []time.Duration, budget float64) row {
	a50, b50 := percentile(as, 50), percentile(bs, 50)
	r := float64(a50) / float64(b50)
	verdict := "meets"
	if r > budget {
		verdict = "misses"
	}
	return row{
		name:    name,
		agentfs: fmt.Sprintf("%s vs %s", fmtMS(a50), fmtMS(b50)),
		ratio:   fmt.Sprintf("%.2f×", r),
		budget:  fmt.Sprintf("p50 ≤ %g×", budget),
		verdict: verdict,
	}
}

// runRatios formats a[i]/b[i] for every run.
func runRatios(a, b []float64) string {
	var out []string
	for i := range a {
		out = append(out, fmt.Sprintf("%.2f×", a[i]/b[i]))
	}
	return strings.Join(out, ", ")
}
