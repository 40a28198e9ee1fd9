package storage_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/storage"
	"github.com/agentfs/agentfs/storage/storagetest"
)

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

type testBundle struct {
	cfg storage.Config
}

func setup(t *testing.T) (*storage.Store, *testBundle) {
	t.Helper()
	t.Parallel()
	cfg := storagetest.Config(t)
	return storagetest.OpenConfig(t, cfg), &testBundle{cfg: cfg}
}

func put(path string, replace bool) agentfs.Put {
	return agentfs.Put{Subject: "s", Path: path, ContentType: "text/plain", Replace: replace, Size: -1,
		By: agentfs.Attribution{AgentID: "ag", RunID: "run"}}
}

// putResult is how a put ended.
type putResult struct {
	File    *agentfs.File
	Created bool
	// ContentSHA256 is the SHA-256 of the body once it was read whole, also
	// when the put failed afterwards; nil when it ended before the body.
	ContentSHA256 []byte
}

// commitMode is how a test commits a prepared put: the two ways the
// admission core does.
type commitMode string

const (
	// alone: one statement when nothing commits with the put (no key, no
	// batch item), a transaction when the state moved on.
	alone commitMode = "Alone"
	// inTx: a transaction, as for a keyed write or a batch item.
	inTx commitMode = "InTransaction"
)

// mustCreate creates path holding content, in mode.
func mustCreate(t *testing.T, store *storage.Store, path, content string, mode commitMode) putResult {
	t.Helper()
	res, err := putFile(context.Background(), store, put(path, false), strings.NewReader(content), mode)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// putFile prepares and commits a put the way the admission core does.
func putFile(ctx context.Context, store *storage.Store, put agentfs.Put, body io.Reader, mode commitMode) (putResult, error) {
	var res putResult
	p, err := store.PreparePut(ctx, put, body)
	if err != nil {
		return res, err
	}
	res.ContentSHA256 = p.Sum()
	if mode == alone {
		res.File, res.Created, err = p.CommitAlone(ctx, agentfs.Origin{})
	}
	if res.File == nil && err == nil {
		err = store.WithTxRetry(ctx, func(tx pgx.Tx) error {
			res.File, res.Created, err = p.Apply(ctx, tx, agentfs.Origin{})
			return err
		})
	}
	p.Finish(ctx, err)
	return res, err
}

func deleteFile(ctx context.Context, store *storage.Store, subject, id string) (*agentfs.File, error) {
	var f *agentfs.File
	err := store.WithTx(ctx, func(tx pgx.Tx) (err error) {
		f, _, err = store.DeleteFileTx(ctx, tx, subject, id, "", agentfs.Origin{})
		return err
	})
	return f, err
}

func TestPutFile(t *testing.T) {
	ctx := context.Background()

	t.Run("DecidesAgainInTheCommittingTransaction", func(t *testing.T) {
		store, b := setup(t)
		body := storagetest.OnFirstRead(strings.NewReader("late"), func() {
			if _, err := putFile(ctx, store, put("race.txt", false), strings.NewReader("early"), alone); err != nil {
				t.Errorf("concurrent put: %v", err)
			}
		})
		res, err := putFile(ctx, store, put("race.txt", false), body, alone)
		var exists *agentfs.PathExistsError
		if !errors.As(err, &exists) {
			t.Fatalf("err %v, want PathExistsError", err)
		}
		if sum := sha256.Sum256([]byte("late")); !bytes.Equal(res.ContentSHA256, sum[:]) {
			t.Fatalf("a put refused at commit must still report the content's hash, got %x", res.ContentSHA256)
		}
		if n := len(storagetest.ObjectKeys(t, b.cfg)); n != 1 {
			t.Fatalf("%d objects, want 1: the losing blob must be removed", n)
		}
	})

	t.Run("ReplaceOfAFileDeletedMidUploadCreatesANewFileAndRetags", func(t *testing.T) {
		store, _ := setup(t)
		old := mustCreate(t, store, "d.txt", "v1", alone).File
		body := storagetest.OnFirstRead(strings.NewReader("v2"), func() {
			if _, err := deleteFile(ctx, store, "s", old.ID); err != nil {
				t.Errorf("delete: %v", err)
			}
		})
		res, err := putFile(ctx, store, put("d.txt", true), body, alone)
		f, created := res.File, res.Created
		if err != nil || !created || f.ID == old.ID || f.Version != 1 {
			t.Fatalf("put after delete: %+v created=%v err=%v", f, created, err)
		}
		tags, err := store.BlobTags(ctx, f.BlobKey)
		if err != nil || tags["file-id"] != f.ID || tags["run-id"] != "run" {
			t.Fatalf("tags %v err %v, want file-id %s", tags, err, f.ID)
		}
	})

	t.Run("ReplaceSwitchesBlobsAtomically", func(t *testing.T) {
		store, _ := setup(t)
		v1 := mustCreate(t, store, "a.txt", "one", alone).File
		res, err := putFile(ctx, store, put("a.txt", true), strings.NewReader("two"), alone)
		v2, created := res.File, res.Created
		if err != nil || created || v2.ID != v1.ID || v2.BlobKey == v1.BlobKey || v2.Version != 2 {
			t.Fatalf("replace: %+v created=%v err=%v", v2, created, err)
		}
		// The superseded blob is still readable (until a sweep), so a reader
		// that started before the switch finishes whole.
		r, err := store.OpenBlob(ctx, v1.BlobKey, 0, v1.SizeBytes)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if b, err := io.ReadAll(r); err != nil || string(b) != "one" {
			t.Fatalf("old blob: %q %v", b, err)
		}
	})

	// A put with nothing to commit with it commits in one statement when the
	// state is the one it was decided against; a keyed one commits in a
	// transaction. Both must decide again when the state moved on while the
	// body streamed.
	for _, mode := range []commitMode{alone, inTx} {
		name := string(mode)
		t.Run("ReplaceRacingAReplace/"+name, func(t *testing.T) {
			store, b := setup(t)
			mustCreate(t, store, "r.txt", "v1", mode)
			body := storagetest.OnFirstRead(strings.NewReader("v3"), func() {
				if _, err := putFile(ctx, store, put("r.txt", true), strings.NewReader("v2"), mode); err != nil {
					t.Errorf("concurrent replace: %v", err)
				}
			})
			res, err := putFile(ctx, store, put("r.txt", true), body, mode)
			if err != nil || res.Created || res.File.Version != 3 || res.File.SHA256 != hex.EncodeToString(sha([]byte("v3"))) {
				t.Fatalf("replace after a replace: %+v err=%v, want version 3 holding v3", res.File, err)
			}
			if n := len(storagetest.ObjectKeys(t, b.cfg)); n != 3 {
				t.Fatalf("%d objects, want 3 (two superseded until a sweep)", n)
			}
		})

		t.Run("ReplaceOfAFileBlockedMidUpload/"+name, func(t *testing.T) {
			store, b := setup(t)
			res := mustCreate(t, store, "b.txt", "v1", mode)
			body := storagetest.OnFirstRead(strings.NewReader("v2"), func() {
				if _, err := store.BlockFile(ctx, res.File.ID, true, "legal hold"); err != nil {
					t.Errorf("block: %v", err)
				}
			})
			_, err := putFile(ctx, store, put("b.txt", true), body, mode)
			var blocked *agentfs.BlockedError
			if !errors.As(err, &blocked) || blocked.Reason != "legal hold" {
				t.Fatalf("err %v, want BlockedError", err)
			}
			if n := len(storagetest.ObjectKeys(t, b.cfg)); n != 1 {
				t.Fatalf("%d objects, want 1: the refused blob must be removed", n)
			}
		})

		t.Run("CreateRacingACreate/"+name, func(t *testing.T) {
			store, _ := setup(t)
			body := storagetest.OnFirstRead(strings.NewReader("late"), func() {
				if _, err := putFile(ctx, store, put("c.txt", false), strings.NewReader("early"), mode); err != nil {
					t.Errorf("concurrent put: %v", err)
				}
			})
			p := put("c.txt", true)
			res, err := putFile(ctx, store, p, body, mode)
			if err != nil || res.Created || res.File.Version != 2 {
				t.Fatalf("create-or-replace after a create: %+v created=%v err=%v, want a replace", res.File, res.Created, err)
			}
		})
	}

	t.Run("MissingBlobIsNotFound", func(t *testing.T) {
		store, _ := setup(t)
		for _, length := range []int64{0, 64 << 20} { // whole, and a read large enough for its own connection
			r, err := store.OpenBlob(ctx, "blobs/none", 0, length)
			if err == nil {
				_, err = r.Read(make([]byte, 1))
				r.Close()
			}
			if !errors.Is(err, agentfs.ErrNotFound) {
				t.Fatalf("length %d: err %v, want ErrNotFound", length, err)
			}
		}
	})

	t.Run("LargeReadsComeOverTheirOwnConnection", func(t *testing.T) {
		store, _ := setup(t)
		data := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
		res, err := putFile(ctx, store, put("big.bin", false), bytes.NewReader(data), alone)
		if err != nil {
			t.Fatal(err)
		}
		r, err := store.OpenBlob(ctx, res.File.BlobKey, 3, int64(len(data))-3)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, ok := r.(io.WriterTo); !ok {
			t.Fatalf("a large read is a %T, not one that can splice itself to the client", r)
		}
		var got bytes.Buffer
		if _, err := io.Copy(&got, r); err != nil || !bytes.Equal(got.Bytes(), data[3:]) {
			t.Fatalf("read %d bytes, err %v; want the stored bytes from offset 3", got.Len(), err)
		}
	})
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	tok, id, err := store.CreateToken(ctx, "alice", []string{"read"})
	if err != nil || !strings.HasPrefix(tok, "afs_") || !strings.HasPrefix(id, "tok_") {
		t.Fatalf("create: %q %q %v", tok, id, err)
	}
	p, err := store.Authenticate(ctx, tok)
	if err != nil || p.Subject != "alice" || !p.Can("read") || p.Can("write") {
		t.Fatalf("authenticate: %+v %v", p, err)
	}
	if _, err := store.Authenticate(ctx, tok+"x"); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("a wrong token: %v", err)
	}
	if err := store.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Authenticate(ctx, tok); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("a revoked token: %v", err)
	}
	if err := store.RevokeToken(ctx, "tok_unknown"); !errors.Is(err, agentfs.ErrNotFound) {
		t.Fatalf("revoking an unknown token: %v", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	stores := make([]*storage.Store, 4)
	for i := range stores {
		s, err := storage.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores[i] = s
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Migrate(context.Background())
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate: %v", err)
		}
	}
	if _, _, err := stores[0].CreateToken(context.Background(), "x", []string{"read"}); err != nil {
		t.Fatalf("schema unusable after concurrent migrations: %v", err)
	}
}

// TestABucketCheckThatFailsOnceIsTriedAgain: instances that start at once
// race to create a new bucket, and an S3 server may answer the check of a
// bucket another instance is creating with an internal error (versitygw
// does, "get bucket acl: no such key"). A proxy in front of the real S3
// server answers the first two checks so: the start still succeeds.
func TestABucketCheckThatFailsOnceIsTriedAgain(t *testing.T) {
	t.Parallel()
	cfg := storagetest.Config(t)
	target, err := url.Parse("http://" + cfg.S3Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && strings.Trim(r.URL.Path, "/") == cfg.S3Bucket && failed.Add(1) <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg.S3Endpoint = strings.TrimPrefix(srv.URL, "http://")
	s, err := storage.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate after %d failed bucket checks: %v", failed.Load(), err)
	}
	if failed.Load() < 3 {
		t.Fatalf("the bucket was checked %d times, want the two failures and a check that passed", failed.Load())
	}
}
