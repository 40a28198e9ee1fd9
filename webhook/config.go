// Package webhook delivers events to webhooks (DESIGN §23): one River job
// per webhook (unique, so two instances never deliver one webhook at
// once) follows the subject's event feed from the webhook's cursor and
// POSTs each matching event, signed the Standard Webhooks way, moving the
// cursor only after a 2xx. A failed attempt is retried on a configurable
// schedule (about a day by default), after which the webhook is disabled;
// a 410 disables it at once. The job, the cursor and the delivery log live
// in Postgres, so delivery continues, in order, after every instance was
// killed.
package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"
)

// Config tunes delivery. The env tags name the variables agentfs serve
// reads each setting from (package envconfig).
type Config struct {
	// AllowPrivate lifts the rule that receivers are https URLs on public
	// addresses (tests, private networks).
	AllowPrivate bool `env:"AGENTFS_WEBHOOK_ALLOW_PRIVATE" envDefault:"false"`
	// Timeout bounds one attempt, connecting included.
	Timeout time.Duration `env:"AGENTFS_WEBHOOK_TIMEOUT" envDefault:"10s"`
	// Retries are the waits after each failed attempt at an event; once
	// the last is spent and the attempt after it fails, the webhook is
	// disabled. The default spans about a day (27 h 35 min).
	Retries Schedule `env:"AGENTFS_WEBHOOK_RETRY_SCHEDULE" envDefault:"5s,5m,30m,2h,5h,10h,10h"`
	// Workers is how many webhooks this instance delivers to at once.
	Workers int `env:"AGENTFS_WEBHOOK_WORKERS" envDefault:"20" envMax:"10000"`
	// RescueAfter bounds how long a webhook whose instance died waits
	// before another instance continues its delivery (plus the queue's 30 s
	// rescue interval). A worker delivers in slices shorter than two thirds
	// of it, and hands the webhook on between them.
	RescueAfter time.Duration `env:"AGENTFS_WEBHOOK_RESCUE_AFTER" envDefault:"60s"`
	Log         *slog.Logger
	// OtherKinds register the job kinds other River clients on the same
	// tables run (batch.AddKind): whichever client leads runs River's
	// maintenance for all of them, and its rescuer discards a stuck job of
	// a kind it does not know instead of rescuing it.
	OtherKinds []func(*river.Workers) error
}

// Schedule is a list of waits, written "5s,5m,30m" (Go durations).
type Schedule []time.Duration

// UnmarshalText reads a schedule: Go durations separated by commas, each
// positive.
func (s *Schedule) UnmarshalText(text []byte) error {
	var out Schedule
	for _, part := range strings.Split(string(text), ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration such as 5s or 2h", strings.TrimSpace(part))
		}
		out = append(out, d)
	}
	if len(out) == 0 || len(out) > 100 {
		return errors.New("name 1 to 100 waits")
	}
	*s = out
	return nil
}

// String writes the schedule as UnmarshalText reads it.
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// withDefaults fills in what cfg left zero.
func (cfg Config) withDefaults() Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if len(cfg.Retries) == 0 {
		_ = cfg.Retries.UnmarshalText([]byte("5s,5m,30m,2h,5h,10h,10h"))
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 20
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 60 * time.Second
	}
	return cfg
}

// jobTimeout is how long one run of a webhook's job may take: River
// cancels it then, and rescues a job running longer than RescueAfter.
func (cfg Config) jobTimeout() time.Duration { return cfg.RescueAfter * 2 / 3 }

// slice is how long a run starts new attempts: an attempt started at its
// end still ends before the job's timeout.
func (cfg Config) slice() time.Duration {
	return max(cfg.jobTimeout()-cfg.Timeout-time.Second, time.Second)
}
