package main

import (
	"context"

	"github.com/agentfs/agentfs/server"
	"github.com/agentfs/agentfs/storage"
)

// loadConfig reads the configuration every command that opens the store
// shares with serve (server.Load: each component's settings, by the env
// tags of its config struct).
func loadConfig(getenv func(string) string) (server.Config, error) { return server.Load(getenv) }

// openStore connects to Postgres and S3 and brings the schema up to date.
func openStore(ctx context.Context, cfg server.Config) (*storage.Store, error) {
	return server.OpenStore(ctx, cfg.Storage)
}
