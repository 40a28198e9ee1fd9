package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
)

// config is everything the environment configures.
type config struct {
	ListenAddr string
	PublicURL  string
	LogFormat  string
	LogLevel   string
	Storage    storage.Config
	Limits     handlers.Limits
	// BatchWorkers is how many batches run at once on this instance;
	// BatchRescueAfter how long a batch job may run before the queue hands
	// it to another worker (a batch orphaned by a dead process resumes then);
	// BatchItemConcurrency how many batch items are prepared at once on this
	// instance, shared by its running batches.
	BatchWorkers         int
	BatchRescueAfter     time.Duration
	BatchItemConcurrency int
	// BlobGrace is how old an unreferenced blob must be before the sweeper
	// removes it: longer than any upload or read in flight.
	BlobGrace time.Duration
	// SweepInterval is how often every sweeper task runs.
	SweepInterval time.Duration
	// PprofAddr, when set, serves net/http/pprof there (keep it on
	// loopback): for profiling only.
	PprofAddr string
	// FaultAfterCommit, for fault-injection tests only: "exit" kills the
	// process after a keyed write committed, before its response.
	FaultAfterCommit string
	// FaultMidComplete, for fault-injection tests only: "exit" kills the
	// process in the middle of an upload's complete (the session is
	// completing and assembled; nothing is committed).
	FaultMidComplete string
}

// loadConfig reads the AGENTFS_* variables, filling in defaults.
func loadConfig(getenv func(string) string) (config, error) {
	env := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	c := config{
		ListenAddr:       env("AGENTFS_LISTEN_ADDR", "127.0.0.1:8080"),
		LogFormat:        env("AGENTFS_LOG_FORMAT", "text"),
		LogLevel:         env("AGENTFS_LOG_LEVEL", "info"),
		FaultAfterCommit: env("AGENTFS_FAULT_AFTER_COMMIT", ""),
		FaultMidComplete: env("AGENTFS_FAULT_MID_COMPLETE", ""),
		PprofAddr:        env("AGENTFS_PPROF_ADDR", ""),
		Storage: storage.Config{
			DatabaseURL: env("AGENTFS_DATABASE_URL", ""),
			S3Endpoint:  env("AGENTFS_S3_ENDPOINT", ""),
			S3AccessKey: env("AGENTFS_S3_ACCESS_KEY", ""),
			S3SecretKey: env("AGENTFS_S3_SECRET_KEY", ""),
			S3Bucket:    env("AGENTFS_S3_BUCKET", "agentfs"),
			S3Region:    env("AGENTFS_S3_REGION", "us-east-1"),
		},
	}
	c.PublicURL = strings.TrimRight(env("AGENTFS_PUBLIC_URL", "http://"+c.ListenAddr), "/")
	var errs []string
	check := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	var partSize int64
	check(parseBool(env("AGENTFS_S3_USE_SSL", "false"), "AGENTFS_S3_USE_SSL", &c.Storage.S3UseSSL))
	check(parseBytes(env("AGENTFS_S3_PART_SIZE", "16777216"), "AGENTFS_S3_PART_SIZE", &partSize))
	check(parseBytes(env("AGENTFS_MAX_UPLOAD_BYTES", "5368709120"), "AGENTFS_MAX_UPLOAD_BYTES", &c.Limits.MaxUploadBytes))
	check(parseDuration(env("AGENTFS_DELETED_RETENTION", "168h"), "AGENTFS_DELETED_RETENTION", &c.Storage.DeletedRetention))
	check(parseDuration(env("AGENTFS_IDEMPOTENCY_RETENTION", "168h"), "AGENTFS_IDEMPOTENCY_RETENTION", &c.Storage.IdempotencyRetention))
	check(parseBytes(env("AGENTFS_MAX_UPLOAD_SESSION_BYTES", "5497558138880"), "AGENTFS_MAX_UPLOAD_SESSION_BYTES", &c.Limits.MaxUploadSessionBytes))
	check(parseBytes(env("AGENTFS_UPLOAD_PART_SIZE", "8388608"), "AGENTFS_UPLOAD_PART_SIZE", &c.Limits.UploadPartSize))
	check(parseDuration(env("AGENTFS_UPLOAD_TTL", "24h"), "AGENTFS_UPLOAD_TTL", &c.Limits.UploadTTL))
	if v := env("AGENTFS_MAX_PENDING_UPLOADS", "100"); v != "0" {
		var pending int64
		if parseCount(v, "AGENTFS_MAX_PENDING_UPLOADS", &pending) != nil {
			errs = append(errs, "AGENTFS_MAX_PENDING_UPLOADS must be a positive whole number (or 0: no bound)")
		}
		c.Limits.MaxPendingUploads = int(min(pending, 1<<30))
	}
	var batchItems, batchWorkers, batchItemConcurrency int64
	check(parseCount(env("AGENTFS_BATCH_MAX_ITEMS", "1000"), "AGENTFS_BATCH_MAX_ITEMS", &batchItems))
	check(parseBytes(env("AGENTFS_BATCH_MAX_BYTES", "33554432"), "AGENTFS_BATCH_MAX_BYTES", &c.Limits.BatchMaxBytes))
	check(parseBytes(env("AGENTFS_BATCH_MAX_ITEM_BYTES", "1048576"), "AGENTFS_BATCH_MAX_ITEM_BYTES", &c.Limits.BatchMaxItemBytes))
	check(parseCount(env("AGENTFS_BATCH_WORKERS", "2"), "AGENTFS_BATCH_WORKERS", &batchWorkers))
	check(parseDuration(env("AGENTFS_BATCH_RESCUE_AFTER", "30s"), "AGENTFS_BATCH_RESCUE_AFTER", &c.BatchRescueAfter))
	check(parseCount(env("AGENTFS_BATCH_ITEM_CONCURRENCY", "8"), "AGENTFS_BATCH_ITEM_CONCURRENCY", &batchItemConcurrency))
	c.Limits.BatchMaxItems, c.BatchWorkers = int(batchItems), int(batchWorkers)
	c.BatchItemConcurrency = int(min(batchItemConcurrency, 1024))
	check(parseDuration(env("AGENTFS_IDEMPOTENCY_LEASE", "30s"), "AGENTFS_IDEMPOTENCY_LEASE", &c.Storage.IdempotencyLease))
	check(parseDuration(env("AGENTFS_UPLOAD_COMPLETE_LEASE", "30s"), "AGENTFS_UPLOAD_COMPLETE_LEASE", &c.Storage.UploadCompleteLease))
	c.Storage.TokenCacheTTL = -1 // "0": every request looks its token up
	if v := env("AGENTFS_TOKEN_CACHE_TTL", "10s"); v != "0" {
		check(parseDuration(v, "AGENTFS_TOKEN_CACHE_TTL", &c.Storage.TokenCacheTTL))
	}
	c.Storage.UploadHashWindow = -1 // "0": parts ahead of the running hash are read back at complete
	if v := env("AGENTFS_UPLOAD_HASH_WINDOW", "33554432"); v != "0" {
		check(parseBytes(v, "AGENTFS_UPLOAD_HASH_WINDOW", &c.Storage.UploadHashWindow))
	}
	var burst int64
	check(parseFloat(env("AGENTFS_RATE_LIMIT", "200"), "AGENTFS_RATE_LIMIT", &c.Limits.RatePerSecond))
	check(parseCount(env("AGENTFS_RATE_BURST", "400"), "AGENTFS_RATE_BURST", &burst))
	c.Limits.RateBurst = int(burst)
	var failBurst int64
	check(parseFloat(env("AGENTFS_AUTH_FAILURE_LIMIT", "10"), "AGENTFS_AUTH_FAILURE_LIMIT", &c.Limits.AuthFailuresPerSecond))
	check(parseCount(env("AGENTFS_AUTH_FAILURE_BURST", "100"), "AGENTFS_AUTH_FAILURE_BURST", &failBurst))
	c.Limits.AuthFailureBurst = int(min(failBurst, 1<<20))
	if v := env("AGENTFS_QUOTA_BYTES", "0"); v != "0" {
		check(parseBytes(v, "AGENTFS_QUOTA_BYTES", &c.Limits.QuotaBytes))
	}
	check(parseDuration(env("AGENTFS_QUOTA_WINDOW", "1h"), "AGENTFS_QUOTA_WINDOW", &c.Limits.QuotaWindow))
	check(parseDuration(env("AGENTFS_BODY_IDLE_TIMEOUT", "60s"), "AGENTFS_BODY_IDLE_TIMEOUT", &c.Limits.BodyIdleTimeout))
	var maxConns int64
	check(parseCount(env("AGENTFS_DB_MAX_CONNS", "32"), "AGENTFS_DB_MAX_CONNS", &maxConns))
	check(parseDuration(env("AGENTFS_DB_TIMEOUT", "10s"), "AGENTFS_DB_TIMEOUT", &c.Storage.DBTimeout))
	check(parseDuration(env("AGENTFS_S3_TIMEOUT", "30s"), "AGENTFS_S3_TIMEOUT", &c.Storage.S3Timeout))
	if v := env("AGENTFS_WRITE_IDLE_TIMEOUT", "60s"); v != "0" {
		check(parseDuration(v, "AGENTFS_WRITE_IDLE_TIMEOUT", &c.Limits.WriteIdleTimeout))
	}
	c.Storage.MaxConns = int32(min(maxConns, 10000))
	check(parseDuration(env("AGENTFS_BLOB_GRACE", "6h"), "AGENTFS_BLOB_GRACE", &c.BlobGrace))
	var maxVersions int64
	check(parseDuration(env("AGENTFS_VERSION_RETENTION", "720h"), "AGENTFS_VERSION_RETENTION", &c.Limits.VersionRetention))
	check(parseCount(env("AGENTFS_MAX_VERSIONS", "100"), "AGENTFS_MAX_VERSIONS", &maxVersions))
	c.Limits.MaxVersions = int(min(maxVersions, 1<<20))
	check(parseDuration(env("AGENTFS_EVENT_RETENTION", "720h"), "AGENTFS_EVENT_RETENTION", &c.Storage.EventRetention))
	c.Storage.MaxWaitersPerSubject = -1 // "0": no bound
	if v := env("AGENTFS_MAX_WAITERS_PER_SUBJECT", "100"); v != "0" {
		var waiters int64
		check(parseCount(v, "AGENTFS_MAX_WAITERS_PER_SUBJECT", &waiters))
		c.Storage.MaxWaitersPerSubject = int(min(waiters, 1<<20))
	}
	c.Limits.EventRetention = c.Storage.EventRetention
	check(parseDuration(env("AGENTFS_SWEEP_INTERVAL", "5m"), "AGENTFS_SWEEP_INTERVAL", &c.SweepInterval))
	c.Storage.PartSize = uint64(partSize)
	c.Limits.DeletedRetention = c.Storage.DeletedRetention
	c.Limits.IdempotencyRetention = c.Storage.IdempotencyRetention
	if c.Storage.DatabaseURL == "" {
		errs = append(errs, "AGENTFS_DATABASE_URL is required (e.g. postgres://agentfs@127.0.0.1:5432/agentfs)")
	}
	if c.Storage.S3Endpoint == "" {
		errs = append(errs, "AGENTFS_S3_ENDPOINT is required (host:port of the S3 server)")
	}
	if partSize != 0 && partSize < 5<<20 {
		errs = append(errs, "AGENTFS_S3_PART_SIZE must be at least 5 MiB")
	}
	if c.Storage.IdempotencyRetention < 24*time.Hour {
		errs = append(errs, "AGENTFS_IDEMPOTENCY_RETENTION must be at least 24h")
	}
	if c.Limits.UploadPartSize != 0 && c.Limits.UploadPartSize < 5<<20 {
		errs = append(errs, "AGENTFS_UPLOAD_PART_SIZE must be at least 5 MiB")
	}
	if c.Storage.IdempotencyLease < time.Second {
		errs = append(errs, "AGENTFS_IDEMPOTENCY_LEASE must be at least 1s")
	}
	if c.Storage.UploadCompleteLease < 3*time.Second {
		errs = append(errs, "AGENTFS_UPLOAD_COMPLETE_LEASE must be at least 3s")
	}
	if c.Limits.WriteIdleTimeout > 0 && c.Limits.WriteIdleTimeout <= c.Storage.S3Timeout {
		// A spliced chunk waits for S3 and for the client in one call; the
		// longer bound tells which of the two stalled.
		errs = append(errs, "AGENTFS_WRITE_IDLE_TIMEOUT must be longer than AGENTFS_S3_TIMEOUT (or 0)")
	}
	if c.FaultAfterCommit != "" && c.FaultAfterCommit != "exit" {
		errs = append(errs, "AGENTFS_FAULT_AFTER_COMMIT must be empty or exit")
	}
	if c.FaultMidComplete != "" && c.FaultMidComplete != "exit" {
		errs = append(errs, "AGENTFS_FAULT_MID_COMPLETE must be empty or exit")
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// recordKeys reads AGENTFS_RECORD_KEY, which agentfs serve requires: the
// key (or keys, the first sealing, during a rotation) that seals the
// secrets of recorded answers. It is the one secret that must not live
// in the database it protects, and every instance must hold the same one,
// so nothing generates it: a server without it refuses to start rather
// than keep secrets it could not replay, or keep them in the clear.
func recordKeys(getenv func(string) string) (*idempotency.RecordKeys, error) {
	v := strings.TrimSpace(getenv("AGENTFS_RECORD_KEY"))
	if v == "" {
		return nil, errors.New("configuration: AGENTFS_RECORD_KEY is required: 32 random bytes in base64, " +
			"the same on every instance (make one with: head -c 32 /dev/urandom | base64); it seals the secrets " +
			"kept in idempotency records, such as a share link's url (docs/operating.md)")
	}
	keys, err := idempotency.ParseRecordKeys(v)
	if err != nil {
		return nil, fmt.Errorf("configuration: AGENTFS_RECORD_KEY: %w", err)
	}
	return keys, nil
}

func parseBool(v, name string, dst *bool) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("%s must be true or false", name)
	}
	*dst = b
	return nil
}

func parseFloat(v, name string, dst *float64) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%s must be a number ≥ 0 (0 disables it)", name)
	}
	*dst = f
	return nil
}

func parseBytes(v, name string, dst *int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s must be a positive number of bytes", name)
	}
	*dst = n
	return nil
}

func parseCount(v, name string, dst *int64) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s must be a positive whole number", name)
	}
	*dst = n
	return nil
}

func parseDuration(v, name string, dst *time.Duration) error {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%s must be a positive duration such as 168h", name)
	}
	*dst = d
	return nil
}
