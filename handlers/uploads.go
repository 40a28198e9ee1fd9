package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/api"
	"github.com/agentfs/agentfs/jsonutf8"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/render"
)

// maxJSONBytes bounds the JSON bodies of upload routes.
const maxJSONBytes = 64 << 10

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// createUploadBody is the body of POST /v1/uploads.
type createUploadBody struct {
	Path        *string `json:"path"`
	SizeBytes   *int64  `json:"size_bytes"`
	ContentType *string `json:"content_type"`
	IfExists    *string `json:"if_exists"`
	SHA256      *string `json:"sha256"`
	ExpiresIn   *int64  `json:"expires_in"`
}

// createUpload is POST /v1/uploads: a new session, or the live one that
// matches (200), so a caller that lost the answer resumes.
func (a *API) createUpload(c echo.Context) error {
	return writeBody(c, false, a.newUpload, a.deps.Writes.CreateUpload)
}

func (a *API) newUpload(c echo.Context, b createUploadBody) (agentfs.NewUpload, error) {
	req := agentfs.NewUpload{Subject: principal(c).Subject, By: attributionOf(c),
		PartSize: a.deps.Limits.UploadPartSize, TTL: a.deps.Limits.UploadTTL, MaxOpen: a.deps.Limits.MaxPendingUploads}
	if b.Path == nil {
		return req, problem.Validation("path", "is required")
	}
	var err error
	if req.Path, err = agentfs.NormalizePath(*b.Path); err != nil {
		return req, pathProblem(err)
	}
	if b.SizeBytes == nil {
		return req, problem.Validation("size_bytes", "is required")
	}
	if *b.SizeBytes < 1 || *b.SizeBytes > a.deps.Limits.MaxUploadSessionBytes {
		return req, problem.Validation("size_bytes", fmt.Sprintf("must be between 1 and %d", a.deps.Limits.MaxUploadSessionBytes))
	}
	req.SizeBytes = *b.SizeBytes
	ct := ""
	if b.ContentType != nil {
		ct = *b.ContentType
	}
	if req.ContentType, err = normalizeMediaType(ct); err != nil {
		return req, problem.Validation("content_type", "is not a valid media type")
	}
	if b.IfExists != nil {
		if req.Replace, err = parseIfExists(*b.IfExists); err != nil {
			return req, problem.Validation("if_exists", err.Error())
		}
	}
	if req.SHA256, err = checkSHA256(b.SHA256); err != nil {
		return req, err
	}
	if b.ExpiresIn != nil {
		if req.ExpiresIn, err = expiresIn("expires_in", *b.ExpiresIn, agentfs.MinExpiresIn, agentfs.MaxExpiresIn); err != nil {
			return req, err
		}
	}
	return req, nil
}

// checkSHA256 checks the sha256 a body may name ("" when absent).
func checkSHA256(v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if !sha256Hex.MatchString(*v) {
		return "", problem.Validation("sha256", "must be 64 lowercase hex digits")
	}
	return *v, nil
}

// readJSON reads a JSON body of at most limit bytes (413 above) into dst
// strictly: malformed JSON is 400; unknown fields and wrong types are 422
// naming the field. An empty body is allowed only when optional. It
// returns the raw body.
func readJSON(c echo.Context, limit int64, dst any, optional bool) ([]byte, error) {
	raw, err := readJSONBody(c, limit, optional)
	if err != nil || len(bytes.TrimSpace(raw)) == 0 {
		return raw, err
	}
	if je := decodeStrict(raw, dst); je != nil {
		return nil, je.problem()
	}
	return raw, nil
}

// readJSONBody reads a body of at most limit bytes (413 above) that must be
// JSON (415 for another media type, 400 for text that is not UTF-8),
// without decoding it. An empty body is allowed only when optional. A body
// of declared length is read into one buffer of that length, and nothing
// else.
func readJSONBody(c echo.Context, limit int64, optional bool) ([]byte, error) {
	return readJSONInto(c, limit, optional, func(n int) []byte { return make([]byte, n) })
}

// readJSONInto is readJSONBody reading a body of declared length into
// alloc's buffer of that length.
func readJSONInto(c echo.Context, limit int64, optional bool, alloc func(n int) []byte) ([]byte, error) {
	req := c.Request()
	raw, err := readBody(http.MaxBytesReader(c.Response(), req.Body, limit), req.ContentLength, limit, alloc)
	if err != nil {
		return nil, agentfs.BodyError(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if optional {
			return raw, nil
		}
		return nil, problem.Invalid("body", "a JSON object is required")
	}
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return nil, problem.New(problem.UnsupportedMediaType, "send the body as application/json")
	}
	if f := jsonutf8.Check(raw); f != nil {
		return nil, textError(f).problem()
	}
	return raw, nil
}

// readBody reads body whole: into alloc's buffer of exactly length bytes
// when the length is declared and within limit, else as it comes (body is
// bounded by limit, and fails past it).
func readBody(body io.Reader, length, limit int64, alloc func(n int) []byte) ([]byte, error) {
	switch {
	case length > limit:
		_, err := io.Copy(io.Discard, body) // fails past limit, with nothing kept
		return nil, cmp.Or(err, error(&http.MaxBytesError{Limit: limit}))
	case length < 0:
		return io.ReadAll(body)
	}
	raw := alloc(int(length))
	if _, err := io.ReadFull(body, raw); err != nil {
		return nil, err
	}
	if n, err := body.Read(make([]byte, 1)); n > 0 || err != nil && err != io.EOF {
		return nil, cmp.Or(err, io.ErrUnexpectedEOF) // more than declared: the server never lets it through
	}
	return raw, nil
}

// decodeStrict decodes one JSON value into dst, rejecting unknown fields
// and strings that are not Unicode text (which encoding/json would turn
// into U+FFFD). What it refuses it says in the API's words.
func decodeStrict(raw []byte, dst any) *jsonError {
	if f := jsonutf8.Check(raw); f != nil {
		return textError(f)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if je := jsonErrorOf(err); je != nil {
		return je
	}
	if dec.More() {
		return &jsonError{message: "the body holds more than one JSON value", malformed: true}
	}
	return nil
}

// jsonErrorOf says in the API's words what encoding/json refused.
func jsonErrorOf(err error) *jsonError {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return &jsonError{message: "must be a JSON " + jsonKind(typeErr.Type)}
		}
		return &jsonError{field: typeErr.Field, message: "must be " + withArticle(jsonKind(typeErr.Type))}
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &jsonError{field: field, message: "is not a known field"}
	case err != nil:
		return &jsonError{message: "malformed JSON", malformed: true}
	}
	return nil
}

// jsonError is what decodeStrict refused: a field ("" for the value as a
// whole) and why, or JSON that does not parse at all. path says the field
// names a path (INVALID_PATH rather than VALIDATION_FAILED).
type jsonError struct {
	field, message string
	malformed      bool
	path           bool
}

// pathMembers are the members of the API's JSON bodies that name a path.
var pathMembers = map[string]bool{"path": true}

// textError is decodeStrict's error for a string that is not text.
func textError(f *jsonutf8.Fault) *jsonError {
	return &jsonError{field: f.Field, message: f.Reason, path: !f.Key && pathMembers[f.Name]}
}

func (e *jsonError) Error() string { return e.field + ": " + e.message }

// problem is the error as the answer to a request whose body it is: 400
// for JSON that does not parse, 422 naming the field otherwise.
func (e *jsonError) problem() *problem.Problem {
	field := e.field
	if field == "" {
		field = "body"
	}
	switch {
	case e.malformed:
		return problem.Invalid(field, e.message)
	case e.path:
		p := problem.New(problem.InvalidPath, field+": "+e.message)
		p.Errors = []problem.FieldError{{Field: field, Message: e.message}}
		return p
	}
	return problem.Validation(field, e.message)
}

// jsonKind names the JSON value a Go type decodes from, in the API's words
// (never a Go type name).
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "value"
}

func withArticle(kind string) string {
	if strings.IndexByte("aeiou", kind[0]) >= 0 {
		return "an " + kind
	}
	return "a " + kind
}

// getUpload is GET /v1/uploads/{id}: the session and its parts so far.
func (a *API) getUpload(c echo.Context) error {
	u, f, err := a.deps.Sessions.Upload(c.Request().Context(), caller(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, render.Upload(a.deps.PublicURL, u, f, c.Response().Header().Get(problem.RequestIDHeader), time.Now()))
}

// putPart is PUT /v1/uploads/{id}/parts/{n}: one part, streamed to S3.
func (a *API) putPart(c echo.Context) error {
	req := c.Request()
	n, err := strconv.Atoi(c.Param("n"))
	if err != nil {
		return problem.Invalid("part_number", "must be an integer")
	}
	if req.ContentLength < 0 {
		return problem.New(problem.LengthRequired, "a part needs Content-Length")
	}
	digest, err := parseContentDigest(req.Header.Get("Content-Digest"))
	if err != nil {
		return headerProblem("Content-Digest", err)
	}
	res, err := a.deps.Writes.PutPart(req.Context(), caller(c), c.Param("id"), n, req.Body, req.ContentLength, digest)
	return writeResult(c, res, err)
}

// completeBody is the optional body of POST /v1/uploads/{id}/complete.
type completeBody struct {
	IfExists *string `json:"if_exists"`
	SHA256   *string `json:"sha256"`
}

// completeUpload is POST /v1/uploads/{id}/complete: assemble the parts into
// the file (201 created, 200 replaced, 200 again on a repeat).
func (a *API) completeUpload(c echo.Context) error {
	var body completeBody
	if _, err := readJSON(c, maxJSONBytes, &body, true); err != nil {
		return err
	}
	req := agentfs.CompleteRequest{IfMatch: strings.TrimSpace(c.Request().Header.Get("If-Match"))}
	if body.IfExists != nil {
		replace, err := parseIfExists(*body.IfExists)
		if err != nil {
			return problem.Validation("if_exists", err.Error())
		}
		req.Replace = &replace
	}
	var err error
	if req.SHA256, err = checkSHA256(body.SHA256); err != nil {
		return err
	}
	res, err := a.deps.Writes.CompleteUpload(c.Request().Context(), caller(c), c.Param("id"), req)
	return writeResult(c, res, err)
}

// abortUpload is DELETE /v1/uploads/{id}: abort, safe to repeat.
func (a *API) abortUpload(c echo.Context) error {
	return writeByID(c, a.deps.Writes.AbortUpload)
}

// listUploads is GET /v1/uploads: the subject's sessions, newest first.
func (a *API) listUploads(c echo.Context) error {
	q := c.QueryParams()
	lq, err := readStatusList(q, "upl", agentfs.UploadPending, agentfs.UploadCompleting, agentfs.UploadCompleted,
		agentfs.UploadAborted, agentfs.UploadExpired, agentfs.UploadFailed)
	if err != nil {
		return err
	}
	limit := lq.limit
	f := agentfs.UploadFilter{Status: lq.status, Limit: limit + 1, After: lq.after}
	if p := q.Get("path"); p != "" {
		if f.Path, err = cleanPath(p); err != nil {
			return err
		}
	}
	uploads, err := a.deps.Sessions.ListUploads(c.Request().Context(), caller(c), f)
	if err != nil {
		return err
	}
	reqID := c.Response().Header().Get(problem.RequestIDHeader)
	out := api.UploadList{}
	out.Data, out.HasMore, out.NextCursor = cursorPage(uploads, limit, func(u *agentfs.Upload) api.Upload {
		return render.Upload(a.deps.PublicURL, u, nil, reqID, time.Now())
	}, func(u *agentfs.Upload) (time.Time, string) { return u.CreatedAt, u.ID })
	return c.JSON(http.StatusOK, out)
}

// parseCursor reads a listing cursor of resources with this id prefix.
func parseCursor(v, prefix string) (*agentfs.Cursor, error) {
	if v == "" {
		return nil, nil
	}
	cur, err := agentfs.ParseCursor(v, prefix)
	if err != nil {
		return nil, problem.Invalid("cursor", err.Error())
	}
	return &cur, nil
}

func nextCursor(at time.Time, id string) *string {
	s := agentfs.Cursor{CreatedAt: at, ID: id}.String()
	return &s
}
