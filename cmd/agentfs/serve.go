package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/agentfs/agentfs/server"
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
  AGENTFS_S3_PUBLIC_ENDPOINT
                         the S3 service's root as clients reach it, e.g.
                         https://s3.example.com: content asked for with
                         redirect=true is then a 307 to a presigned URL
                         (AGENTFS_S3_PRESIGN_TTL, default 5m)
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
	cfg, err := server.Load(getenv)
	if err != nil {
		return err
	}
	cfg.Log, cfg.OTel, cfg.Version = cfg.Logs.Logger(stderr), getenv, buildVersion()
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return srv.Serve(ctx, ln)
}
