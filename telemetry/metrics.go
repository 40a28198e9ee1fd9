// Package telemetry is how AgentFS shows what it does: Prometheus series
// about its domain (idempotency keys, batch items, upload sessions, the
// batch queue, the sweeper) and its dependencies (each Postgres call and
// S3 request, S3 bytes), and OpenTelemetry traces exported over OTLP when
// asked for. The HTTP series are package handlers' own.
//
// It hooks into the other packages without their knowing Prometheus or
// OpenTelemetry: a pgx tracer and an S3 transport wrapper in
// storage.Config, the admission core's Observer, and wrapped sweeper tasks.
// server.New wires it, for agentfs serve and handlers/apitest alike, so the
// handler tests see the series serve exports.
//
// Every label value comes from a closed set (an operation, an outcome, a
// task, a status), never a subject, path, id or key, so the number of series
// is bounded whatever the traffic.
package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/blobcache"
	"github.com/agentfs/agentfs/sweeper"
)

// Metrics are the domain and dependency series, registered in one
// registry. A Metrics is safe for concurrent use.
type Metrics struct {
	keys     *prometheus.CounterVec
	items    *prometheus.CounterVec
	groups   prometheus.Histogram
	sweeps   *prometheus.CounterVec
	swept    *prometheus.CounterVec
	postgres *prometheus.HistogramVec
	s3       *prometheus.HistogramVec
	s3Bytes  *prometheus.CounterVec
	reg      prometheus.Registerer
}

// The closed sets of label values the core's hooks may report.
var (
	keyOutcomes = []string{admission.KeyExecuted, admission.KeyReplayed, admission.KeyConflict,
		admission.KeyInProgress, admission.KeyClaimLost}
	itemOps      = []string{agentfs.OpPut, agentfs.OpDelete, agentfs.OpRestore, agentfs.OpCopy, agentfs.OpUndo}
	itemOutcomes = []string{admission.ItemApplied, admission.ItemReplayed, admission.ItemFailed,
		admission.ItemRetried, admission.ItemSkipped}
)

// NewMetrics registers the series in reg. The key and item counters start
// at zero for every outcome, so a rate over them is defined from the first
// scrape.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		keys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_idempotency_requests_total",
			Help: "Requests with an Idempotency-Key (batch items with a key too), by how the key admitted them: executed, replayed, conflict (409 IDEMPOTENCY_CONFLICT), in_progress (409 OPERATION_IN_PROGRESS), claim_lost (taken over while running).",
		}, []string{"outcome"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_batch_items_total",
			Help: "Runs of batch items, by op and outcome: applied, replayed, failed, retried (a transient failure; the batch runs it again), skipped (already settled by another worker).",
		}, []string{"op", "outcome"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_sweeper_runs_total",
			Help: "Runs of each sweeper task, by result (ok or failed).",
		}, []string{"task", "result"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_sweeper_removed_total",
			Help: "Things each sweeper task removed (records, sessions, files, versions, events, windows, blobs).",
		}, []string{"task"}),
		postgres: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentfs_postgres_call_duration_seconds",
			Help:    "Time of each Postgres call of AgentFS's pool, by operation: the statement's kind (select, insert, update, delete, with, begin, commit, rollback, other), batch, copy_from, connect, or acquire (waiting for a pooled connection).",
			Buckets: prometheus.ExponentialBuckets(0.00025, 4, 10),
		}, []string{"operation"}),
		s3: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentfs_s3_request_duration_seconds",
			Help:    "Time from sending an S3 request to its answer's headers (a put's body is sent within it), by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"operation"}),
		groups: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "agentfs_commit_group_writes",
			Help:    "Puts of their own per commit: 1 for a put that found its caller's previous commit done; more when the caller's puts that arrived while it ran committed together in one transaction (AGENTFS_COMMIT_GROUP_MAX).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
		}),
		s3Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentfs_s3_body_bytes_total",
			Help: "Bytes of S3 request and response bodies, by operation and direction (sent to S3, received from it).",
		}, []string{"operation", "direction"}),
	}
	reg.MustRegister(m.keys, m.items, m.groups, m.sweeps, m.swept, m.postgres, m.s3, m.s3Bytes)
	for _, o := range keyOutcomes {
		m.keys.WithLabelValues(o)
	}
	for _, op := range itemOps {
		for _, o := range itemOutcomes {
			m.items.WithLabelValues(op, o)
		}
	}
	return m
}

// KeyOutcome counts a keyed request by how it was admitted
// (admission.Observer).
func (m *Metrics) KeyOutcome(outcome string) {
	m.keys.WithLabelValues(oneOf(outcome, keyOutcomes)).Inc()
}

// ItemOutcome counts one run of a batch item (admission.Observer).
func (m *Metrics) ItemOutcome(op, outcome string) {
	m.items.WithLabelValues(oneOf(op, itemOps), oneOf(outcome, itemOutcomes)).Inc()
}

// CommitGroup counts the puts of one commit (admission.Observer).
func (m *Metrics) CommitGroup(writes int) { m.groups.Observe(float64(writes)) }

// oneOf is v when it is in set, else "other": what the hooks report is
// bounded here too, whatever a caller passes.
func oneOf(v string, set []string) string {
	for _, s := range set {
		if v == s {
			return v
		}
	}
	return "other"
}

var _ admission.Observer = (*Metrics)(nil)

// CountSweeps returns tasks that count their runs and what they removed.
// The task label is the task's name in snake case ("unreferenced_blobs").
func (m *Metrics) CountSweeps(tasks []sweeper.Task) []sweeper.Task {
	out := make([]sweeper.Task, len(tasks))
	for i, task := range tasks {
		label := strings.ReplaceAll(task.Name, " ", "_")
		ok, failed := m.sweeps.WithLabelValues(label, "ok"), m.sweeps.WithLabelValues(label, "failed")
		removed := m.swept.WithLabelValues(label)
		run := task.Run
		out[i] = sweeper.Task{Name: task.Name, Run: func(ctx context.Context) (int64, error) {
			n, err := run(ctx)
			if err != nil {
				failed.Inc()
			} else {
				ok.Inc()
			}
			if n > 0 {
				removed.Add(float64(n))
			}
			return n, err
		}}
	}
	return out
}

// Instrument makes cfg's storage report each Postgres call and S3 request
// to these metrics.
func (m *Metrics) Instrument(cfg *storage.Config) {
	cfg.Tracers = append(cfg.Tracers, pgTimer{h: m.postgres})
	wrap := cfg.S3Transport
	bucket := cfg.S3Bucket
	cfg.S3Transport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return &s3Timer{next: rt, bucket: bucket, h: m.s3, bytes: m.s3Bytes}
	}
}

var _ pgx.QueryTracer = pgTimer{}

// State is what the scrape-time series read: storage.Store.
type State interface {
	LiveUploads(ctx context.Context) (map[string]int64, error)
	QueueStats(ctx context.Context) (storage.QueueStats, error)
}

// WatchState registers the series read from Postgres on each scrape: live
// upload sessions by status, and the batch queue's jobs by state and how
// long the oldest ready one has waited. A scrape whose queries fail shows
// agentfs_state_up 0 (and the failure in the log) instead of failing the
// whole scrape, so the other series stay visible during an outage.
func (m *Metrics) WatchState(src State, log *slog.Logger) {
	m.reg.MustRegister(&stateCollector{src: src, log: log, timeout: 5 * time.Second})
}

// stateCollector reads the state series from Postgres when scraped.
type stateCollector struct {
	src     State
	log     *slog.Logger
	timeout time.Duration
}

var (
	uploadsDesc = prometheus.NewDesc("agentfs_upload_sessions",
		"Upload sessions still in use, by status (pending, completing), read from Postgres on each scrape.",
		[]string{"status"}, nil)
	queueJobsDesc = prometheus.NewDesc("agentfs_batch_queue_jobs",
		"Batch jobs in the durable queue, by state: available (ready, waiting for a worker), scheduled, retryable, running. Read from Postgres on each scrape.",
		[]string{"state"}, nil)
	queueOldestDesc = prometheus.NewDesc("agentfs_batch_queue_oldest_wait_seconds",
		"How long the oldest available batch job has been ready without a worker taking it (0 when none waits).",
		nil, nil)
	stateUpDesc = prometheus.NewDesc("agentfs_state_up",
		"1 when the scrape-time queries (upload sessions, batch queue) answered, 0 when they failed.",
		nil, nil)
)

// Describe sends the descriptions of the state series.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- uploadsDesc
	ch <- queueJobsDesc
	ch <- queueOldestDesc
	ch <- stateUpDesc
}

// Collect reads the state from Postgres and sends it.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	uploads, err := c.src.LiveUploads(ctx)
	var queue storage.QueueStats
	if err == nil {
		queue, err = c.src.QueueStats(ctx)
	}
	if err != nil {
		c.log.Warn("metrics: read state", "err", err)
		ch <- prometheus.MustNewConstMetric(stateUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(stateUpDesc, prometheus.GaugeValue, 1)
	for _, status := range storage.LiveUploadStatuses {
		ch <- prometheus.MustNewConstMetric(uploadsDesc, prometheus.GaugeValue, float64(uploads[status]), status)
	}
	for _, state := range storage.QueueJobStates {
		ch <- prometheus.MustNewConstMetric(queueJobsDesc, prometheus.GaugeValue, float64(queue.Jobs[state]), state)
	}
	ch <- prometheus.MustNewConstMetric(queueOldestDesc, prometheus.GaugeValue, queue.OldestWait.Seconds())
}

// WatchBlobCache registers the blob cache's series, read from stats at
// each scrape: its hits, misses, fills and evictions, and the bytes and
// entries it holds against its bound.
func (m *Metrics) WatchBlobCache(stats func() blobcache.Stats) {
	counter := func(name, help string, v func(blobcache.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	gauge := func(name, help string, v func(blobcache.Stats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(v(stats())) })
	}
	m.reg.MustRegister(
		counter("agentfs_blob_cache_hits_total", "Blob reads served from the instance's in-memory cache of small blobs.",
			func(s blobcache.Stats) int64 { return s.Hits }),
		counter("agentfs_blob_cache_misses_total", "Blob reads the cache did not hold (read from S3; a small one read whole is kept).",
			func(s blobcache.Stats) int64 { return s.Misses }),
		counter("agentfs_blob_cache_fills_total", "Blobs put into the cache, as uploaded or as read whole from S3.",
			func(s blobcache.Stats) int64 { return s.Fills }),
		counter("agentfs_blob_cache_evictions_total", "Blobs dropped from the cache, least recently used first, to keep its bound.",
			func(s blobcache.Stats) int64 { return s.Evictions }),
		gauge("agentfs_blob_cache_bytes", "Bytes of blob content the cache holds now.",
			func(s blobcache.Stats) int64 { return s.Bytes }),
		gauge("agentfs_blob_cache_entries", "Blobs the cache holds now.",
			func(s blobcache.Stats) int64 { return s.Entries }),
		gauge("agentfs_blob_cache_max_bytes", "The cache's bound on the bytes it holds (AGENTFS_BLOB_CACHE_BYTES; 0: no cache).",
			func(s blobcache.Stats) int64 { return s.Max }),
	)
}
