package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/quota"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/sweeper"
	"github.com/agentfs/agentfs/telemetry"
)

// serveHelp is the help of agentfs serve.
const serveHelp = `Runs the HTTP API. Migrations are applied first (safe when several instances
start together); SIGINT or SIGTERM stops it gracefully, a second one at once.

Configuration comes from the environment. Required:
  AGENTFS_DATABASE_URL   Postgres URL, e.g. postgres://agentfs@127.0.0.1:5432/agentfs
  AGENTFS_S3_ENDPOINT    S3 host:port, with AGENTFS_S3_ACCESS_KEY and AGENTFS_S3_SECRET_KEY
  AGENTFS_RECORD_KEY     32 random bytes in base64, the same on every instance
                         (head -c 32 /dev/urandom | base64): seals the secrets
                         kept in idempotency records
Often set:
  AGENTFS_LISTEN_ADDR    default 127.0.0.1:8080
  AGENTFS_PUBLIC_URL     base of every file's url (default http:// + the listen address)
  AGENTFS_S3_BUCKET      default agentfs; created if missing
  AGENTFS_DB_TIMEOUT, AGENTFS_S3_TIMEOUT
                         bounds on each wait for Postgres (10s) and S3 (30s;
                         each S3 request is sent once, clients retry) before a 503
  OTEL_EXPORTER_OTLP_ENDPOINT
                         export traces over OTLP/HTTP, e.g. http://127.0.0.1:4318
                         (off when unset; docs/operating.md, "Observability")
Every variable, with its default and meaning, is in docs/operating.md.
agentfs healthcheck exits 0 once the server is ready.

Example:
  head -c 32 /dev/urandom | base64 > record.key   # once; keep it, share it
  AGENTFS_DATABASE_URL=postgres://agentfs@127.0.0.1:5432/agentfs \
  AGENTFS_S3_ENDPOINT=127.0.0.1:9000 AGENTFS_S3_ACCESS_KEY=minioadmin \
  AGENTFS_S3_SECRET_KEY=minioadmin AGENTFS_RECORD_KEY=$(cat record.key) agentfs serve
`

// serve runs the API until ctx is cancelled, then drains requests.
func serve(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	keys, err := recordKeys(getenv)
	if err != nil {
		return err
	}
	mcpOpts, err := mcpOptions(getenv)
	if err != nil {
		return err
	}
	tracing, err := telemetry.StartTracing(ctx, getenv, buildVersion())
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := telemetry.NewMetrics(reg)
	metrics.Instrument(&cfg.Storage)
	tracing.Instrument(&cfg.Storage)
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	metrics.WatchState(store, log)
	go sweeper.Run(ctx, log, cfg.SweepInterval, metrics.CountSweeps(sweeper.Tasks(store, sweeper.Config{
		BlobGrace: cfg.BlobGrace, QuotaWindow: cfg.Limits.QuotaWindow,
		VersionRetention: cfg.Limits.VersionRetention, MaxVersions: cfg.Limits.MaxVersions}))...)
	enqueuer, err := batch.NewEnqueuer(store.QueuePool(), log)
	if err != nil {
		return err
	}
	core, err := admission.New(admission.Config{Store: store, Queue: enqueuer, PublicURL: cfg.PublicURL, Log: log,
		AfterCommit: faultExit(cfg.FaultAfterCommit), MidComplete: faultExit(cfg.FaultMidComplete), Observer: metrics,
		RecordKeys: keys})
	if err != nil {
		return err
	}
	runner, err := batch.NewRunner(store, core, batch.Config{
		Workers: cfg.BatchWorkers, RescueAfter: cfg.BatchRescueAfter, ItemConcurrency: cfg.BatchItemConcurrency, Log: log})
	if err != nil {
		return err
	}
	if err := runner.Start(ctx); err != nil {
		return fmt.Errorf("start batch queue: %w", err)
	}
	toolCalls := mcpserver.NewCallCounter()
	reg.MustRegister(toolCalls)
	mcpOpts.OnCall, mcpOpts.Logger = mcpserver.CountCalls(toolCalls), log
	gate, err := reads.New(store, log)
	if err != nil {
		return err
	}
	rates := handlers.NewRateLimits(cfg.Limits.RatePerSecond, cfg.Limits.RateBurst)
	door, err := mcpserver.HTTPHandler(mcpserver.HTTPDeps{Core: core, Reads: gate, MaxUploadBytes: cfg.Limits.MaxUploadBytes,
		Quota: store, QuotaLimit: quota.Limit{Bytes: cfg.Limits.QuotaBytes, Window: cfg.Limits.QuotaWindow}, Rate: rates.Take}, mcpOpts)
	if err != nil {
		return err
	}
	api, err := handlers.New(handlers.Deps{
		Files: gate, Sessions: gate, Ledger: gate, Writes: core, Quota: store, Tokens: store, Health: store, Log: log,
		PublicURL: cfg.PublicURL, Limits: cfg.Limits, Registry: reg, Traces: tracing.Provider(),
		MCP: door, Rates: rates,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if cfg.PprofAddr != "" {
		if err := servePprof(ctx, cfg.PprofAddr, log); err != nil {
			return err
		}
	}
	srv.RegisterOnShutdown(store.Drain) // held long polls answer now
	log.Info("agentfs listening", "addr", ln.Addr().String(), "public_url", cfg.PublicURL)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("agentfs shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := runner.Stop(shutdownCtx); err != nil {
		return fmt.Errorf("stop batch queue: %w", err)
	}
	return nil
}

// servePprof serves the runtime profiles (net/http/pprof) on addr, a
// listener of their own, until ctx ends. They are never on the API's port.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Warn("pprof listening: profiles reveal internals, keep it on loopback", "addr", ln.Addr().String())
	return nil
}

// faultExit returns the fault-injection hook named by
// AGENTFS_FAULT_AFTER_COMMIT or AGENTFS_FAULT_MID_COMPLETE: "exit" dies like
// a killed process at that point (right after a keyed write committed,
// before its response is sent; in the middle of an upload's complete).
func faultExit(mode string) func() {
	if mode != "exit" {
		return nil
	}
	return func() { os.Exit(137) }
}

// openStore connects to Postgres and S3 and brings the schema up to date.
func openStore(ctx context.Context, cfg config) (*storage.Store, error) {
	store, err := storage.Open(ctx, cfg.Storage)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(cfg.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
