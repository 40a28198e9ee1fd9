// Package storagetest connects tests to the real Postgres and S3 servers
// that `make test` (scripts/test.sh) starts, giving each test its own
// Postgres schema and S3 bucket. A test run without those servers fails
// with a message that says how to start them; it never skips.
package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agentfs/agentfs/storage"
)

const howToStart = "start the test servers with `make test` (or `scripts/test.sh ./...`), " +
	"which exports AGENTFS_TEST_DATABASE_URL and AGENTFS_TEST_S3_ENDPOINT"

// Config returns a storage configuration of a fresh, empty schema and bucket
// on the test servers, removed when the test ends.
func Config(t testing.TB) storage.Config {
	t.Helper()
	dbURL := os.Getenv("AGENTFS_TEST_DATABASE_URL")
	endpoint := os.Getenv("AGENTFS_TEST_S3_ENDPOINT")
	if dbURL == "" || endpoint == "" {
		t.Fatalf("no test Postgres or S3 server: %s", howToStart)
	}
	name := "t" + randomHex(8)
	cfg := storage.Config{
		DatabaseURL:      withSearchPath(t, dbURL, name),
		S3Endpoint:       endpoint,
		S3AccessKey:      os.Getenv("AGENTFS_TEST_S3_ACCESS_KEY"),
		S3SecretKey:      os.Getenv("AGENTFS_TEST_S3_SECRET_KEY"),
		S3Bucket:         "agentfs-" + name,
		S3UseSSL:         os.Getenv("AGENTFS_TEST_S3_USE_SSL") == "true",
		S3Region:         envOr("AGENTFS_TEST_S3_REGION", "us-east-1"),
		DeletedRetention: 7 * 24 * time.Hour,
	}
	createSchema(t, dbURL, name)
	t.Cleanup(func() { removeBucket(t, cfg) })
	return cfg
}

// Open returns a migrated store on a fresh schema and bucket.
func Open(t testing.TB) *storage.Store {
	t.Helper()
	return OpenConfig(t, Config(t))
}

// OpenConfig opens and migrates a store with cfg, closed when the test ends.
func OpenConfig(t testing.TB, cfg storage.Config) *storage.Store {
	t.Helper()
	ctx := context.Background()
	store, err := storage.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open store: %v (%s)", err, howToStart)
	}
	t.Cleanup(store.Close)
	if err := store.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v (%s)", err, howToStart)
	}
	return store
}

func withSearchPath(t testing.TB, dbURL, schema string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("AGENTFS_TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func createSchema(t testing.TB, dbURL, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect to test Postgres: %v (%s)", err, howToStart)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Errorf("drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
}

// S3 returns a minio client of the test S3 server, for tests that look at
// objects directly.
func S3(t testing.TB, cfg storage.Config) *minio.Client {
	t.Helper()
	c, err := minio.New(cfg.S3Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
		Secure: cfg.S3UseSSL,
		Region: cfg.S3Region,
	})
	if err != nil {
		t.Fatalf("s3 client: %v", err)
	}
	return c
}

// ObjectKeys lists every object in the configuration's bucket.
func ObjectKeys(t testing.TB, cfg storage.Config) []string {
	t.Helper()
	var keys []string
	for obj := range S3(t, cfg).ListObjects(context.Background(), cfg.S3Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatalf("list objects: %v", obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func removeBucket(t testing.TB, cfg storage.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := S3(t, cfg)
	if ok, err := c.BucketExists(ctx, cfg.S3Bucket); err != nil || !ok {
		return
	}
	for obj := range c.ListObjects(ctx, cfg.S3Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err == nil {
			_ = c.RemoveObject(ctx, cfg.S3Bucket, obj.Key, minio.RemoveObjectOptions{})
		}
	}
	_ = c.RemoveBucket(ctx, cfg.S3Bucket)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Eventually waits until cond holds, checking it every 10 ms, and fails the
// test if it does not within timeout. It is for waiting on something
// another goroutine or process does (a renewal, a server starting), never
// for letting time pass: seed rows in the past for that.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
	}
}

// Exec runs one statement in the schema of cfg: tests use it to seed rows in
// the past (a lapsed lease, an expired session) instead of waiting.
func Exec(t testing.TB, cfg storage.Config, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v (%s)", err, howToStart)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}
