package handlers

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/problem"
)

// copyBufferSize is the chunk in which content is copied to the client.
const copyBufferSize = 1 << 20

// writerOnly is an io.Writer and nothing more.
type writerOnly struct{ io.Writer }

// content is bytes the API serves: a file's current content, one of its
// versions, or what a share link shares.
type content struct {
	fileID, path, blobKey, contentType, sha256 string
	size                                       int64
	modified                                   time.Time
}

func (ct content) etag() string { return `"` + ct.sha256 + `"` }

func contentOf(f *agentfs.File) content {
	return content{fileID: f.ID, path: f.Path, blobKey: f.BlobKey, contentType: f.ContentType, sha256: f.SHA256,
		size: f.SizeBytes, modified: f.UpdatedAt}
}

func versionContent(f *agentfs.File, v *agentfs.FileVersion) content {
	return content{fileID: f.ID, path: f.Path, blobKey: v.BlobKey, contentType: v.ContentType, sha256: v.SHA256,
		size: v.SizeBytes, modified: v.CreatedAt}
}

// getContent is GET and HEAD /v1/files/{id}/content: the bytes of a live
// file, whole or one range, with conditional GET.
func (a *API) getContent(c echo.Context) error {
	return readFile(c, a.getContentAsOf, a.deps.Files.Content, func(c echo.Context, f *agentfs.File) error {
		return a.serveFileContent(c, contentOf(f))
	})
}

// serveFileContent answers a content request of a file (current, a
// version, or as of a point) made with a token: as serveContent does, or,
// with ?redirect=true and a public S3 endpoint configured, with a 307 to a
// presigned GET of exactly this version's blob, so the bytes skip AgentFS.
// Without a public endpoint the bytes stream as usual: redirect is a
// preference, and a client that follows the 307 and one that reads the
// body both get the same bytes. Share links never redirect: a presigned
// URL would outlive the link's revocation.
func (a *API) serveFileContent(c echo.Context, ct content) error {
	redirect, err := redirectParam(c)
	if err != nil {
		return err
	}
	if !redirect || c.Request().Method == http.MethodHead || ct.size == 0 {
		// A presigned URL is signed for GET: HEAD answers the headers
		// here, and no bytes need no detour.
		return a.serveContent(c, ct)
	}
	h := c.Response().Header()
	setContentHeaders(h, ct)
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && agentfs.ETagMatchesWeak(inm, ct.etag()) {
		return c.NoContent(http.StatusNotModified)
	}
	link, err := a.deps.Files.PresignBlob(c.Request().Context(), ct.blobKey, ct.path, ct.contentType)
	if err != nil {
		return err
	}
	if link == nil {
		return a.serveContent(c, ct)
	}
	// The URL is a bearer secret that expires: no cache keeps it.
	h.Set("Cache-Control", "private, no-store")
	h.Set("Expires", link.Expires.UTC().Format(http.TimeFormat))
	h.Set(echo.HeaderLocation, link.URL)
	return c.NoContent(http.StatusTemporaryRedirect)
}

// redirectParam reads redirect: true or false (absent: false); any other
// value is a 422 naming it.
func redirectParam(c echo.Context) (bool, error) {
	v, ok := c.QueryParams()["redirect"]
	if !ok {
		return false, nil
	}
	switch {
	case len(v) == 1 && v[0] == "true":
		return true, nil
	case len(v) == 1 && v[0] == "false":
		return false, nil
	}
	return false, problem.Validation("redirect", "must be true or false, once")
}

// serveContent answers with ct's bytes, whole or one range, with
// conditional GET; HEAD gets the headers alone.
func (a *API) serveContent(c echo.Context, ct content) error {
	h := c.Response().Header()
	setContentHeaders(h, ct)
	req := c.Request()
	if inm := req.Header.Get("If-None-Match"); inm != "" && agentfs.ETagMatchesWeak(inm, ct.etag()) {
		return c.NoContent(http.StatusNotModified)
	}
	status, rng, err := chooseRange(req, ct)
	if err != nil {
		return err
	}
	if status == http.StatusPartialContent {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", rng.start, rng.start+rng.length-1, ct.size))
	}
	h.Set(echo.HeaderContentLength, strconv.FormatInt(rng.length, 10))
	if req.Method == http.MethodHead || rng.length == 0 {
		c.Response().WriteHeader(status)
		return nil
	}
	return a.streamBlob(c, ct, status, rng)
}

func setContentHeaders(h http.Header, ct content) {
	h.Set("ETag", ct.etag())
	h.Set("Accept-Ranges", "bytes")
	h.Set(echo.HeaderContentType, ct.contentType)
	h.Set("Last-Modified", ct.modified.UTC().Format(http.TimeFormat))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(ct.path)}))
	if sum, err := hex.DecodeString(ct.sha256); err == nil {
		h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum)+":")
	}
}

// chooseRange decides between the whole content (200) and one range (206).
// A Range is honoured only when If-Range, if sent, names the current etag.
func chooseRange(req *http.Request, ct content) (int, byteRange, error) {
	whole := byteRange{start: 0, length: ct.size}
	rh := req.Header.Get("Range")
	if rh == "" {
		return http.StatusOK, whole, nil
	}
	if ir := req.Header.Get("If-Range"); ir != "" && ir != ct.etag() {
		return http.StatusOK, whole, nil
	}
	rng, ok, err := parseRange(rh, ct.size)
	if errors.Is(err, errUnsatisfiable) {
		return 0, rng, problem.New(problem.RangeNotSatisfiable,
			fmt.Sprintf("the content has %d bytes", ct.size)).
			WithHeader("Content-Range", fmt.Sprintf("bytes */%d", ct.size))
	}
	if !ok {
		return http.StatusOK, whole, nil
	}
	return http.StatusPartialContent, rng, nil
}

// streamBlob copies the range of the file's blob to the client. The first
// bytes are fetched before the status is sent, so an outage is still
// answered as a problem; a failure after that cuts the response.
func (a *API) streamBlob(c echo.Context, ct content, status int, rng byteRange) error {
	ctx := c.Request().Context()
	blob, err := a.deps.Files.OpenBlob(ctx, ct.blobKey, rng.start, rng.length)
	if err != nil {
		return blobError(ct, err)
	}
	defer blob.Close()
	// The first bytes are read before the status is sent, so a failure of
	// S3 right away is still answered as a problem.
	// A small read needs no more buffer than its bytes.
	buf := make([]byte, min(copyBufferSize, max(rng.length, 1)))
	n, err := blob.Read(buf)
	if err != nil && err != io.EOF && n == 0 {
		return blobError(ct, err)
	}
	out := newClientWriter(c.Response(), a.deps.Limits.WriteIdleTimeout)
	defer out.done()
	c.Response().WriteHeader(status)
	_, werr := out.Write(buf[:n])
	if werr == nil && err != nil && err != io.EOF {
		werr = err // S3 failed after the first bytes
	}
	if werr == nil && err == nil {
		werr = relay(out, blob, buf)
	}
	if werr != nil {
		cut := &cutResponse{err: werr, clientGone: out.clientGone(ctx, werr)}
		if cut.clientGone {
			a.deps.Log.DebugContext(ctx, "client gone", "file_id", ct.fileID, "err", werr)
		} else {
			a.deps.Log.WarnContext(ctx, "content stream failed", "file_id", ct.fileID, "err", werr)
		}
		return cut
	}
	return nil
}

// blobError is the error of a blob that could not be read. A blob that a
// row references and S3 lacks is storage failing, not a resource the caller
// named wrongly: never a 404 (whether S3 says so when the blob is opened or
// at its first read).
func blobError(ct content, err error) error {
	if errors.Is(err, agentfs.ErrNotFound) {
		return fmt.Errorf("blob %s of file %s is missing (%v): %w", ct.blobKey, ct.fileID, err, agentfs.ErrUnavailable)
	}
	return err
}

// relay copies the rest of blob to the client through out. A blob that
// can write itself out is given out's target, whose ReadFrom lets the
// server's own response writer move bytes socket to socket; any other is
// copied through one large buffer (out has no ReadFrom, whose generic path
// would copy in 32 KiB steps).
func relay(out *clientWriter, blob io.Reader, buf []byte) error {
	if wt, ok := blob.(io.WriterTo); ok {
		_, err := wt.WriteTo(out.target())
		return err
	}
	_, err := io.CopyBuffer(out, blob, buf)
	return err
}
