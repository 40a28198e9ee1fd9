package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/idempotency"
	"github.com/agentfs/agentfs/problem"
	"github.com/agentfs/agentfs/storage"
)

// Uploads is the store of multipart upload sessions.
type Uploads interface {
	CreateUpload(ctx context.Context, req storage.NewUpload, hook storage.UploadHook) (*agentfs.Upload, bool, error)
	Upload(ctx context.Context, subject, id string) (*agentfs.Upload, error)
	PutPart(ctx context.Context, subject, id string, n int, body io.Reader, size int64, digest []byte, hook storage.PartHook) (*agentfs.Part, error)
	CompleteUpload(ctx context.Context, subject, id string, req storage.CompleteRequest, hook storage.CommitHook) (*agentfs.File, bool, error)
	AbortUpload(ctx context.Context, subject, id string, hook storage.UploadHook) (*agentfs.Upload, error)
}

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
}

// createUpload is POST /v1/uploads: a new session, or the live one that
// matches (200), so a caller that lost the answer resumes.
func (a *API) createUpload(c echo.Context) error {
	var body createUploadBody
	if _, err := readJSON(c, maxJSONBytes, &body, false); err != nil {
		return err
	}
	req, err := a.newUpload(c, body)
	if err != nil {
		return err
	}
	// The request, defaults filled in, canonicalised: key order, whitespace
	// and omitted defaults do not make another request.
	normal, _ := json.Marshal(map[string]any{"path": req.Path, "size_bytes": req.SizeBytes,
		"content_type": req.ContentType, "replace": req.Replace, "sha256": req.SHA256})
	content, _ := idempotency.JSONContentHash(normal)
	ctx := c.Request().Context()
	return a.perform(c, write{
		request: idempotency.Request{Operation: "create_upload", Target: req.Path, MediaType: "application/json", By: req.By},
		content: func() ([]byte, error) { return content, nil },
		run: func(rec record) (out idempotency.Outcome, err error) {
			_, _, err = a.deps.Uploads.CreateUpload(ctx, req, func(ctx context.Context, tx pgx.Tx, u *agentfs.Upload, created bool) error {
				out = a.uploadOutcome(c, u, nil, created)
				if rec == nil {
					return nil
				}
				return rec(ctx, tx, content, out)
			})
			return out, err
		},
		current: func(rec *idempotency.Record) (idempotency.Outcome, error) {
			return a.currentUpload(c, rec.Outcome.Resource.ID)
		},
	})
}

func (a *API) newUpload(c echo.Context, b createUploadBody) (storage.NewUpload, error) {
	req := storage.NewUpload{Subject: principal(c).Subject, By: attributionOf(c),
		PartSize: a.deps.Limits.UploadPartSize, TTL: a.deps.Limits.UploadTTL}
	if b.Path == nil {
		return req, problem.Validation("path", "is required")
	}
	if err := agentfs.ValidatePath(*b.Path); err != nil {
		return req, pathProblem(err)
	}
	req.Path = *b.Path
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
	var err error
	if req.ContentType, err = normalizeMediaType(ct); err != nil {
		return req, problem.Validation("content_type", "is not a valid media type")
	}
	if b.IfExists != nil {
		if req.Replace, err = parseIfExists(*b.IfExists); err != nil {
			return req, problem.Validation("if_exists", err.Error())
		}
	}
	if b.SHA256 != nil {
		if !sha256Hex.MatchString(*b.SHA256) {
			return req, problem.Validation("sha256", "must be 64 lowercase hex digits")
		}
		req.SHA256 = *b.SHA256
	}
	return req, nil
}

// readJSON reads a JSON body of at most limit bytes (413 above) into dst
// strictly: malformed JSON is 400; unknown fields and wrong types are 422
// naming the field. An empty body is allowed only when optional. It
// returns the raw body.
func readJSON(c echo.Context, limit int64, dst any, optional bool) ([]byte, error) {
	req := c.Request()
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, limit))
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
	if !utf8.Valid(raw) {
		return nil, problem.Invalid("body", "JSON must be valid UTF-8")
	}
	if err := decodeStrict(raw, dst); err != nil {
		return nil, err
	}
	return raw, nil
}

// decodeStrict decodes one JSON value into dst, rejecting unknown fields.
func decodeStrict(raw []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return problem.Validation(field, "must be a JSON "+typeErr.Type.String())
	case err != nil && strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return problem.Validation(field, "is not a known field")
	case err != nil:
		return problem.Invalid("body", "malformed JSON")
	}
	if dec.More() {
		return problem.Invalid("body", "the body holds more than one JSON value")
	}
	return nil
}

// getUpload is GET /v1/uploads/{id}: the session and its parts so far.
func (a *API) getUpload(c echo.Context) error {
	out, err := a.currentUpload(c, c.Param("id"))
	if err != nil {
		return err
	}
	out.Status = http.StatusOK
	return writeOutcome(c, out)
}

func (a *API) currentUpload(c echo.Context, id string) (idempotency.Outcome, error) {
	ctx := c.Request().Context()
	u, err := a.deps.Uploads.Upload(ctx, principal(c).Subject, id)
	if err != nil {
		return idempotency.Outcome{}, err
	}
	var f *agentfs.File
	if u.FileID != "" {
		if f, err = a.deps.Files.File(ctx, u.Subject, u.FileID); err != nil {
			return idempotency.Outcome{}, err
		}
	}
	return a.uploadOutcome(c, u, f, false), nil
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
	id := c.Param("id")
	var read []byte
	return a.perform(c, write{
		request: idempotency.Request{Operation: "put_part", Target: id + "/" + strconv.Itoa(n), By: attributionOf(c)},
		content: func() ([]byte, error) {
			switch {
			case digest != nil:
				return digest, nil
			case read != nil:
				return read, nil
			}
			return hashBody(req.Body, req.ContentLength)
		},
		run: func(rec record) (out idempotency.Outcome, err error) {
			_, err = a.deps.Uploads.PutPart(req.Context(), principal(c).Subject, id, n, req.Body, req.ContentLength, digest,
				func(ctx context.Context, tx pgx.Tx, p *agentfs.Part) error {
					read = mustHex(p.SHA256)
					body, _ := json.Marshal(partJSON{Object: "upload_part", UploadID: id, PartNumber: p.Number,
						SizeBytes: p.SizeBytes, SHA256: p.SHA256})
					out = idempotency.Outcome{Status: http.StatusOK, Body: append(body, '\n'),
						Resource: idempotency.Resource{Object: "upload", ID: id}}
					if rec == nil {
						return nil
					}
					return rec(ctx, tx, read, out)
				})
			return out, err
		},
	})
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
	req := storage.CompleteRequest{IfMatch: strings.TrimSpace(c.Request().Header.Get("If-Match"))}
	if body.IfExists != nil {
		replace, err := parseIfExists(*body.IfExists)
		if err != nil {
			return problem.Validation("if_exists", err.Error())
		}
		req.Replace = &replace
	}
	if body.SHA256 != nil {
		if !sha256Hex.MatchString(*body.SHA256) {
			return problem.Validation("sha256", "must be 64 lowercase hex digits")
		}
		req.SHA256 = *body.SHA256
	}
	normal, _ := json.Marshal(map[string]any{"replace": req.Replace, "sha256": req.SHA256})
	content, _ := idempotency.JSONContentHash(normal)
	id := c.Param("id")
	return a.perform(c, write{
		request: idempotency.Request{Operation: "complete_upload", Target: id,
			Params: map[string]string{"if_match": req.IfMatch}, MediaType: "application/json", By: attributionOf(c)},
		content: func() ([]byte, error) { return content, nil },
		run: func(rec record) (out idempotency.Outcome, err error) {
			_, _, err = a.deps.Uploads.CompleteUpload(c.Request().Context(), principal(c).Subject, id, req,
				a.fileHook(rec, &out, func(*agentfs.File) []byte { return content }))
			return out, err
		},
	})
}

// abortUpload is DELETE /v1/uploads/{id}: abort, safe to repeat.
func (a *API) abortUpload(c echo.Context) error {
	id := c.Param("id")
	return a.perform(c, write{
		request: idempotency.Request{Operation: "abort_upload", Target: id, By: attributionOf(c)},
		content: noContent,
		run: func(rec record) (out idempotency.Outcome, err error) {
			_, err = a.deps.Uploads.AbortUpload(c.Request().Context(), principal(c).Subject, id,
				func(ctx context.Context, tx pgx.Tx, u *agentfs.Upload, _ bool) error {
					out = a.uploadOutcome(c, u, nil, false)
					if rec == nil {
						return nil
					}
					return rec(ctx, tx, nil, out)
				})
			return out, err
		},
	})
}

// uploadOutcome is the response showing a session: 201 with Location when
// it was just created, else 200.
func (a *API) uploadOutcome(c echo.Context, u *agentfs.Upload, f *agentfs.File, created bool) idempotency.Outcome {
	body, _ := json.Marshal(a.uploadJSON(c, u, f))
	out := idempotency.Outcome{Status: http.StatusOK, Header: map[string]string{}, Body: append(body, '\n'),
		Resource: idempotency.Resource{Object: "upload", ID: u.ID}}
	if created {
		out.Status = http.StatusCreated
		out.Header[echo.HeaderLocation] = "/v1/uploads/" + u.ID
	}
	return out
}

// uploadJSONT is the Upload object.
type uploadJSONT struct {
	ID          string           `json:"id"`
	Object      string           `json:"object"`
	Path        string           `json:"path"`
	SizeBytes   int64            `json:"size_bytes"`
	ContentType string           `json:"content_type"`
	IfExists    string           `json:"if_exists"`
	SHA256      *string          `json:"sha256"`
	PartSize    int64            `json:"part_size"`
	PartCount   int              `json:"part_count"`
	Status      string           `json:"status"`
	Parts       []partJSON       `json:"parts"`
	ExpiresAt   time.Time        `json:"expires_at"`
	File        *fileJSON        `json:"file"`
	Error       *problem.Problem `json:"error"`
	AgentID     *string          `json:"agent_id"`
	RunID       *string          `json:"run_id"`
	CreatedAt   time.Time        `json:"created_at"`
}

type partJSON struct {
	Object     string `json:"object,omitempty"`
	UploadID   string `json:"upload_id,omitempty"`
	PartNumber int    `json:"part_number"`
	SizeBytes  int64  `json:"size_bytes"`
	SHA256     string `json:"sha256"`
}

func (a *API) uploadJSON(c echo.Context, u *agentfs.Upload, f *agentfs.File) uploadJSONT {
	out := uploadJSONT{
		ID: u.ID, Object: "upload", Path: u.Path, SizeBytes: u.SizeBytes, ContentType: u.ContentType,
		IfExists: "error", SHA256: nullable(u.SHA256), PartSize: u.PartSize, PartCount: u.PartCount,
		Status: u.Status, Parts: make([]partJSON, 0, len(u.Parts)), ExpiresAt: u.ExpiresAt.UTC(),
		AgentID: nullable(u.By.AgentID), RunID: nullable(u.By.RunID), CreatedAt: u.CreatedAt.UTC(),
	}
	if u.Replace {
		out.IfExists = "replace"
	}
	if out.Status == agentfs.UploadPending && !u.ExpiresAt.After(time.Now()) {
		out.Status = agentfs.UploadExpired // the sweeper has not got to it yet
	}
	for _, p := range u.Parts {
		out.Parts = append(out.Parts, partJSON{PartNumber: p.Number, SizeBytes: p.SizeBytes, SHA256: p.SHA256})
	}
	if f != nil {
		fj := a.fileJSON(f)
		out.File = &fj
	}
	if u.Status == agentfs.UploadFailed {
		p := problem.New(problem.ChecksumMismatch, "the assembled content does not match the declared sha256")
		p.RequestID = c.Response().Header().Get(problem.RequestIDHeader)
		p.Instance = "/v1/uploads/" + u.ID
		out.Error = p
	}
	return out
}

func mustHex(s string) []byte { return fileContent(&agentfs.File{SHA256: s}) }
