package telemetry

import (
	"io"
	"log/slog"
	"strings"
)

// Logs say how the server logs. The env tags name the variables agentfs
// serve reads them from (package envconfig).
type Logs struct {
	// Format is "text" (logfmt) or "json".
	Format string `env:"AGENTFS_LOG_FORMAT" envDefault:"text"`
	// Level is debug, info, warn or error; anything else is info.
	Level string `env:"AGENTFS_LOG_LEVEL" envDefault:"info"`
}

// Logger writes to w as l says.
func (l Logs) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(l.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
