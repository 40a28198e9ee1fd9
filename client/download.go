package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// DownloadOptions adjust DownloadFile.
type DownloadOptions struct {
	// Resume keeps what a download cut on the way (a lost connection, a
	// cancelled context) received, in a hidden partial file next to the
	// destination named for the content's SHA-256, and the next
	// DownloadFile of the same content to the same destination asks only
	// for the rest (a Range request with If-Range, so content replaced
	// meanwhile comes back whole). Without it a failed download leaves
	// nothing behind.
	Resume bool
	// MakeDirs creates the destination's missing parent directories.
	MakeDirs bool
	// Progress, when set, is told the bytes written so far (a resumed
	// download starts at the bytes it had) and the content's size.
	Progress func(received, total int64)
	// Redirect reads the bytes from S3 through a presigned URL when the
	// server offers one (ContentOptions.Redirect); the SHA-256 is checked
	// against the server's all the same.
	Redirect bool
}

// Downloaded is what DownloadFile wrote.
type Downloaded struct {
	Path string // the destination
	// Bytes is the size of the file written; Received the bytes this
	// call received (less than Bytes when it resumed).
	Bytes, Received int64
	// SHA256 and ETag name the content written: f's, or those of the
	// content that replaced it before the download started.
	SHA256, ETag string
}

// partPrefix starts the name of a partial download, after the dot and the
// destination's name.
const partPrefix = ".agentfs-part-"

// DownloadFile writes the live content of f (its id, size, SHA-256 and
// etag as File or a listing returned them) to the local file dest, whole
// or not at all: the bytes go to a hidden file next to dest, their SHA-256
// is checked against the one the server announced, and only then is the
// file renamed into place (mode 0644). Errors name dest, never the hidden
// file.
func (c *Client) DownloadFile(ctx context.Context, f *File, dest string, opts DownloadOptions) (*Downloaded, error) {
	dir := filepath.Dir(dest)
	if opts.MakeDirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, localError(dest, err)
		}
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("write %s: it is a directory", dest)
	}
	part, err := openPart(dest, f, opts.Resume)
	if err != nil {
		return nil, err
	}
	d, err := c.fillPart(ctx, f, part, opts)
	if cerr := part.file.Close(); err == nil && cerr != nil {
		err = localError(dest, cerr)
	}
	if err == nil {
		err = os.Chmod(part.file.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(part.file.Name(), dest)
	}
	if err != nil {
		if !opts.Resume || !keepPart(ctx, err) {
			os.Remove(part.file.Name())
		}
		return nil, err
	}
	d.Path = dest
	return d, nil
}

// partFile is the hidden file a download fills, with what it holds.
type partFile struct {
	file *os.File
	have int64     // bytes already there (resumed)
	hash hash.Hash // their SHA-256, going on
}

// openPart opens the hidden file next to dest: a fresh one, or with
// resume the partial download of f's content left by an earlier call
// (partial downloads of other content to dest are removed).
func openPart(dest string, f *File, resume bool) (*partFile, error) {
	dir, base := filepath.Dir(dest), filepath.Base(dest)
	if !resume {
		tmp, err := os.CreateTemp(dir, "."+base+".part-*")
		if err != nil {
			return nil, localError(dest, err)
		}
		return &partFile{file: tmp, hash: sha256.New()}, nil
	}
	name := filepath.Join(dir, "."+base+partPrefix+shortSum(f.SHA256))
	if stale, _ := filepath.Glob(filepath.Join(dir, globEscape("."+base+partPrefix)+"*")); len(stale) > 0 {
		for _, s := range stale {
			if s != name {
				os.Remove(s)
			}
		}
	}
	file, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, localError(dest, err)
	}
	p := &partFile{file: file, hash: sha256.New()}
	n, err := io.Copy(p.hash, file) // what an earlier call received
	if err != nil || n > f.SizeBytes {
		n, p.hash = 0, sha256.New()
		if err = file.Truncate(0); err == nil {
			_, err = file.Seek(0, io.SeekStart)
		}
	}
	if err != nil {
		file.Close()
		os.Remove(name)
		return nil, localError(dest, err)
	}
	p.have = n
	return p, nil
}

// fillPart receives the content (the rest of it, when part holds a
// beginning) into part and checks the whole against the server's SHA-256.
func (c *Client) fillPart(ctx context.Context, f *File, part *partFile, opts DownloadOptions) (*Downloaded, error) {
	if part.have > 0 && part.have == f.SizeBytes {
		if sum := hex.EncodeToString(part.hash.Sum(nil)); sum == f.SHA256 { // received whole last time
			return &Downloaded{Bytes: part.have, SHA256: sum, ETag: f.ETag}, nil
		}
	}
	copts := ContentOptions{Redirect: opts.Redirect}
	if part.have > 0 && part.have < f.SizeBytes && f.ETag != "" {
		copts.Range, copts.IfRange = "bytes="+strconv.FormatInt(part.have, 10)+"-", f.ETag
	}
	content, err := c.FileContent(ctx, f.ID, copts)
	if err != nil {
		return nil, err
	}
	defer content.Close()
	if content.Status != http.StatusPartialContent && part.have > 0 { // whole: start again
		part.have, part.hash = 0, sha256.New()
		if err := part.file.Truncate(0); err != nil {
			return nil, localError(part.file.Name(), err)
		}
		if _, err := part.file.Seek(0, io.SeekStart); err != nil {
			return nil, localError(part.file.Name(), err)
		}
	}
	total := part.have + content.Length
	if content.Length < 0 {
		total = f.SizeBytes
	}
	w := io.Writer(part.file)
	if opts.Progress != nil {
		opts.Progress(part.have, total)
		w = &progressWriter{w: w, n: part.have, total: total, fn: opts.Progress}
	}
	n, err := io.Copy(io.MultiWriter(w, part.hash), ctxReader{ctx, content})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("download %s: %w", f.ID, err)
	}
	got := hex.EncodeToString(part.hash.Sum(nil))
	if content.SHA256 != "" && got != content.SHA256 {
		return nil, &ChecksumError{FileID: f.ID, Got: got, Want: content.SHA256}
	}
	return &Downloaded{Bytes: part.have + n, Received: n, SHA256: got, ETag: content.ETag}, nil
}

// ChecksumError says that the bytes received do not have the SHA-256 the
// server announced for them: nothing was written.
type ChecksumError struct {
	FileID    string
	Got, Want string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("download %s: the content received has SHA-256 %s, the server announced %s", e.FileID, e.Got, e.Want)
}

// keepPart reports whether a failed download's partial file is worth
// keeping for the next call: the transfer was cut, not refused or wrong.
func keepPart(ctx context.Context, err error) bool {
	var (
		p  *Problem
		ce *ChecksumError
		pe *fs.PathError
	)
	switch {
	case ctx.Err() != nil:
		return true
	case errors.As(err, &p), errors.As(err, &ce), errors.As(err, &pe):
		return false
	}
	return true
}

// localError names dest in a failure of the local file system, in words:
// a missing directory is said to be one.
func localError(dest string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &fs.PathError{Op: "write", Path: dest, Err: fmt.Errorf("no such directory %s", filepath.Dir(dest))}
	}
	return &fs.PathError{Op: "write", Path: dest, Err: err}
}

// shortSum names a content in a file name: the first 16 hex digits of
// its SHA-256.
func shortSum(sum string) string {
	if len(sum) > 16 {
		return sum[:16]
	}
	if sum == "" {
		return "unknown"
	}
	return sum
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '*' || c == '?' || c == '[' || c == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// progressWriter tells fn how many bytes have been written.
type progressWriter struct {
	w     io.Writer
	n     int64
	total int64
	fn    func(received, total int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.fn(p.n, p.total)
	return n, err
}
