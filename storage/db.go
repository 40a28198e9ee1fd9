// Package storage keeps AgentFS's state: metadata in Postgres (pgx) and file
// bytes in an S3-compatible object store (minio-go). It is the only package
// that speaks S3 and the only one that writes SQL; everything it returns is
// in the vocabulary of package agentfs. Writes that must commit together
// take the caller's transaction (the helpers named …Tx, and the Apply of a
// pending write); the admission core owns that transaction.
package storage

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/agentfs/agentfs"
)

//go:embed migrations/*.sql
var migrations embed.FS

// openPool connects to Postgres and checks that it answers.
// Each statement is bounded by statementTimeout (see statementBound) when
// bounded is set; pings of idle connections always are. observers hear
// every statement after the bound (Config.Tracers).
func openPool(ctx context.Context, url string, maxConns int32, statementTimeout time.Duration, bounded bool, observers ...pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	var tracers []pgx.QueryTracer
	if bounded {
		tracers = append(tracers, statementBound{limit: statementTimeout})
	}
	tracers = append(tracers, observers...)
	switch len(tracers) {
	case 0:
	case 1:
		cfg.ConnConfig.Tracer = tracers[0]
	default:
		// pgx takes one tracer. The bound comes first, so each observer
		// runs under the context that carries the statement's deadline.
		cfg.ConnConfig.Tracer = multitracer.New(tracers...)
	}
	cfg.PingTimeout = statementTimeout
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return pool, nil
}

// migrate applies every embedded migration not yet applied, each in its own
// transaction. A session advisory lock makes instances that start together
// take turns, so each migration runs once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return withMigrationLock(ctx, pool, "agentfs.migrate.", "migration", func(conn *pgx.Conn) error {
		return applyMigrations(ctx, conn)
	})
}

func applyMigrations(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := applyMigration(ctx, conn, name); err != nil {
			return err
		}
	}
	return nil
}

// migrateQueue brings the batch queue's tables (River's) up to date, under
// the same lock, so they migrate with ours.
func migrateQueue(ctx context.Context, pool *pgxpool.Pool) error {
	return withMigrationLock(ctx, pool, "agentfs.migrate.river.", "queue migration", func(*pgx.Conn) error {
		m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
		if err != nil {
			return fmt.Errorf("queue migrator: %w", err)
		}
		if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
			return fmt.Errorf("migrate queue: %w", err)
		}
		return nil
	})
}

// withMigrationLock runs fn on one connection while it holds the session
// advisory lock named name plus the schema, so that instances starting
// together take turns; what names the lock in errors.
func withMigrationLock(ctx context.Context, pool *pgxpool.Pool, name, what string, fn func(*pgx.Conn) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Translate(fmt.Errorf("acquire connection: %w", err))
	}
	defer conn.Release()
	const lock = `SELECT pg_advisory_lock(hashtext($1::text || current_schema()))`
	if _, err := conn.Exec(ctx, lock, name); err != nil {
		return Translate(fmt.Errorf("take %s lock: %w", what, err))
	}
	defer func() {
		const unlock = `SELECT pg_advisory_unlock(hashtext($1::text || current_schema()))`
		_, _ = conn.Exec(context.WithoutCancel(ctx), unlock, name)
	}()
	return fn(conn.Conn())
}

func applyMigration(ctx context.Context, conn *pgx.Conn, name string) error {
	base := strings.TrimPrefix(name, "migrations/")
	version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
	if err != nil {
		return fmt.Errorf("migration %s: name must start with a number", base)
	}
	sql, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&done); err != nil {
			return fmt.Errorf("check migration %s: %w", base, err)
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("apply migration %s: %w", base, err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, version, base)
		return err
	})
}

// Begin starts a transaction of the store's pool for a caller that owns it
// (the admission core): it hands tx down to the helpers that write in it
// (those named …Tx, and the Apply of a pending write) and ends it with
// Commit, or Rollback.
func (s *Store) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, Translate(fmt.Errorf("begin: %w", err))
	}
	return tx, nil
}

// Commit commits tx. A failure leaves it unknown whether the transaction
// took effect (CommitUncertain says so).
func Commit(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Commit(ctx); err != nil {
		return Translate(fmt.Errorf("%w: %w", errCommitUncertain, err))
	}
	return nil
}

// Rollback ends tx without committing it, also when ctx was cancelled; after
// Commit it does nothing.
func Rollback(ctx context.Context, tx pgx.Tx) { _ = tx.Rollback(context.WithoutCancel(ctx)) }

// RaceLost reports whether a transaction lost a race that deciding again
// resolves: a concurrent write took a live path between the decision and
// the insert, so a new attempt sees that file and decides against it.
func RaceLost(err error) bool { return uniqueViolation(err, "files_live_path") }

// WithTx runs fn in a transaction of the store's pool and commits it when
// fn returns nil. The caller owns the transaction and hands it down to the
// helpers that write in it (those named …Tx), so everything they write
// commits together or not at all.
func (s *Store) WithTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return withTx(ctx, s.pool, fn)
}

// WithTxRetry is WithTx run again, up to 3 more times, when the transaction
// lost a race that deciding again resolves (RaceLost).
func (s *Store) WithTxRetry(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := withTx(ctx, s.pool, fn)
		if !RaceLost(err) || attempt == 3 {
			return err
		}
	}
}

// withTx runs fn in a transaction and commits it when fn returns nil. The
// rollback on failure survives a cancelled request context.
func withTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return withTxOptions(ctx, pool, pgx.TxOptions{}, fn)
}

// withTxOptions is withTx for a transaction of these options.
func withTxOptions(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return Translate(fmt.Errorf("begin: %w", err))
	}
	defer Rollback(ctx, tx)
	if err := fn(tx); err != nil {
		return err
	}
	return Commit(ctx, tx)
}

// errCommitUncertain says a commit failed in a way that leaves unknown
// whether it took effect (the connection died on it): what the transaction
// referenced must not be removed; the sweeper decides later from the rows.
var errCommitUncertain = errors.New("commit outcome unknown")

// CommitUncertain reports whether err says a commit may or may not have
// taken effect: what it would have committed must be neither removed nor
// tried again as if it had not (a pending batch item is safe to run again:
// it applies only while still pending).
func CommitUncertain(err error) bool { return errors.Is(err, errCommitUncertain) }

// collect reads every row a query answered with scan; what names the
// query in its errors, which are translated (Translate).
func collect[T any](rows pgx.Rows, err error, what string, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	if err != nil {
		return nil, Translate(fmt.Errorf("%s: %w", what, err))
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, Translate(fmt.Errorf("%s: %w", what, err))
	}
	return out, nil
}

// scanOne reads the one row a query or a RETURNING answered with scan;
// what names the statement in its error.
func scanOne[T any](what string, scan func(pgx.Row) (T, error), row pgx.Row) (T, error) {
	v, err := scan(row)
	if err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// rowOf adapts a scan of one row (pgx.Row) to collect.
func rowOf[T any](scan func(pgx.Row) (T, error)) func(pgx.CollectableRow) (T, error) {
	return func(r pgx.CollectableRow) (T, error) { return scan(r) }
}

// Translate turns driver errors into the domain's: no rows is
// agentfs.ErrNotFound, a lost or refused connection is agentfs.ErrUnavailable.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", agentfs.ErrNotFound, err)
	}
	if unavailable(err) {
		return fmt.Errorf("%w: %w", agentfs.ErrUnavailable, err)
	}
	return err
}

func unavailable(err error) bool {
	var (
		pgErr   *pgconn.PgError
		connErr *pgconn.ConnectError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, agentfs.ErrUnavailable):
		return false // already translated
	case errors.As(err, &pgErr):
		// Connection exceptions, resource exhaustion, operator intervention.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") ||
			strings.HasPrefix(pgErr.Code, "57P")
	case errors.As(err, &connErr), errors.As(err, &netErr), pgconn.SafeToRetry(err), pgconn.Timeout(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// uniqueViolation reports whether err broke the named unique constraint.
func uniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

var idEncoding = base32.NewEncoding(agentfs.IDAlphabet).WithPadding(base32.NoPadding)

// NewID returns a random identifier with a type prefix, such as file_….
func NewID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// checkID is agentfs.ErrNotFound for an id no resource can have.
func checkID(id string) error {
	if !agentfs.WellFormedID("", id) {
		return fmt.Errorf("%w: malformed id", agentfs.ErrNotFound)
	}
	return nil
}

// filter gathers the conditions of a listing, each naming its arguments
// (pgx.NamedArgs), so a statement is built without counting parameters.
type filter struct {
	conds []string
	args  pgx.NamedArgs
}

func newFilter(cond string, args pgx.NamedArgs) *filter {
	return &filter{conds: []string{cond}, args: args}
}

// cond adds cond, whose arguments are already in the filter's.
func (f *filter) cond(cond string) {
	if cond != "true" {
		f.conds = append(f.conds, cond)
	}
}

// when adds cond, whose arguments are args, if on.
func (f *filter) when(on bool, cond string, args pgx.NamedArgs) {
	if !on {
		return
	}
	f.conds = append(f.conds, cond)
	for k, v := range args {
		f.args[k] = v
	}
}

// where is the conjunction of the conditions.
func (f *filter) where() string { return strings.Join(f.conds, " AND ") }
