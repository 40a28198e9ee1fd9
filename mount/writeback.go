package mount

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentfs/agentfs/client"
)

// Write-back (Options.WriteBack): a close records the file's new content
// as a pending store in the cache directory and returns; a few
// workers send the pending stores, each with the same keyed, conditional
// replace a synchronous close sends. A program that closes one file after
// another (tar -x) then waits for the local disk, not for one store at a
// time.
//
// A pending store is two files in D/pending/: NAME.data, the content
// (the handle's stage, linked there; a later write on the same handle
// copies the stage first, so it cannot change the recorded content; no
// file for empty content), and NAME.json, its record (pendingRecord): the
// idempotency key, chosen at the close and kept, the path, the base it is
// conditional on, mode, mtime, kind, size and SHA-256. The record is
// written, in one write, before the close returns; a later change to it
// is a temporary file renamed over it.
// Neither is fsynced: what a close wrote is in the kernel's page cache,
// which outlives the mount process (a SIGKILL loses nothing closed), as a
// local filesystem's close does; an fsync waits for the store itself.
// After a crash of the machine a record may outlive its content: a
// replayed record whose content's size or SHA-256 differs is set aside in
// D/failed/, never sent. NAMEs sort in the order the closes recorded them, so
// a mount that starts on a cache directory holding records (an earlier
// mount was killed) sends them in order, under the same keys: a store that
// had committed replays its answer, never a second version.
//
// One file's stores go in order (a lane per file); anything that needs the
// file's stored state (open, fsync, setattr, rename, unlink, readlink)
// waits for its lane first. A store refused for good (a 4xx that a retry
// cannot change) moves its record to D/failed/ with the problem, is
// reported on stderr, and the file answers EIO from then on.

// pendingRecord is a pending store's record, NAME.json.
type pendingRecord struct {
	// Key is the store's idempotency key; the unconditional replace
	// after a refused condition has its own, recorded before it is sent.
	Key  string `json:"key"`
	Path string `json:"path"`
	// The condition: Create (If-None-Match: *), or If-Match BaseETag of
	// the version BaseID; AfterPrevious: the version the file's previous
	// pending store makes, filled in (and recorded) before it is sent;
	// Replace: unconditional.
	Create        bool   `json:"create,omitempty"`
	BaseID        string `json:"base_id,omitempty"`
	BaseETag      string `json:"base_etag,omitempty"`
	AfterPrevious bool   `json:"after_previous,omitempty"`
	Replace       bool   `json:"replace,omitempty"`

	Mode  int       `json:"mode"`
	MTime time.Time `json:"mtime"`
	Kind  string    `json:"kind"`
	Size  int64     `json:"size"`
	// SHA256 is the content's, checked before a replayed record is sent.
	SHA256 string `json:"sha256,omitempty"`
	// Problem is why the store was refused (in D/failed/ only).
	Problem string `json:"problem,omitempty"`
}

// pendingStore is one recorded store not sent yet.
type pendingStore struct {
	name string // NAME of NAME.json and NAME.data
	rec  pendingRecord
}

// lane is one file's pending stores, sent in order.
type lane struct {
	n    *fileNode // nil for a lane replayed at start
	q    []*pendingStore
	busy bool // queued for a worker, or being sent
	// last is a replayed lane's last stored version (a node's is its
	// metadata).
	last *client.File
	// failed is the refusal of one of the file's stores.
	failed error
}

// writeBack is the queue of pending stores and its workers.
type writeBack struct {
	fs        *filesystem
	dir       string // D/pending
	failedDir string // D/failed
	lock      *os.File

	mu      sync.Mutex
	changed *sync.Cond // on every change below
	ready   []*lane    // lanes with a store to send and no worker on them
	pending int        // stores recorded and neither stored nor refused
	refused int        // stores refused since the mount started
	closed  bool
	seq     int64 // the last NAME's number
}

// DefaultWriteBackWorkers is how many pending stores are sent at once:
// the server commits a token's puts that arrive together in one
// transaction, so more at once cost it less each (untar of src/net into
// the mount, until stored: 2.2–2.7 s with 16, 3.0–3.3 s with 4).
const DefaultWriteBackWorkers = 16

// openWriteBack takes the cache directory's lock (one write-back mount a
// cache directory) and starts the workers.
func openWriteBack(fsys *filesystem, cache string, workers int) (*writeBack, error) {
	wb := &writeBack{fs: fsys, dir: filepath.Join(cache, "pending"), failedDir: filepath.Join(cache, "failed"), seq: time.Now().UnixNano()}
	wb.changed = sync.NewCond(&wb.mu)
	for _, d := range []string{wb.dir, wb.failedDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("mount: cache dir: %w", err)
		}
	}
	lockPath := filepath.Join(cache, "lock")
	l, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mount: cache dir: %w", err)
	}
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		l.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("mount: the cache dir %s is in use by another write-back mount (%s is locked); give each mount its own --cache-dir", cache, lockPath)
		}
		return nil, fmt.Errorf("mount: lock %s: %w", lockPath, err)
	}
	wb.lock = l
	if workers <= 0 {
		workers = DefaultWriteBackWorkers
	}
	for range workers {
		go wb.work()
	}
	return wb, nil
}

// pendingNames are the records in dir, in the order they were made;
// content files without a record (a close that did not return) and
// temporary records are removed.
func pendingNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	records := map[string]bool{}
	var names []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			records[name] = true
			names = append(names, name)
		}
	}
	for _, e := range ents {
		name, isData := strings.CutSuffix(e.Name(), ".data")
		if isData && records[name] || strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
	sort.Strings(names)
	return names, nil
}

// CountPending is how many pending stores the cache directory holds.
func CountPending(cache string) int {
	ents, _ := os.ReadDir(filepath.Join(cache, "pending"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			n++
		}
	}
	return n
}

// replay sends the stores an earlier mount of the cache directory left
// pending, each file's in order, and waits for them.
func (wb *writeBack) replay() error {
	names, err := pendingNames(wb.dir)
	if err != nil {
		return fmt.Errorf("mount: cache dir: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "agentfs mount: storing %d files an earlier mount of this cache dir closed and did not store\n", len(names))
	lanes := map[string]*lane{}
	wb.mu.Lock()
	for _, name := range names {
		p := &pendingStore{name: name}
		b, err := os.ReadFile(filepath.Join(wb.dir, name+".json"))
		if err == nil {
			err = json.Unmarshal(b, &p.rec)
		}
		if err == nil && p.rec.Path == "" {
			err = errors.New("no path")
		}
		if err == nil {
			err = checkContent(filepath.Join(wb.dir, name+".data"), p.rec)
		}
		if err != nil {
			// Not a record this mount wrote whole, or content that did
			// not reach the disk with it (the machine crashed): set it
			// aside, keep the rest.
			for _, ext := range []string{".json", ".data"} {
				_ = os.Rename(filepath.Join(wb.dir, name+ext), filepath.Join(wb.failedDir, name+ext))
			}
			fmt.Fprintf(os.Stderr, "agentfs mount: pending store %s is unreadable (%v): moved to %s\n", name, err, wb.failedDir)
			continue
		}
		l := lanes[p.rec.Path]
		if l == nil {
			l = &lane{}
			lanes[p.rec.Path] = l
		}
		wb.add(l, p)
	}
	wb.mu.Unlock()
	return wb.settle(context.Background())
}

// add queues p on its lane; wb.mu is held.
func (wb *writeBack) add(l *lane, p *pendingStore) {
	l.q = append(l.q, p)
	wb.pending++
	if !l.busy {
		l.busy = true
		wb.ready = append(wb.ready, l)
	}
	wb.changed.Broadcast()
}

// work sends the pending stores of the lanes ready, one at a time.
func (wb *writeBack) work() {
	for {
		wb.mu.Lock()
		for len(wb.ready) == 0 && !wb.closed {
			wb.changed.Wait()
		}
		if len(wb.ready) == 0 {
			wb.mu.Unlock()
			return
		}
		l := wb.ready[0]
		wb.ready = wb.ready[1:]
		p := l.q[0]
		wb.mu.Unlock()

		wb.send(l, p)

		wb.mu.Lock()
		l.q = l.q[1:]
		wb.pending--
		if len(l.q) > 0 {
			wb.ready = append(wb.ready, l)
		} else {
			l.busy = false
		}
		wb.changed.Broadcast()
		wb.mu.Unlock()
	}
}

// send stores p, retrying what may succeed later (the client's retry
// policy first, then with a growing pause), until it is stored or
// refused.
func (wb *writeBack) send(l *lane, p *pendingStore) {
	for attempt := 0; ; attempt++ {
		f, err := wb.storeOnce(l, p)
		if err == nil {
			wb.stored(l, p, f)
			return
		}
		if permanent(err) {
			wb.refuse(l, p, err)
			return
		}
		pause := min(time.Second<<min(attempt, 5), 30*time.Second)
		fmt.Fprintf(os.Stderr, "agentfs mount: store %s: %v (trying again in %s)\n", p.rec.Path, err, pause)
		time.Sleep(pause)
	}
}

// localError is a failure of the cache directory itself: no retry mends it.
type localError struct{ err error }

func (e localError) Error() string { return "cache dir: " + e.err.Error() }
func (e localError) Unwrap() error { return e.err }

// permanent reports whether err is a refusal a retry cannot change: a 4xx
// other than 408, 412, 425 and 429 that the problem does not call
// retryable (a 409 OPERATION_IN_PROGRESS is; IDEMPOTENCY_CONFLICT, the key
// used by another request, is not), or the cache directory's failure.
func permanent(err error) bool {
	var le localError
	if errors.As(err, &le) {
		return true
	}
	var p *client.Problem
	if !errors.As(err, &p) || p.Retryable {
		return false
	}
	switch p.Status {
	case 408, 412, 425, 429:
		return false
	}
	return p.Status >= 400 && p.Status < 500
}

// storeOnce sends p once (the client retries within).
func (wb *writeBack) storeOnce(l *lane, p *pendingStore) (*client.File, error) {
	rec := &p.rec
	if rec.AfterPrevious {
		cur := l.last
		if l.n != nil {
			cur = l.n.current()
		}
		rec.AfterPrevious = false
		if cur != nil {
			rec.BaseID, rec.BaseETag = cur.ID, cur.ETag
		} else {
			rec.Create = true
		}
		if err := writeRecord(wb.dir, p.name, rec); err != nil {
			return nil, localError{err}
		}
	}
	content, err := openContent(filepath.Join(wb.dir, p.name+".data"), rec.Size)
	if err != nil {
		return nil, localError{err}
	}
	if content != nil {
		defer content.Close()
	}
	opts := client.PutOptions{Mode: &rec.Mode, MTime: &rec.MTime, Kind: rec.Kind, IdempotencyKey: rec.Key}
	switch {
	case rec.Replace:
		opts.Replace = true
	case rec.Create:
		opts.IfNoneMatchAny = true
	default:
		opts.Replace, opts.IfMatch = true, rec.BaseETag
	}
	f, err := wb.fs.put(context.Background(), rec.Path, content, opts, func(o *client.PutOptions) error {
		if rec.Kind == "directory" {
			return errMarkerExists // another door made the folder: it is there, as mkdir wanted
		}
		rec.Replace, rec.Key = true, wb.fs.key()
		o.IdempotencyKey = rec.Key
		if err := writeRecord(wb.dir, p.name, rec); err != nil {
			return localError{err}
		}
		return nil
	})
	if errors.Is(err, errMarkerExists) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// errMarkerExists says a folder's marker was there already when a pending
// mkdir was sent.
var errMarkerExists = errors.New("the folder's marker exists")

// recordFolder is a mkdir in write-back: the folder's marker (DESIGN §21:
// it keeps an empty folder) is recorded as a pending store of its own and
// sent by a worker, as a closed file is; the folder is there in the mount
// at once.
func (wb *writeBack) recordFolder(remote string, mode int) syscall.Errno {
	name := wb.nextName()
	empty := sha256.Sum256(nil)
	rec := pendingRecord{Key: wb.fs.key(), Path: remote, Create: true, Mode: mode, Kind: "directory", MTime: time.Now(),
		SHA256: hex.EncodeToString(empty[:])}
	if err := createRecord(wb.dir, name, &rec); err != nil {
		fmt.Fprintf(os.Stderr, "agentfs mount: record the folder %s in the cache dir: %v\n", remote, err)
		return syscall.EIO
	}
	wb.mu.Lock()
	wb.add(&lane{}, &pendingStore{name: name, rec: rec})
	wb.mu.Unlock()
	return 0
}

// stored ends p, stored as f (nil: a folder's marker that was there): its record goes, its content becomes the
// read cache's (as a synchronous close's stage does), and the file's
// metadata is f.
func (wb *writeBack) stored(l *lane, p *pendingStore, f *client.File) {
	os.Remove(filepath.Join(wb.dir, p.name+".json"))
	data := filepath.Join(wb.dir, p.name+".data")
	if f == nil {
		os.Remove(data)
		return
	}
	if f.SizeBytes > chunkSize {
		if c, err := os.Open(data); err == nil {
			wb.fs.keepContent(c, f)
			c.Close()
		}
	}
	wb.fs.keepStage(data, f, false)
	if l.n == nil {
		l.last = f
		return
	}
	l.n.setMeta(f)
	l.n.mu.Lock()
	if l.n.pendingN--; l.n.pendingN == 0 {
		if s := l.n.shown; s != nil {
			l.n.wrote = &wroteVersion{version: f.Version, ctime: s.ctime}
		}
		l.n.shown = nil
	}
	l.n.mu.Unlock()
}

// refuse ends p, refused for good: its record, with the problem, and its
// content move to D/failed/, stderr says so, and the file answers EIO.
func (wb *writeBack) refuse(l *lane, p *pendingStore, err error) {
	p.rec.Problem = err.Error()
	where := filepath.Join(wb.failedDir, p.name+".data")
	if werr := createRecord(wb.failedDir, p.name, &p.rec); werr == nil {
		_ = os.Rename(filepath.Join(wb.dir, p.name+".data"), where)
		os.Remove(filepath.Join(wb.dir, p.name+".json"))
	} else {
		where = filepath.Join(wb.dir, p.name+".data")
	}
	fmt.Fprintf(os.Stderr, "agentfs mount: %s was closed but not stored: %v; its content is kept in %s\n", p.rec.Path, err, where)
	wb.mu.Lock()
	wb.refused++
	l.failed = err
	wb.mu.Unlock()
	if l.n != nil {
		l.n.mu.Lock()
		if l.n.pendingN--; l.n.pendingN == 0 {
			l.n.shown = nil
		}
		l.n.mu.Unlock()
	}
}

// openContent opens the pending content at path; nil when it is empty
// (no file is made for a folder's marker or an empty file).
func openContent(path string, size int64) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && size == 0 {
		return nil, nil
	}
	return f, err
}

// checkContent says whether the pending content at path is the one rec
// records (its size, and its SHA-256 when recorded).
func checkContent(path string, rec pendingRecord) error {
	f, err := openContent(path, rec.Size)
	if f == nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	switch {
	case err != nil:
		return err
	case n != rec.Size:
		return fmt.Errorf("its content has %d bytes, its record says %d", n, rec.Size)
	case rec.SHA256 != "" && hex.EncodeToString(h.Sum(nil)) != rec.SHA256:
		return errors.New("its content's SHA-256 is not the one its record says")
	}
	return nil
}

// createRecord writes the new record rec as dir/name.json, with one
// write to a file made for it (a record is a few hundred bytes, within
// one page): a process killed meanwhile leaves no record or an empty one,
// for a close that had not returned (replay sets an empty one aside).
func createRecord(dir, name string, rec *pendingRecord) error {
	return newRecordFile(filepath.Join(dir, name+".json"), rec)
}

// writeRecord writes rec over dir/name.json: a temporary file renamed, so
// a reader finds the record whole, old or new.
func writeRecord(dir, name string, rec *pendingRecord) error {
	tmp := filepath.Join(dir, name+".json.tmp")
	os.Remove(tmp) // one a killed mount left
	err := newRecordFile(tmp, rec)
	if err == nil {
		if err = os.Rename(tmp, filepath.Join(dir, name+".json")); err != nil {
			os.Remove(tmp)
		}
	}
	return err
}

// newRecordFile writes rec, in one write, to a new file at path; the file
// goes again when that fails.
func newRecordFile(path string, rec *pendingRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// laneOf is n's lane; wb.mu is held.
func (wb *writeBack) laneOf(n *fileNode) *lane {
	if n.lane == nil {
		n.lane = &lane{n: n}
	}
	return n.lane
}

// wait waits until n has no pending store; EIO when one was refused.
func (wb *writeBack) wait(n *fileNode) syscall.Errno {
	if wb == nil || n == nil {
		return 0
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for n.lane != nil && len(n.lane.q) > 0 {
		wb.changed.Wait()
	}
	if n.lane != nil && n.lane.failed != nil {
		return syscall.EIO
	}
	return 0
}

// waitAll waits until nothing is pending (a folder's rename or rmdir).
func (wb *writeBack) waitAll() {
	if wb == nil {
		return
	}
	_ = wb.settle(context.Background())
}

// settle waits until nothing is pending, or ctx ends.
func (wb *writeBack) settle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		wb.mu.Lock()
		wb.changed.Broadcast()
		wb.mu.Unlock()
	})
	defer stop()
	wb.mu.Lock()
	defer wb.mu.Unlock()
	for wb.pending > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		wb.changed.Wait()
	}
	return nil
}

// count is how many stores are pending.
func (wb *writeBack) count() int {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	return wb.pending
}

// drain stores what is pending before the mount ends, saying so, then
// stops the workers and lets the cache directory go.
func (wb *writeBack) drain() {
	if n := wb.count(); n > 0 {
		fmt.Fprintf(os.Stderr, "agentfs mount: storing %d files before unmounting\n", n)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := wb.settle(ctx)
			cancel()
			if err == nil {
				break
			}
			fmt.Fprintf(os.Stderr, "agentfs mount: %d files still to store\n", wb.count())
		}
	}
	wb.mu.Lock()
	wb.closed = true
	wb.changed.Broadcast()
	wb.mu.Unlock()
	wb.lock.Close()
}

// nextName is a new pending store's NAME: after every earlier one.
func (wb *writeBack) nextName() string {
	wb.mu.Lock()
	wb.seq = max(wb.seq+1, time.Now().UnixNano())
	s := wb.seq
	wb.mu.Unlock()
	return fmt.Sprintf("%020s-%s", strconv.FormatInt(s, 10), randomHex(4))
}

// flushBack is a close in write-back: the staged content and its record
// are recorded in D/pending/, queued, and the close returns.
func (h *handle) flushBack() syscall.Errno {
	n, wb := h.n, h.n.fs.wb
	n.wbMu.Lock()
	defer n.wbMu.Unlock()
	wb.mu.Lock()
	l := wb.laneOf(n)
	after, failed := len(l.q) > 0, l.failed
	wb.mu.Unlock()
	if failed != nil {
		return syscall.EIO
	}
	remote := n.fs.remote(n.Path(n.fs.root))
	name := wb.nextName()
	dataPath := filepath.Join(wb.dir, name+".data")
	size, sum, err := h.recordContent(dataPath)
	if err != nil {
		os.Remove(dataPath)
		fmt.Fprintf(os.Stderr, "agentfs mount: record %s in the cache dir: %v\n", remote, err)
		return syscall.EIO
	}
	changed := stageTime(h.stage)
	n.mu.Lock()
	rec := pendingRecord{Key: n.fs.key(), Path: remote, Mode: n.mode, Kind: n.kind, MTime: changed, Size: size, SHA256: sum}
	if n.mtime != nil {
		// The store keeps microseconds: the mtime shown while pending is
		// the one stored, so a stat's times do not move when it arrives.
		rec.MTime = n.mtime.Truncate(time.Microsecond)
	}
	n.mu.Unlock()
	base := h.base
	if h.chained {
		base = n.current()
	}
	switch {
	case after:
		rec.AfterPrevious = true
	case base == nil:
		rec.Create = true
	default:
		rec.BaseID, rec.BaseETag = base.ID, base.ETag
	}
	if err := createRecord(wb.dir, name, &rec); err != nil {
		os.Remove(dataPath)
		fmt.Fprintf(os.Stderr, "agentfs mount: record %s in the cache dir: %v\n", remote, err)
		return syscall.EIO
	}
	n.mu.Lock()
	n.mtime = nil
	n.pendingN++
	n.shown = &shownContent{size: size, mtime: rec.MTime, ctime: changed}
	n.mu.Unlock()
	wb.mu.Lock()
	wb.add(l, &pendingStore{name: name, rec: rec})
	wb.mu.Unlock()
	h.dirty, h.base, h.chained = false, nil, true
	return 0
}

// recordContent makes the staged content (none: empty) the pending
// store's content at path, and answers its size and SHA-256; h.mu is
// held. The stage is linked there, not copied (a close in tar -x makes
// no second file), and is shared from then on: the handle's next write
// copies it first. Empty content has no file.
func (h *handle) recordContent(path string) (int64, string, error) {
	sum := sha256.New()
	if h.stage == nil {
		return 0, hex.EncodeToString(sum.Sum(nil)), nil
	}
	size, err := io.Copy(sum, io.NewSectionReader(h.stage, 0, 1<<62))
	if err != nil {
		return 0, "", err
	}
	if size > 0 {
		if err := os.Link(h.stage.Name(), path); err != nil {
			return 0, "", err
		}
		h.shared = true
	}
	return size, hex.EncodeToString(sum.Sum(nil)), nil
}

// unshare gives the handle a stage of its own, a copy of the shared one
// (recordContent); h.mu is held.
func (h *handle) unshare() syscall.Errno {
	f, err := os.OpenFile(h.n.fs.stagePath(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return syscall.EIO
	}
	if _, err := io.Copy(f, io.NewSectionReader(h.stage, 0, 1<<62)); err != nil {
		f.Close()
		os.Remove(f.Name())
		return syscall.EIO
	}
	h.stage.Close()
	os.Remove(h.stage.Name()) // the pending store keeps its own name for it
	h.stage, h.shared = f, false
	return 0
}

// wroteVersion is a version this mount's store made, and the ctime the
// file showed while it was written (fileNode.wrote).
type wroteVersion struct {
	version int64
	ctime   time.Time
}

// shownContent is what a file's attributes show while a store of it is
// pending: the size, mtime and ctime of its pending content.
type shownContent struct {
	size         int64
	mtime, ctime time.Time
}
