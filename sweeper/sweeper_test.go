package sweeper_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
	"github.com/agentfs/agentfs/sweeper"
	"github.com/agentfs/agentfs/telemetry/logtest"
)

// newLog is a logger whose lines, without their times, the test reads.
func newLog() (*slog.Logger, *logtest.Buffer) {
	b := &logtest.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	})), b
}

func sameLines(got, want []string) bool {
	return strings.Join(got, "\n") == strings.Join(want, "\n")
}

func TestOnce(t *testing.T) {
	t.Run("RunsEveryTaskAndLogsWhatEachDid", func(t *testing.T) {
		t.Parallel()
		log, logs := newLog()
		var ran []string
		task := func(name string, n int64, err error) sweeper.Task {
			return sweeper.Task{Name: name, Run: func(context.Context) (int64, error) {
				ran = append(ran, name)
				return n, err
			}}
		}
		sweeper.Once(context.Background(), log,
			task("first", 3, nil),
			task("broken", 0, errors.New("boom")),
			task("idle", 0, nil),
			task("half done", 4, errors.New("connection lost")),
			task("after", 2, nil),
		)
		if want := []string{"first", "broken", "idle", "half done", "after"}; !sameLines(ran, want) {
			t.Fatalf("ran %q, want every task in order %q", ran, want)
		}
		want := []string{
			`level=INFO msg=swept task=first removed=3`,
			`level=WARN msg="sweep failed" task=broken err=boom`,
			`level=WARN msg="sweep failed" task="half done" err="connection lost"`,
			`level=INFO msg=swept task=after removed=2`,
		}
		if got := logs.Take(); !sameLines(got, want) {
			t.Fatalf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("PassesItsContextToEachTask", func(t *testing.T) {
		t.Parallel()
		log, _ := newLog()
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, "mine")
		var got []any
		task := sweeper.Task{Name: "t", Run: func(ctx context.Context) (int64, error) {
			got = append(got, ctx.Value(key{}))
			return 0, nil
		}}
		sweeper.Once(ctx, log, task, task)
		if len(got) != 2 || got[0] != "mine" || got[1] != "mine" {
			t.Fatalf("tasks saw context values %v", got)
		}
	})
}

func TestRun(t *testing.T) {
	t.Run("RunsTheTasksEveryIntervalUntilItsContextEnds", func(t *testing.T) {
		t.Parallel()
		log, logs := newLog()
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		task := sweeper.Task{Name: "tick", Run: func(ctx context.Context) (int64, error) {
			select {
			case ran <- struct{}{}:
			case <-ctx.Done():
			}
			return 1, nil
		}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sweeper.Run(ctx, log, time.Millisecond, task)
		}()
		<-ran
		<-ran // it runs again: once per interval, not once
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second): // only a hang gets here
			t.Fatal("Run did not return after its context ended")
		}
		for _, line := range logs.Take() {
			if line != `level=INFO msg=swept task=tick removed=1` {
				t.Fatalf("logged %q", line)
			}
		}
	})

	t.Run("ReturnsAtOnceOnAnEndedContext", func(t *testing.T) {
		t.Parallel()
		log, _ := newLog()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ran := false
		sweeper.Run(ctx, log, time.Hour, sweeper.Task{Name: "never", Run: func(context.Context) (int64, error) {
			ran = true
			return 0, nil
		}})
		if ran {
			t.Fatal("a task ran after the context ended")
		}
	})
}

// TestTasks sweeps a real store in which one thing of each kind is due and
// one is not: each task removes exactly what is due, and a second sweep
// finds nothing.
func TestTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := storagetest.Config(t)
	store := storagetest.OpenConfig(t, cfg)
	past := func(sql string, args ...any) {
		t.Helper()
		if _, err := store.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("seed %q: %v", sql, err)
		}
	}

	// Idempotency records: one past its retention, one fresh.
	for _, key := range []string{"old", "fresh"} {
		recordKey(t, store, key)
	}
	past(`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'old'`)

	// Upload sessions: one past its expiry, one live.
	expired, live := openUpload(t, store, "expired.bin"), openUpload(t, store, "live.bin")
	past(`UPDATE uploads SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)

	// Deleted files: one past purge_after, one still kept; and a live file.
	purged, kept, alive := putFile(t, store, "purged.txt"), putFile(t, store, "kept.txt"), putFile(t, store, "alive.txt")
	deleteFile(t, store, purged.ID)
	deleteFile(t, store, kept.ID)
	past(`UPDATE files SET purge_after = now() - interval '1 second' WHERE id = $1`, purged.ID)

	// Files with an expiry: one past it, one not yet.
	expiring, notYet := putFile(t, store, "expiring.txt"), putFile(t, store, "not-yet.txt")
	past(`UPDATE files SET expires_at = now() - interval '1 second' WHERE id = $1`, expiring.ID)
	past(`UPDATE files SET expires_at = now() + interval '1 hour' WHERE id = $1`, notYet.ID)

	// Versions: a file replaced twice, whose first version was superseded
	// longer ago than the retention; the second is kept.
	first := putFile(t, store, "versioned.txt")
	replaceFile(t, store, "versioned.txt", "second")
	replaceFile(t, store, "versioned.txt", "third")
	past(`UPDATE file_versions SET superseded_at = now() - interval '800 hours' WHERE file_id = $1 AND version = 1`, first.ID)

	// Events: one older than the retention.
	past(`UPDATE events SET at = now() - interval '800 hours' WHERE file_id = $1 AND type = 'file.created'`, alive.ID)

	// Quota windows: one that ended more than an hour before the window, one
	// current.
	const window = time.Hour
	oldWindow, current := time.Now().Add(-3*window).Truncate(window), time.Now().Truncate(window)
	for _, start := range []time.Time{oldWindow, current} {
		if _, _, err := store.ReserveQuota(ctx, "s", start, 10, 1<<20, false); err != nil {
			t.Fatal(err)
		}
	}

	// A blob no row references.
	s3 := storagetest.S3(t, cfg)
	if _, err := s3.PutObject(ctx, cfg.S3Bucket, "blobs/orphan", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	log, logs := newLog()
	tasks := sweeper.Tasks(store, sweeper.Config{QuotaWindow: window, VersionRetention: 720 * time.Hour, MaxVersions: 100})
	sweeper.Once(ctx, log, tasks...)
	want := []string{
		`level=INFO msg=swept task="idempotency records" removed=1`,
		`level=INFO msg=swept task="expired uploads" removed=1`,
		`level=INFO msg=swept task="expired files" removed=1`,
		`level=INFO msg=swept task="purged deleted files" removed=1`,
		`level=INFO msg=swept task="old versions" removed=1`,
		`level=INFO msg=swept task="old events" removed=1`,
		`level=INFO msg=swept task="old quota windows" removed=1`,
		`level=INFO msg=swept task="unreferenced blobs" removed=2`,
	}
	if got := logs.Take(); !sameLines(got, want) {
		t.Fatalf("first sweep logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	if _, err := store.Operation(ctx, "s", "old"); !errors.Is(err, agentfs.ErrNotFound) {
		t.Errorf("the expired record survived: %v", err)
	}
	if _, err := store.Operation(ctx, "s", "fresh"); err != nil {
		t.Errorf("the fresh record was swept: %v", err)
	}
	for _, tc := range []struct {
		u    *agentfs.Upload
		want string
	}{{expired, agentfs.UploadExpired}, {live, agentfs.UploadPending}} {
		if u, err := store.Upload(ctx, "s", tc.u.ID); err != nil || u.Status != tc.want {
			t.Errorf("session %s: %v %v, want %s", tc.u.Path, u, err, tc.want)
		}
	}
	if _, err := store.File(ctx, "s", purged.ID); !errors.Is(err, agentfs.ErrNotFound) {
		t.Errorf("the file past purge_after survived: %v", err)
	}
	for _, f := range []*agentfs.File{kept, alive} {
		if _, err := store.File(ctx, "s", f.ID); err != nil {
			t.Errorf("%s was purged: %v", f.Path, err)
		}
	}
	for _, tc := range []struct {
		start time.Time
		want  int64
	}{{oldWindow, 0}, {current, 10}} {
		var n int64
		err := store.Pool().QueryRow(ctx, `SELECT coalesce(sum(bytes), 0) FROM quota_usage
			WHERE subject = 's' AND window_start = $1`, tc.start).Scan(&n)
		if err != nil || n != tc.want {
			t.Errorf("quota window %s: %d bytes (%v), want %d", tc.start, n, err, tc.want)
		}
	}
	if f, err := store.File(ctx, "s", expiring.ID); err != nil || f.DeletedAt == nil || !f.DeletedAt.Equal(*f.ExpiresAt) {
		t.Errorf("the expired file is not recorded deleted at its expiry: %+v %v", f, err)
	}
	if f, err := store.File(ctx, "s", notYet.ID); err != nil || f.DeletedAt != nil {
		t.Errorf("a file not yet expired was: %+v %v", f, err)
	}
	if _, err := store.Version(ctx, "s", first.ID, 1); !errors.Is(err, agentfs.ErrNotFound) {
		t.Errorf("the version past its retention survived: %v", err)
	}
	if _, err := store.Version(ctx, "s", first.ID, 2); err != nil {
		t.Errorf("the version within its retention was swept: %v", err)
	}
	keys := strings.Join(storagetest.ObjectKeys(t, cfg), " ")
	if strings.Contains(keys, "blobs/orphan") || strings.Contains(keys, purged.BlobKey) || strings.Contains(keys, first.BlobKey) {
		t.Errorf("an unreferenced blob survived: %s", keys)
	}
	for _, f := range []*agentfs.File{kept, alive} {
		if !strings.Contains(keys, f.BlobKey) {
			t.Errorf("the blob of %s was swept", f.Path)
		}
	}

	sweeper.Once(ctx, log, tasks...)
	if got := logs.Take(); len(got) != 0 {
		t.Fatalf("a second sweep found more to do:\n%s", strings.Join(got, "\n"))
	}
}

// TestTasksLeaveBlobsWithinTheirGrace proves the blob task passes its
// grace on: a blob younger than it stays.
func TestTasksLeaveBlobsWithinTheirGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := storagetest.Config(t)
	store := storagetest.OpenConfig(t, cfg)
	if _, err := storagetest.S3(t, cfg).PutObject(ctx, cfg.S3Bucket, "blobs/in-flight", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	log, logs := newLog()
	sweeper.Once(ctx, log, sweeper.Tasks(store, sweeper.Config{BlobGrace: time.Hour, QuotaWindow: time.Hour,
		VersionRetention: time.Hour, MaxVersions: 100})...)
	if got := logs.Take(); len(got) != 0 {
		t.Fatalf("swept within the grace:\n%s", strings.Join(got, "\n"))
	}
	if keys := storagetest.ObjectKeys(t, cfg); len(keys) != 1 {
		t.Fatalf("objects %v, want the blob in flight", keys)
	}
}

// recordKey completes a keyed request's record.
func recordKey(t *testing.T, store *storage.Store, key string) {
	t.Helper()
	ctx := context.Background()
	claim, _, err := store.BeginKey(ctx, "s", key, "POST", "/v1/files", []byte("request"), storage.KeyOrigin{})
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Close()
	err = store.WithTx(ctx, func(tx pgx.Tx) error {
		return claim.Complete(ctx, tx, []byte("content"), idempotency.Outcome{Status: 201, Body: []byte(`{}`)}, idempotency.Sealed{})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func openUpload(t *testing.T, store *storage.Store, path string) *agentfs.Upload {
	t.Helper()
	var u *agentfs.Upload
	err := store.WithTx(context.Background(), func(tx pgx.Tx) (err error) {
		u, _, err = store.CreateUploadTx(context.Background(), tx, agentfs.NewUpload{Subject: "s", Path: path,
			SizeBytes: 10, ContentType: "application/octet-stream", PartSize: agentfs.MinPartSize, TTL: time.Hour})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func putFile(t *testing.T, store *storage.Store, path string) *agentfs.File {
	t.Helper()
	ctx := context.Background()
	p, err := store.PreparePut(ctx, agentfs.Put{Subject: "s", Path: path, ContentType: "text/plain", Size: int64(len(path))},
		strings.NewReader(path))
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := p.CommitAlone(ctx, agentfs.Origin{})
	p.Finish(ctx, err)
	if err != nil || f == nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return f
}

func deleteFile(t *testing.T, store *storage.Store, id string) {
	t.Helper()
	err := store.WithTx(context.Background(), func(tx pgx.Tx) error {
		_, _, err := store.DeleteFileTx(context.Background(), tx, "s", id, "", agentfs.Origin{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// replaceFile replaces the live file at path with content, in a transaction
// as a keyed write would.
func replaceFile(t *testing.T, store *storage.Store, path, content string) *agentfs.File {
	t.Helper()
	ctx := context.Background()
	p, err := store.PreparePut(ctx, agentfs.Put{Subject: "s", Path: path, ContentType: "text/plain", Replace: true,
		Size: int64(len(content))}, strings.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	var f *agentfs.File
	err = store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		f, _, err = p.Apply(ctx, tx, agentfs.Origin{})
		return err
	})
	p.Finish(ctx, err)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
