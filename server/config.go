package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentfs/agentfs/batch"
	"github.com/agentfs/agentfs/envconfig"
	"github.com/agentfs/agentfs/handlers"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/mcpserver"
	"github.com/agentfs/agentfs/oauth"
	"github.com/agentfs/agentfs/reads"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/sweeper"
	"github.com/agentfs/agentfs/telemetry"
	"github.com/agentfs/agentfs/webhook"
)

// Config is everything a server is made of: each component's settings,
// which Load reads from the environment (each field's env tag names its
// variable; docs/operating.md lists them all), and what its caller wires
// in. A setting two components use is owned by one of them and handed to
// the other by New: the retentions are the store's, the quota window and
// the version bounds the API's.
type Config struct {
	// ListenAddr is where agentfs serve listens; PublicURL the base of every
	// file's url, without a trailing slash (Load: http:// and ListenAddr
	// when unset).
	ListenAddr string `env:"AGENTFS_LISTEN_ADDR" envDefault:"127.0.0.1:8080"`
	PublicURL  string `env:"AGENTFS_PUBLIC_URL"`
	// PprofAddr, when set, serves net/http/pprof there (keep it on
	// loopback), on a listener of its own: for profiling only.
	PprofAddr string `env:"AGENTFS_PPROF_ADDR"`
	// CommitGroupMax is the most puts of one token that commit together
	// in one transaction when they arrive while its previous commit runs
	// (admission.Config.GroupMax; 1: each put commits alone).
	CommitGroupMax int `env:"AGENTFS_COMMIT_GROUP_MAX" envDefault:"64" envMin:"1" envMax:"1024"`

	Storage storage.Config
	Limits  handlers.Limits
	Batch   batch.Config
	Webhook webhook.Config
	Sweeper sweeper.Config
	// MCP are the options of the /mcp door's tools (Logger and OnCall are
	// New's).
	MCP mcpserver.Options
	// OAuth names the authorization server whose JWT access tokens are
	// taken beside AgentFS's (none when its Issuer is empty); OAuthOptions
	// are what New hands its verifier besides (tests set the clock and the
	// refetch interval; New sets the log).
	OAuth        oauth.Config
	OAuthOptions oauth.Options
	// MCPGuard names the further hosts and origins /mcp answers.
	MCPGuard mcpserver.GuardConfig
	Logs     telemetry.Logs
	// RecordKeys seal the secrets kept in idempotency records (a share
	// link's url): the one secret that must not live in the database it
	// protects, the same on every instance. New refuses to start without.
	RecordKeys *idempotency.RecordKeys `env:"AGENTFS_RECORD_KEY"`
	Faults     Faults

	// Log is where the server logs (nil: Logs, to stderr).
	Log *slog.Logger
	// OTel, when set, reads the standard OTEL_* variables that turn traces
	// on (telemetry.StartTracing); nil: no traces.
	OTel func(string) string
	// Version is the build's, reported with the traces.
	Version string
	// ReadStore, when set, wraps the store the read gate reads: tests
	// inject faults with it.
	ReadStore func(*storage.Store) reads.Store
	// MCPDoor, when set, is served at /mcp instead of the door New makes
	// from MCP: tests that make a door per session (NewDoor) use it.
	MCPDoor http.Handler
}

// Faults are fault-injection hooks, for the crash tests only: "exit" kills
// the process like a kill -9 at that point.
type Faults struct {
	// AfterCommit: after a keyed write committed, before its response.
	AfterCommit string `env:"AGENTFS_FAULT_AFTER_COMMIT"`
	// MidComplete: in the middle of an upload's complete (the session is
	// completing and assembled; nothing is committed).
	MidComplete string `env:"AGENTFS_FAULT_MID_COMPLETE"`
	// AfterItems, when positive: once this many batch items have been
	// applied, at the next one's end (its effect and status committed).
	AfterItems int `env:"AGENTFS_FAULT_AFTER_ITEMS" envZero:"0: never"`
	// Mover "off": this process never runs the mover of pending search
	// texts (storage.Store.KeepIndexingPending), so that a test can kill
	// it while texts it wrote are still pending.
	Mover string `env:"AGENTFS_FAULT_MOVER"`
}

// Load reads the configuration from getenv, filling in defaults, and
// refuses it naming every variable whose value does not fit. The record
// key is not required here (only serve needs it; New checks), so the
// commands that only open the store read their configuration with Load
// too.
func Load(getenv func(string) string) (Config, error) {
	var c Config
	var problems envconfig.Problems
	if err := envconfig.Read(getenv, &c); err != nil {
		if !errors.As(err, &problems) {
			return c, fmt.Errorf("configuration: %w", err)
		}
	}
	problems = append(problems, c.check()...)
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.ListenAddr
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if len(problems) > 0 {
		return c, fmt.Errorf("configuration: %w", problems)
	}
	return c, nil
}

// check is what no one variable's rules say.
func (c *Config) check() []string {
	name := func(field any) string { return envconfig.Name(c, field) }
	var out []string
	if c.Storage.DatabaseURL == "" {
		out = append(out, name(&c.Storage.DatabaseURL)+" is required (e.g. postgres://agentfs@127.0.0.1:5432/agentfs)")
	}
	if c.Storage.S3Endpoint == "" {
		out = append(out, name(&c.Storage.S3Endpoint)+" is required (host:port of the S3 server)")
	}
	if c.Limits.WriteIdleTimeout > 0 && c.Limits.WriteIdleTimeout <= c.Storage.S3Timeout {
		// A spliced chunk waits for S3 and for the client in one call; the
		// longer bound tells which of the two stalled.
		out = append(out, fmt.Sprintf("%s must be longer than %s (or 0)",
			name(&c.Limits.WriteIdleTimeout), name(&c.Storage.S3Timeout)))
	}
	if e := c.Storage.S3PublicEndpoint; e != "" {
		if _, err := storage.ParsePublicEndpoint(e); err != nil {
			out = append(out, name(&c.Storage.S3PublicEndpoint)+" must be the S3 service's root as clients reach it, http(s)://host[:port] without path, query or fragment: "+err.Error())
		}
	}
	if c.Storage.PresignTTL > 7*24*time.Hour {
		out = append(out, name(&c.Storage.PresignTTL)+" must be at most 168h (the longest a presigned URL may live)")
	}
	if c.OAuth.Issuer != "" {
		if err := oauth.CheckIssuer(c.OAuth.Issuer); err != nil {
			out = append(out, name(&c.OAuth.Issuer)+" must be the authorization server's issuer identifier, an absolute https (or http) URL without query or fragment")
		}
	}
	for _, f := range []*string{&c.Faults.AfterCommit, &c.Faults.MidComplete} {
		if *f != "" && *f != "exit" {
			out = append(out, name(f)+" must be empty or exit")
		}
	}
	if f := &c.Faults.Mover; *f != "" && *f != "off" {
		out = append(out, name(f)+" must be empty or off")
	}
	return out
}

// errNoRecordKey is New's answer to a configuration without record keys.
func (c *Config) errNoRecordKey() error {
	return fmt.Errorf("configuration: %s is required: 32 random bytes in base64, "+
		"the same on every instance (make one with: head -c 32 /dev/urandom | base64); it seals the secrets "+
		"kept in idempotency records, such as a share link's url (docs/operating.md)", envconfig.Name(c, &c.RecordKeys))
}

// handOver gives each component the settings another owns.
func (c *Config) handOver() {
	c.Limits.IdempotencyRetention = c.Storage.IdempotencyRetention
	c.Limits.DeletedRetention = c.Storage.DeletedRetention
	c.Limits.EventRetention = c.Storage.EventRetention
	c.Limits.WebhookAllowPrivate = c.Webhook.AllowPrivate
	c.Sweeper.QuotaWindow = c.Limits.QuotaWindow
	c.Sweeper.VersionRetention = c.Limits.VersionRetention
	c.Sweeper.MaxVersions = c.Limits.MaxVersions
}
