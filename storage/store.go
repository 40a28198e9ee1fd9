package storage

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage/blobcache"
	"github.com/agentfs/agentfs/storage/hashwindow"
	"github.com/agentfs/agentfs/storage/pgnotify"
	"github.com/agentfs/agentfs/storage/splice"
	"github.com/agentfs/agentfs/storage/tokencache"
)

// Config says where the metadata and the bytes live. The env tags name the
// variables agentfs serve reads each setting from (package envconfig).
type Config struct {
	DatabaseURL string `env:"AGENTFS_DATABASE_URL"`
	S3Endpoint  string `env:"AGENTFS_S3_ENDPOINT"` // host:port
	S3AccessKey string `env:"AGENTFS_S3_ACCESS_KEY"`
	S3SecretKey string `env:"AGENTFS_S3_SECRET_KEY"`
	S3Bucket    string `env:"AGENTFS_S3_BUCKET" envDefault:"agentfs"`
	S3UseSSL    bool   `env:"AGENTFS_S3_USE_SSL" envDefault:"false"`
	S3Region    string `env:"AGENTFS_S3_REGION" envDefault:"us-east-1"`
	// S3PublicEndpoint is the S3 service as clients reach it, an http(s)
	// URL of its root (ParsePublicEndpoint); when set, a content request
	// with redirect=true is answered with a presigned URL there, valid for
	// PresignTTL (0: DefaultPresignTTL; at most 7 days), and the bytes skip
	// AgentFS. Unset, content always streams through AgentFS.
	S3PublicEndpoint string        `env:"AGENTFS_S3_PUBLIC_ENDPOINT"`
	PresignTTL       time.Duration `env:"AGENTFS_S3_PRESIGN_TTL" envDefault:"5m" envMin:"1s"`
	// DeletedRetention is how long a deleted file is kept before it is purged.
	DeletedRetention time.Duration `env:"AGENTFS_DELETED_RETENTION" envDefault:"168h"`
	// ForkMaxFiles bounds the files one fork copies (0: agentfs.MaxForkFiles):
	// a fork is one transaction, and the server holds a row of each source
	// file while it runs. A larger fork is refused with a 422 naming the
	// bound, before anything is written.
	ForkMaxFiles int `env:"AGENTFS_FORK_MAX_FILES" envDefault:"100000" envMin:"1" envMax:"10000000"`
	// PartSize bounds the memory minio-go uses per streamed upload whose size
	// is unknown; it buffers one part at a time.
	PartSize uint64 `env:"AGENTFS_S3_PART_SIZE" envDefault:"16777216" envMin:"5242880"`
	// MaxConns sizes the Postgres pool (0: 32). Each running batch holds one
	// connection for its lock and uses another for its items.
	MaxConns int32 `env:"AGENTFS_DB_MAX_CONNS" envDefault:"32" envMax:"10000"`
	// DBTimeout bounds each Postgres statement (0: 10 s); S3Timeout bounds
	// how long S3 may take to answer a request and how long it may stall
	// in the middle of a body (0: 30 s). Past either, the operation fails as
	// unavailable (503), so a dependency that hangs cannot pin requests.
	DBTimeout time.Duration `env:"AGENTFS_DB_TIMEOUT" envDefault:"10s"`
	S3Timeout time.Duration `env:"AGENTFS_S3_TIMEOUT" envDefault:"30s"`
	// IdempotencyLease is how long a claim on a key lives without renewal
	// (0: 30 s); a claim of a process that died is taken over after it.
	// IdempotencyRetention is how long recorded outcomes are kept (0: 7 days).
	IdempotencyLease     time.Duration `env:"AGENTFS_IDEMPOTENCY_LEASE" envDefault:"30s" envMin:"1s"`
	IdempotencyRetention time.Duration `env:"AGENTFS_IDEMPOTENCY_RETENTION" envDefault:"168h" envMin:"24h"`
	// EventRetention is how long events are kept (0: 720h); a cursor older
	// than that has expired.
	EventRetention time.Duration `env:"AGENTFS_EVENT_RETENTION" envDefault:"720h"`
	// WatchRetention is how long the resource subscriptions of an /mcp
	// session are kept after it was last seen (0: 24h): a session's
	// notification stream renews them while it is open.
	WatchRetention time.Duration `env:"AGENTFS_MCP_SUBSCRIPTION_TTL" envDefault:"24h" envMin:"1h"`
	// UploadCompleteLease is how long a complete holds its upload session
	// without renewal (0: 30 s); it is renewed every third of that while
	// the complete runs. A complete of a process that died frees the
	// session after it, and a request told to wait for a complete waits at
	// most that long. A part on its way holds its session for a third of
	// it (at least 1 s), renewed likewise.
	UploadCompleteLease time.Duration `env:"AGENTFS_UPLOAD_COMPLETE_LEASE" envDefault:"30s" envMin:"3s"`
	// Tracers hear every statement, batch, COPY and connection wait of
	// AgentFS's own pool (not the batch queue's), each after the statement
	// bound has set its deadline: metrics and traces, wired by server.New.
	Tracers []pgx.QueryTracer
	// S3Transport, when set, wraps the transport of every request the S3
	// client sends (metrics and traces). Large ranged reads that go over a
	// connection of their own (package splice) do not pass through it.
	S3Transport func(http.RoundTripper) http.RoundTripper
	// TokenCacheTTL is how long an instance trusts a token it looked up
	// (0: DefaultTokenCacheTTL; negative: it looks up every request's). A
	// revoked token is forgotten by every instance as soon as the
	// revocation commits (Postgres notifies them); the TTL only bounds an
	// instance whose notifications stopped without its noticing.
	TokenCacheTTL time.Duration `env:"AGENTFS_TOKEN_CACHE_TTL" envDefault:"10s" envZero:"-1: every request looks its token up"`
	// UploadHashWindow is how many bytes of upload parts that arrive ahead
	// of the running hash an instance keeps in memory at once, to fold them
	// into the hash when their turn comes instead of reading them back at
	// complete (0: DefaultUploadHashWindow; negative: none).
	UploadHashWindow int64 `env:"AGENTFS_UPLOAD_HASH_WINDOW" envDefault:"33554432" envZero:"-1: parts ahead are read back at complete"`
	// MaxWaitersPerSubject bounds the requests of one subject waiting for
	// events (GET /v1/events?wait=) on this instance at once (0:
	// DefaultMaxWaitersPerSubject; negative: no bound); past it
	// AwaitEvents fails with agentfs.ErrTooManyWaiters.
	MaxWaitersPerSubject int `env:"AGENTFS_MAX_WAITERS_PER_SUBJECT" envDefault:"100" envZero:"-1: no bound" envMax:"1048576"`
	// SearchMaxFileBytes is the largest file content search indexes and
	// searches (0: DefaultSearchMaxFileBytes; negative: none, so every
	// file counts as too large); larger ones are counted as skipped.
	SearchMaxFileBytes int64 `env:"AGENTFS_SEARCH_MAX_FILE_BYTES" envDefault:"1048576" envZero:"-1: nothing is indexed"`
	// SearchTimeout bounds one page of a search, in Postgres and in the
	// server (0: 10 s); past it the search fails as too broad.
	SearchTimeout time.Duration `env:"AGENTFS_SEARCH_TIMEOUT" envDefault:"10s"`
	// BlobCacheBytes bounds the bytes of small blobs an instance keeps in
	// memory to serve reads without S3 (package blobcache; 0: none, the
	// zero Config keeps none). A blob never changes once written, so the
	// cache is always correct; it is filled as a small file is uploaded
	// and as one is read from S3. BlobCacheMaxObject is the largest blob
	// it keeps (0: DefaultBlobCacheMaxObject).
	BlobCacheBytes     int64 `env:"AGENTFS_BLOB_CACHE_BYTES" envDefault:"67108864" envZero:"0: no cache"`
	BlobCacheMaxObject int64 `env:"AGENTFS_BLOB_CACHE_MAX_OBJECT" envDefault:"262144" envMax:"16777216"`
}

// DefaultBlobCacheMaxObject is the largest blob the blob cache keeps when
// Config.BlobCacheMaxObject is 0.
const DefaultBlobCacheMaxObject = 256 << 10

// DefaultSearchMaxFileBytes is the largest file search indexes when
// Config.SearchMaxFileBytes is 0.
const DefaultSearchMaxFileBytes = 1 << 20

// Store is the AgentFS state: a Postgres pool and an S3 bucket. It is safe
// for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	// queuePool is the batch queue's (River's) own: River puts its own
	// timeouts on most of its statements, and some of its maintenance
	// (REINDEX CONCURRENTLY) must not be cut short by DBTimeout.
	queuePool  *pgxpool.Pool
	s3         *minio.Client
	s3Long     *minio.Client // for operations S3 answers only when done (copy, complete)
	presigner  *minio.Client // signs URLs on the public endpoint; nil without one
	bucket     string
	cfg        Config
	notify     *pgnotify.Listener
	waiters    *eventWaiters      // requests waiting for events
	window     *hashwindow.Window // parts ahead of uploads' running hashes
	relay      *splice.Relay      // large reads, socket to socket
	tokens     *tokencache.Cache  // nil when Config.TokenCacheTTL is negative
	blobs      *blobcache.Cache   // nil when Config.BlobCacheBytes is 0
	tokensOnce sync.Once          // follows ChannelToken from the first lookup on
	counters   counters
	indexDone  atomic.Bool // the search index holds every file (IndexComplete)
	// moverWake tells KeepIndexingPending that a write recorded a text
	// pending (capacity 1: one wake stands for any number of writes).
	moverWake chan struct{}
	// searchHook, when set (tests), runs on a search's connection before
	// its first statement: a test makes that statement slow.
	searchHook func(ctx context.Context, tx pgx.Tx) error
	// searchKeys, when set (tests), replaces searchKeysMax (negative: a
	// search always walks the files in scope).
	searchKeys int
	// draining is closed by Drain: waits end early.
	draining  chan struct{}
	drainOnce sync.Once
}

// Drain ends every wait in progress and to come (?wait on events and
// batches) with what there is now, as if its time were up: a process
// shutting down answers its long polls at once instead of holding its
// shutdown for them. The callers poll again, elsewhere.
func (s *Store) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

// counters count work that tests and operators want to see happen, or not.
type counters struct {
	tokenLookups  atomic.Int64
	tokenHits     atomic.Int64
	readBackBytes atomic.Int64
	eventLooks    atomic.Int64
	searchByKeys  atomic.Int64
	searchWalks   atomic.Int64
}

// Counters are running totals of work an instance did, since it opened:
// they let tests and operators see that a cache or a shortcut works
// (never how long anything took).
type Counters struct {
	// TokenLookups is how many bearer tokens were looked up in Postgres;
	// TokenCacheHits how many were answered from the instance's cache.
	TokenLookups, TokenCacheHits int64
	// ReadBackBytes is how many bytes complete read back from S3 to learn
	// an upload's SHA-256, because the running hash did not cover them.
	ReadBackBytes int64
	// SlowSplices is how many times a chunk of a download relayed socket to
	// socket took longer than Config.S3Timeout yet moved bytes: a client
	// slower than that, or a relay that waited for bytes S3 had already
	// sent.
	SlowSplices int64
	// EventLooks is how many times a request waiting for events has looked
	// at the feed (counted as each look returns): once as it starts, then
	// once each time it was woken.
	EventLooks int64
	// BroadWakes is how many times a waiting request was woken without a
	// filter deciding it: the listener listened again after a lost
	// connection (what committed meanwhile was not heard), or a statement
	// inserted more events than a notification lists.
	BroadWakes int64
	// SearchByKeys is how many search pages read only the files that show
	// the blobs the trigram index found; SearchWalks how many walked the
	// files in scope because the index found too many or could not narrow
	// the pattern.
	SearchByKeys, SearchWalks int64
}

// Counters returns the running totals.
func (s *Store) Counters() Counters {
	return Counters{
		TokenLookups:   s.counters.tokenLookups.Load(),
		TokenCacheHits: s.counters.tokenHits.Load(),
		ReadBackBytes:  s.counters.readBackBytes.Load(),
		SlowSplices:    s.relay.SlowChunks(),
		EventLooks:     s.counters.eventLooks.Load(),
		BroadWakes:     s.waiters.broadWakes.Load(),
		SearchByKeys:   s.counters.searchByKeys.Load(),
		SearchWalks:    s.counters.searchWalks.Load(),
	}
}

// BlobCacheStats are the blob cache's totals (all zero without one).
func (s *Store) BlobCacheStats() blobcache.Stats { return s.blobs.Stats() }

// Open connects to Postgres and S3. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.DatabaseURL == "" || cfg.S3Endpoint == "" || cfg.S3Bucket == "" {
		return nil, errors.New("storage: database url, S3 endpoint and bucket are required")
	}
	cfg = cfg.withDefaults()
	s3, err := newS3(cfg, cfg.S3Timeout)
	if err != nil {
		return nil, err
	}
	// Server-side copies and multipart completes work in proportion to the
	// object's size before S3 answers; they get ten times the wait.
	s3Long, err := newS3(cfg, 10*cfg.S3Timeout)
	if err != nil {
		return nil, err
	}
	presigner, err := newPresigner(cfg)
	if err != nil {
		return nil, err
	}
	pool, err := openPool(ctx, cfg.DatabaseURL, cfg.MaxConns, cfg.DBTimeout, true, cfg.Tracers...)
	if err != nil {
		return nil, err
	}
	queuePool, err := openPool(ctx, cfg.DatabaseURL, 8, cfg.DBTimeout, false)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return withMechanisms(&Store{pool: pool, queuePool: queuePool, s3: s3, s3Long: s3Long, presigner: presigner, bucket: cfg.S3Bucket,
		cfg: cfg, draining: make(chan struct{})}), nil
}

// withMechanisms gives a store the mechanisms beneath it: the listener
// (package pgnotify) and its followers, the token cache (package
// tokencache) and the event waiters, the upload hash window (package
// hashwindow) and the splice relay (package splice).
func withMechanisms(st *Store) *Store {
	cfg := st.cfg
	st.notify = pgnotify.New(cfg.DatabaseURL)
	st.waiters = newEventWaiters(st.notify, cfg.MaxWaitersPerSubject)
	st.window = hashwindow.New(cfg.UploadHashWindow)
	st.relay = &splice.Relay{Idle: cfg.S3Timeout}
	st.moverWake = make(chan struct{}, 1)
	if cfg.TokenCacheTTL > 0 {
		st.tokens = tokencache.New(cfg.TokenCacheTTL, tokenCacheMax, time.Now)
	}
	st.blobs = blobcache.New(cfg.BlobCacheBytes, cfg.BlobCacheMaxObject)
	return st
}

// withDefaults fills in the settings left zero.
func (cfg Config) withDefaults() Config {
	orDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	orDuration(&cfg.DeletedRetention, 7*24*time.Hour)
	if cfg.ForkMaxFiles <= 0 {
		cfg.ForkMaxFiles = agentfs.MaxForkFiles
	}
	orDuration(&cfg.DBTimeout, 10*time.Second)
	orDuration(&cfg.S3Timeout, 30*time.Second)
	orDuration(&cfg.IdempotencyLease, 30*time.Second)
	orDuration(&cfg.UploadCompleteLease, 30*time.Second)
	orDuration(&cfg.IdempotencyRetention, 7*24*time.Hour)
	orDuration(&cfg.EventRetention, 720*time.Hour)
	orDuration(&cfg.SearchTimeout, 10*time.Second)
	orDuration(&cfg.PresignTTL, DefaultPresignTTL)
	if cfg.SearchMaxFileBytes == 0 {
		cfg.SearchMaxFileBytes = DefaultSearchMaxFileBytes
	}
	orDuration(&cfg.WatchRetention, 24*time.Hour)
	if cfg.PartSize == 0 {
		cfg.PartSize = 16 << 20
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 32
	}
	if cfg.TokenCacheTTL == 0 {
		cfg.TokenCacheTTL = DefaultTokenCacheTTL
	}
	if cfg.UploadHashWindow == 0 {
		cfg.UploadHashWindow = DefaultUploadHashWindow
	}
	if cfg.BlobCacheMaxObject <= 0 {
		cfg.BlobCacheMaxObject = DefaultBlobCacheMaxObject
	}
	if cfg.MaxWaitersPerSubject == 0 {
		cfg.MaxWaitersPerSubject = DefaultMaxWaitersPerSubject
	}
	return cfg
}

// newS3 is an S3 client that waits at most answerWait for S3 to start
// answering a request.
func newS3(cfg Config, answerWait time.Duration) (*minio.Client, error) {
	c, err := minio.New(cfg.S3Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
		Secure: cfg.S3UseSSL,
		Region: cfg.S3Region,
		// One attempt per request: an S3 that hangs is a 503 after one
		// wait, not after one per retry (each waits answerWait for the
		// answer to start). Clients retry, with backoff, across instances.
		MaxRetries: 1,
		Transport:  wrapTransport(cfg.S3Transport, s3Transport(cfg.S3UseSSL, cfg.S3Timeout, answerWait)),
	})
	if err != nil {
		return nil, fmt.Errorf("storage: s3 client: %w", err)
	}
	return c, nil
}

// wrapTransport applies Config.S3Transport, if any, to rt.
func wrapTransport(wrap func(http.RoundTripper) http.RoundTripper, rt http.RoundTripper) http.RoundTripper {
	if wrap == nil {
		return rt
	}
	return wrap(rt)
}

// s3Transport bounds how long S3 may take to connect, to take the bytes of
// a request and to start answering, so an S3 that hangs becomes a 503, not
// a stuck request.
func s3Transport(secure bool, limit, answerWait time.Duration) http.RoundTripper {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return writeBoundConn{Conn: c, limit: limit}, nil
		},
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: answerWait,
		DisableCompression:    true,
	}
	if secure {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return tr
}

// Close releases the database connections.
func (s *Store) Close() {
	s.notify.Close()
	s.pool.Close()
	s.queuePool.Close()
}

// Migrate brings the schema up to date and creates the bucket if missing.
// Several instances may call it at once.
func (s *Store) Migrate(ctx context.Context) error {
	ctx = unbounded(ctx) // building an index or waiting for another instance may take long
	if err := migrate(ctx, s.pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrateQueue(ctx, s.pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := s.ensureBucket(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Ping reports whether Postgres and the bucket both answer.
func (s *Store) Ping(ctx context.Context) error {
	pingCtx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout) // a ping is not a traced statement
	defer cancel()
	if err := s.pool.Ping(pingCtx); err != nil {
		return Translate(fmt.Errorf("ping postgres: %w", err))
	}
	ok, err := s.s3.BucketExists(ctx, s.bucket)
	if err != nil {
		return translateS3(fmt.Errorf("ping s3: %w", err))
	}
	if !ok {
		return fmt.Errorf("%w: bucket %s is missing", errUnavailable(), s.bucket)
	}
	return nil
}

// DeletedRetention is how long deleted files are kept.
func (s *Store) DeletedRetention() time.Duration { return s.cfg.DeletedRetention }

// Pool is the Postgres pool, for tests that inspect or seed rows.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// IdempotencyRetention is how long recorded outcomes are kept.
func (s *Store) IdempotencyRetention() time.Duration { return s.cfg.IdempotencyRetention }

// QueuePool is the pool the batch queue's client runs on. Work that must
// commit with AgentFS's own writes goes through Pool's transactions instead.
func (s *Store) QueuePool() *pgxpool.Pool { return s.queuePool }
