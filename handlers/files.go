package handlers

import (
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// createFile is POST /v1/files: a raw body, or multipart/form-data whose
// path and if_exists fields come before the file part.
func (a *API) createFile(c echo.Context) error {
	put, body, err := a.bindPut(c)
	if err != nil {
		return err
	}
	res, err := a.deps.Writes.Put(c.Request().Context(), caller(c), put, body)
	return writeResult(c, res, err)
}

// bindPut reads everything about an upload but its content, which it
// returns unread.
func (a *API) bindPut(c echo.Context) (agentfs.Put, io.Reader, error) {
	req := c.Request()
	put := agentfs.Put{
		Subject:  principal(c).Subject,
		Path:     c.QueryParam("path"),
		Size:     req.ContentLength,
		MaxBytes: a.deps.Limits.MaxUploadBytes,
		By:       attributionOf(c),
	}
	ifExists := c.QueryParam("if_exists")
	var body io.Reader = req.Body
	ct, err := normalizeMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil {
		return put, nil, headerProblem("Content-Type", err)
	}
	if strings.HasPrefix(ct, "multipart/form-data") {
		form, err := readFormHead(req)
		if err != nil {
			return put, nil, err
		}
		if form.path != "" {
			put.Path = form.path
		}
		if form.ifExists != "" {
			ifExists = form.ifExists
		}
		if ct, err = normalizeMediaType(form.file.Header.Get(echo.HeaderContentType)); err != nil {
			return put, nil, problem.Invalid("file", "the file part's Content-Type is not a valid media type")
		}
		put.Size, body = -1, form.file
	} else if put.Digest, err = parseContentDigest(req.Header.Get("Content-Digest")); err != nil {
		return put, nil, headerProblem("Content-Digest", err)
	}
	put.ContentType = ct
	if put.Size > put.MaxBytes {
		return put, nil, agentfs.ErrTooLarge
	}
	if put.ExpiresIn, err = parseExpiresIn("expires_in", c.QueryParam("expires_in"), agentfs.MinExpiresIn, agentfs.MaxExpiresIn); err != nil {
		return put, nil, err
	}
	if put.Meta, err = bindMeta(c.QueryParams(), put.Size); err != nil {
		return put, nil, err
	}
	return put, body, validatePut(&put, ifExists, req.Header)
}

// validatePut checks the put's path, if_exists and preconditions.
func validatePut(put *agentfs.Put, ifExists string, h http.Header) error {
	if put.Path == "" {
		return problem.Validation("path", "is required")
	}
	var err error
	if put.Path, err = agentfs.NormalizePath(put.Path); err != nil {
		return pathProblem(err)
	}
	replace, err := parseIfExists(ifExists)
	if err != nil {
		return problem.Validation("if_exists", err.Error())
	}
	put.Replace = replace
	put.IfMatch = strings.TrimSpace(h.Get("If-Match"))
	if put.IfMatch != "" && !replace {
		return problem.Validation("If-Match", "asks for a conditional replace; send if_exists=replace with it")
	}
	switch inm := strings.TrimSpace(h.Get("If-None-Match")); inm {
	case "":
	case "*":
		put.IfNoneMatchAny = true
	default:
		return problem.Validation("If-None-Match", "uploads take only If-None-Match: *")
	}
	return nil
}

// formHead is what comes before the file part of a multipart upload.
type formHead struct {
	path, ifExists string
	file           *multipart.Part
}

// maxFieldBytes bounds a multipart form field other than the file.
const maxFieldBytes = 4096

// readFormHead reads the fields of a multipart upload up to its file part,
// which it returns unread so the content streams.
func readFormHead(req *http.Request) (formHead, error) {
	var head formHead
	mr, err := req.MultipartReader()
	if err != nil {
		return head, problem.Invalid("body", "malformed multipart/form-data: "+err.Error())
	}
	for fields := 0; ; fields++ {
		part, err := mr.NextPart()
		// A form that ends cleanly after its fields lacks the file; one that
		// ends before any part (or a wrapped EOF) is truncated.
		if err == io.EOF && fields > 0 {
			return head, problem.Validation("file", "the form has no file part")
		}
		if err != nil && !errors.Is(agentfs.BodyError(err), agentfs.ErrBadBody) {
			return head, agentfs.BodyError(err) // the body failed to arrive (stalled, over the quota), not its form
		}
		if err != nil {
			return head, problem.Invalid("body", "malformed multipart/form-data")
		}
		name := part.FormName()
		if name == "file" {
			head.file = part
			return head, nil
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil && !errors.Is(agentfs.BodyError(err), agentfs.ErrBadBody) {
			return head, agentfs.BodyError(err)
		}
		if err != nil {
			return head, problem.Invalid("body", "malformed multipart/form-data")
		}
		if len(v) > maxFieldBytes || !utf8.Valid(v) {
			return head, problem.Validation(name, "form field is too long or not UTF-8")
		}
		switch name {
		case "path":
			head.path = string(v)
		case "if_exists":
			head.ifExists = string(v)
		}
	}
}

// listFiles is GET /v1/files.
func (a *API) listFiles(c echo.Context) error {
	if c.QueryParams().Has("delimiter") {
		return a.listChildren(c)
	}
	if past, err := servedAsOf(c, a.listFilesAsOf); past {
		return err
	}
	filter, err := bindFilter(c)
	if err != nil {
		return err
	}
	fields, err := parseFields(c.QueryParams())
	if err != nil {
		return err
	}
	filter.Fields = fieldNames(fields)
	limit := filter.Limit
	filter.Limit++ // one more tells whether there is a next page
	files, err := a.deps.Files.ListFiles(c.Request().Context(), caller(c), filter)
	if err != nil {
		return err
	}
	out := api.FileList{}
	out.Data, out.HasMore, out.NextCursor = cursorPage(files, limit, func(f *agentfs.File) api.File { return render.File(a.deps.PublicURL, f) },
		func(f *agentfs.File) (time.Time, string) { return f.CreatedAt, f.ID })
	return writeFileList(c, out, fields)
}

// Listing page sizes.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func bindFilter(c echo.Context) (agentfs.FileFilter, error) {
	q := c.QueryParams()
	f := agentfs.FileFilter{
		RunID: q.Get("run_id"), AgentID: q.Get("agent_id"), LastRunID: q.Get("last_run_id"),
		Prefix: q.Get("prefix"), Path: q.Get("path"), Limit: defaultListLimit,
	}
	var err error
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return f, err
	}
	if err := queryBool(q, "include_deleted", &f.IncludeDeleted); err != nil {
		return f, err
	}
	if v := q.Get("cursor"); v != "" {
		cur, err := agentfs.ParseCursor(v, "file")
		if err != nil {
			return f, problem.Invalid("cursor", err.Error())
		}
		f.After = &cur
	}
	return f, normalizeFilter(&f)
}

// normalizeFilter checks the filter's values and puts its path and prefix
// in the form paths are stored in (NFC).
func normalizeFilter(f *agentfs.FileFilter) error {
	for _, v := range []struct{ name, value string }{{"run_id", f.RunID}, {"agent_id", f.AgentID}, {"last_run_id", f.LastRunID}} {
		if v.value != "" && !agentfs.ValidTagValue(v.value) {
			return problem.Validation(v.name, "must be 1-128 characters of A-Z a-z 0-9 . _ : / = + @ -")
		}
	}
	var err error
	if f.Path != "" {
		if f.Path, err = agentfs.NormalizePath(f.Path); err != nil {
			return pathProblem(err)
		}
	}
	f.Prefix, err = normalizePrefix(f.Prefix)
	return err
}

// normalizePrefix checks a listing's path prefix and puts it in NFC.
func normalizePrefix(prefix string) (string, error) {
	p, err := agentfs.NormalizePrefix(prefix)
	if err != nil {
		return "", problem.Validation("prefix", strings.TrimPrefix(err.Error(), "prefix ")) // "is longer than…", "contains…"
	}
	return p, nil
}

// getFile is GET and HEAD /v1/files/{id}: metadata, also of a deleted file.
func (a *API) getFile(c echo.Context) error {
	return readFile(c, a.getFileAsOf, a.deps.Files.File, a.answerFile)
}

// answerFile answers a file's metadata with its ETag, or 304 when
// If-None-Match names it.
func (a *API) answerFile(c echo.Context, f *agentfs.File) error {
	c.Response().Header().Set("ETag", f.ETag())
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && agentfs.ETagMatchesWeak(inm, f.ETag()) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.JSON(http.StatusOK, render.File(a.deps.PublicURL, f))
}

// deleteFile is DELETE /v1/files/{id}: a soft delete, safe to repeat.
func (a *API) deleteFile(c echo.Context) error {
	ifMatch := strings.TrimSpace(c.Request().Header.Get("If-Match"))
	res, err := a.deps.Writes.Delete(c.Request().Context(), caller(c), c.Param("id"), ifMatch)
	return writeResult(c, res, err)
}

// restoreFile is POST /v1/files/{id}/restore: undo a delete, safe to repeat.
func (a *API) restoreFile(c echo.Context) error {
	return writeByID(c, a.deps.Writes.Restore)
}

func headerProblem(name string, err error) *problem.Problem {
	p := problem.New(problem.InvalidHeader, err.Error())
	p.Errors = []problem.FieldError{{Field: name, Message: err.Error()}}
	return p
}

func pathProblem(err error) *problem.Problem {
	p := problem.New(problem.InvalidPath, err.Error())
	p.Errors = []problem.FieldError{{Field: "path", Message: err.Error()}}
	return p
}
