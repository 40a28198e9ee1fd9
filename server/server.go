// Package server wires AgentFS once: Postgres and S3, the admission core,
// the read gate, the batch runner, the sweeper, the /mcp door, telemetry
// and the HTTP API. agentfs serve and the test harness (handlers/apitest)
// both build their server with New, so the tests run what serve runs.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"

	"github.com/agentfs/agentfs/admission"
	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/quota"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/sweeper"
	"github.com/agentfs/agentfs/telemetry"
	"github.com/agentfs/agentfs/webhook"
)

// Server is AgentFS wired: its HTTP handler, and the background work that
// goes with it (the batch runner, the sweeper).
type Server struct {
	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *telemetry.Metrics
	tracing *telemetry.Tracing
	store   *storage.Store
	core    *admission.Core
	runner  *batch.Runner
	hooks   *webhook.Deliverer
	gate    *reads.Gate
	rates   *handlers.RateLimits
	api     *handlers.API
	sweeps  []sweeper.Task

	mu      sync.Mutex
	started bool // the runner runs; Close stops it
	stopped bool
}

// New connects to Postgres and S3, brings the schema up to date, and
// builds every part of the server on them. Nothing runs yet: Serve (or
// Start) runs it; Close releases it.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.RecordKeys == nil {
		return nil, cfg.errNoRecordKey()
	}
	if cfg.Log == nil {
		cfg.Log = cfg.Logs.Logger(os.Stderr)
	}
	cfg.handOver()
	s := &Server{cfg: cfg, log: cfg.Log, reg: prometheus.NewRegistry()}
	if err := s.open(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.wire(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// open starts the telemetry and opens the store, instrumented.
func (s *Server) open(ctx context.Context) error {
	if s.cfg.OTel != nil {
		tracing, err := telemetry.StartTracing(ctx, s.cfg.OTel, s.cfg.Version)
		if err != nil {
			return err
		}
		s.tracing = tracing
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = telemetry.NewMetrics(s.reg)
	storageCfg := s.cfg.Storage
	s.metrics.Instrument(&storageCfg)
	s.tracing.Instrument(&storageCfg)
	store, err := OpenStore(ctx, storageCfg)
	if err != nil {
		return err
	}
	s.store = store
	s.metrics.WatchState(store, s.log)
	s.metrics.WatchBlobCache(store.BlobCacheStats)
	return nil
}

// wire builds the parts on the store: the core, the batch runner, the read
// gate, the /mcp door and the API.
func (s *Server) wire() error {
	enqueuer, err := batch.NewEnqueuer(s.store.QueuePool(), s.log)
	if err != nil {
		return err
	}
	// The batch runner and the webhook deliverer are two River clients on
	// one set of tables: each must know the other's job kind, since the
	// one that leads runs the rescuer for both.
	hookCfg := s.cfg.Webhook
	hookCfg.Log, hookCfg.OtherKinds = s.log, []func(*river.Workers) error{batch.AddKind}
	if s.hooks, err = webhook.New(s.store, s.cfg.RecordKeys, hookCfg); err != nil {
		return err
	}
	s.core, err = admission.New(admission.Config{Store: s.store, Queue: enqueuer, Deliveries: s.hooks, PublicURL: s.cfg.PublicURL, Log: s.log,
		AfterCommit: faultExit(s.cfg.Faults.AfterCommit), MidComplete: faultExit(s.cfg.Faults.MidComplete),
		Observer: faultAfterItems(s.metrics, s.cfg.Faults.AfterItems), RecordKeys: s.cfg.RecordKeys,
		GroupMax: s.cfg.CommitGroupMax})
	if err != nil {
		return err
	}
	batchCfg := s.cfg.Batch
	batchCfg.Log, batchCfg.OtherKinds = s.log, []func(*river.Workers) error{webhook.AddKind}
	if s.runner, err = batch.NewRunner(s.store, s.core, batchCfg); err != nil {
		return err
	}
	var read reads.Store = s.store
	if s.cfg.ReadStore != nil {
		read = s.cfg.ReadStore(s.store)
	}
	if s.gate, err = reads.New(read, s.log); err != nil {
		return err
	}
	s.rates = handlers.NewRateLimits(s.cfg.Limits.RatePerSecond, s.cfg.Limits.RateBurst)
	door, err := s.door()
	if err != nil {
		return err
	}
	guard, err := mcpserver.NewGuard(s.cfg.PublicURL, s.cfg.MCPGuard)
	if err != nil {
		return err
	}
	deps := handlers.Deps{
		Files: s.gate, Sessions: s.gate, Ledger: s.gate, Search: s.gate, Delegation: s.gate, Points: s.gate, Webhooks: s.gate, Writes: s.core, Quota: s.store, Tokens: s.store, Health: s.store,
		Log: s.log, PublicURL: s.cfg.PublicURL, Limits: s.cfg.Limits, Registry: s.reg, Traces: s.tracing.Provider(),
		MCP: door, MCPGuard: guard.Handler, Rates: s.rates,
	}
	if s.cfg.OAuth.Issuer != "" {
		opts := s.cfg.OAuthOptions
		opts.Log = s.log
		if deps.OAuth, err = oauth.NewVerifier(s.cfg.OAuth, opts); err != nil {
			return err
		}
	}
	s.api, err = handlers.New(deps)
	if err != nil {
		return err
	}
	s.sweeps = s.metrics.CountSweeps(sweeper.Tasks(s.store, s.cfg.Sweeper))
	return nil
}

// door is the /mcp door: Config.MCPDoor, or the tools with Config.MCP,
// each call counted in /metrics.
func (s *Server) door() (http.Handler, error) {
	if s.cfg.MCPDoor != nil {
		return s.cfg.MCPDoor, nil
	}
	calls := mcpserver.NewCallCounter()
	s.reg.MustRegister(calls)
	opts := s.cfg.MCP
	opts.OnCall, opts.Logger = mcpserver.CountCalls(calls), s.log
	return s.NewDoor(opts)
}

// NewDoor makes a /mcp door on this server's core, read gate, byte quota
// and rate limits, with the tools' options opts.
func (s *Server) NewDoor(opts mcpserver.Options) (http.Handler, error) {
	l := s.cfg.Limits
	return mcpserver.HTTPHandler(mcpserver.HTTPDeps{Core: s.core, Reads: s.gate, MaxUploadBytes: l.MaxUploadBytes,
		Quota: s.store, QuotaLimit: quota.Limit{Bytes: l.QuotaBytes, Window: l.QuotaWindow}, Rate: s.rates.Take}, opts)
}

// Handler serves the API: the REST routes, /mcp, the share links, the
// health and metrics endpoints.
func (s *Server) Handler() http.Handler { return s.api }

// API is the handler as the contract tests look at it (its routes).
func (s *Server) API() *handlers.API { return s.api }

// Store is the server's store, for tests that look at rows and counters.
func (s *Server) Store() *storage.Store { return s.store }

// Core is the server's admission core.
func (s *Server) Core() *admission.Core { return s.core }

// Sweep runs every sweeper task once, counted in /metrics as the periodic
// sweeps are.
func (s *Server) Sweep(ctx context.Context) { sweeper.Once(ctx, s.log, s.sweeps...) }

// Start runs the background work until ctx ends: the batch runner, the
// search index's backfill of old files (storage.Store.KeepIndexing) and
// its mover of pending texts (storage.Store.KeepIndexingPending), and
// every sweeper task each Sweeper.Interval (none when it is 0). Serve
// calls it; a caller that serves Handler itself calls it once.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("server: started twice")
	}
	if err := s.runner.Start(ctx); err != nil {
		return fmt.Errorf("start batch queue: %w", err)
	}
	if err := s.hooks.Start(ctx); err != nil {
		return fmt.Errorf("start webhook delivery: %w", err)
	}
	s.started = true
	// Files written before the search index existed are indexed in the
	// background, resuming after a crash; search says so meanwhile.
	go s.store.KeepIndexing(ctx, s.log, time.Minute)
	// Texts that writes record pending go into the trigram index soon
	// after; they are searchable before (storage.Store.KeepIndexingPending).
	if s.cfg.Faults.Mover != "off" {
		go s.store.KeepIndexingPending(ctx, s.log, 2*time.Second)
	}
	if s.cfg.Sweeper.Interval > 0 {
		go sweeper.Run(ctx, s.log, s.cfg.Sweeper.Interval, s.sweeps...)
	}
	return nil
}

// stop stops the batch runner, once.
func (s *Server) stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.stopped {
		return nil
	}
	s.stopped = true
	if err := s.runner.Stop(ctx); err != nil {
		return fmt.Errorf("stop batch queue: %w", err)
	}
	if err := s.hooks.Stop(ctx); err != nil {
		return fmt.Errorf("stop webhook delivery: %w", err)
	}
	return nil
}

// Close stops what Start ran (if Serve did not), closes the store and
// flushes the traces not yet exported.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.stop(ctx); err != nil {
		s.log.Warn("close", "err", err)
	}
	if s.store != nil {
		s.store.Close()
	}
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelFlush()
	if err := s.tracing.Shutdown(flushCtx); err != nil {
		s.log.Warn("flush traces", "err", err)
	}
}

// OpenStore connects to Postgres and S3 and brings the schema up to date.
func OpenStore(ctx context.Context, cfg storage.Config) (*storage.Store, error) {
	store, err := storage.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// faultExit returns the fault-injection hook a Faults mode names: "exit"
// dies like a killed process at that point.
func faultExit(mode string) func() {
	if mode != "exit" {
		return nil
	}
	return func() { os.Exit(137) }
}

// faultAfterItems is obs, which dies like a killed process once n batch
// items were applied (n ≤ 0: obs alone).
func faultAfterItems(obs admission.Observer, n int) admission.Observer {
	if n <= 0 {
		return obs
	}
	return &itemFault{Observer: obs, left: int64(n)}
}

// itemFault counts applied batch items down to a crash.
type itemFault struct {
	admission.Observer
	left int64
	mu   sync.Mutex
}

func (f *itemFault) ItemOutcome(op, outcome string) {
	f.Observer.ItemOutcome(op, outcome)
	if outcome != admission.ItemApplied {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left--; f.left <= 0 {
		os.Exit(137)
	}
}

// Serve answers requests on ln, running the background work (Start),
// until ctx ends; then it shuts down gracefully: held long polls answer at
// once (storage's Drain), requests in flight get 30 s to finish, and the
// batch runner stops. Close still has to be called.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.cfg.PprofAddr != "" {
		if err := servePprof(ctx, s.cfg.PprofAddr, s.log); err != nil {
			return err
		}
	}
	srv.RegisterOnShutdown(s.store.Drain) // held long polls answer now
	s.log.Info("agentfs listening", "addr", ln.Addr().String(), "public_url", s.cfg.PublicURL)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("agentfs shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return s.stop(shutdownCtx)
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
