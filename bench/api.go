package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// api is a minimal AgentFS client: just the calls the measurements make,
// with no retries, so every number is one request.
type api struct {
	base  string
	token string
	hc    *http.Client
}

func newAPI(base, token string, tr *http.Transport) *api {
	return &api{base: base, token: token, hc: &http.Client{Transport: tr}}
}

// file is the part of the File object the measurements look at.
type file struct {
	ID        string `json:"id"`
	SizeBytes int64  `json:"size_bytes"`
}

type upload struct {
	ID        string `json:"id"`
	PartSize  int64  `json:"part_size"`
	PartCount int    `json:"part_count"`
}

type batch struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Counts struct {
		Total     int `json:"total"`
		Succeeded int `json:"succeeded"`
		Failed    int `json:"failed"`
		Pending   int `json:"pending"`
	} `json:"counts"`
	Items []struct {
		Error *struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
	} `json:"items"`
}

// statusError is an answer the measurement did not expect.
type statusError struct {
	method, path string
	status       int
	body         string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: status %d: %s", e.method, e.path, e.status, e.body)
}

// request sends one request. body may be nil; size is its length (-1 for
// unknown). The caller closes the response body.
func (a *api) request(ctx context.Context, method, path string, body io.Reader, size int64, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil && size >= 0 {
		req.ContentLength = size
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	return a.hc.Do(req)
}

// call sends a request, expects one of the want statuses and decodes the
// JSON answer into out (when out is not nil). It returns the response with
// its body consumed and closed.
func (a *api) call(ctx context.Context, method, path string, body io.Reader, size int64, hdr http.Header, out any, want ...int) (*http.Response, error) {
	resp, err := a.request(ctx, method, path, body, size, hdr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ok := false
	for _, w := range want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp, &statusError{method: method, path: path, status: resp.StatusCode, body: string(bytes.TrimSpace(b))}
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return resp, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp, nil
}

var octetStream = http.Header{"Content-Type": {"application/octet-stream"}}

func jsonHeader(key string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return h
}

// putFile is POST /v1/files?path=P with a raw body of known size.
func (a *api) putFile(ctx context.Context, path string, body io.Reader, size int64, hdr http.Header) (*file, *http.Response, error) {
	if hdr == nil {
		hdr = octetStream
	}
	var f file
	resp, err := a.call(ctx, http.MethodPost, "/v1/files?path="+url.QueryEscape(path), body, size, hdr, &f, http.StatusCreated, http.StatusOK)
	if err != nil {
		return nil, resp, err
	}
	if f.SizeBytes != size {
		return nil, resp, fmt.Errorf("upload of %s: file has %d bytes, sent %d", path, f.SizeBytes, size)
	}
	return &f, resp, nil
}

// getContent is GET /v1/files/{id}/content, read to the end.
func (a *api) getContent(ctx context.Context, id string, buf []byte) (int64, error) {
	path := "/v1/files/" + url.PathEscape(id) + "/content"
	resp, err := a.request(ctx, http.MethodGet, path, nil, 0, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return 0, &statusError{method: http.MethodGet, path: path, status: resp.StatusCode, body: string(b)}
	}
	return drain(resp.Body, buf)
}

// deleteFile soft-deletes a file (its blob stays until it is purged).
func (a *api) deleteFile(ctx context.Context, id string) error {
	_, err := a.call(ctx, http.MethodDelete, "/v1/files/"+url.PathEscape(id), nil, 0, nil, nil, http.StatusOK)
	return err
}

// createUpload is POST /v1/uploads.
func (a *api) createUpload(ctx context.Context, path string, size int64) (*upload, error) {
	b, _ := json.Marshal(map[string]any{"path": path, "size_bytes": size, "content_type": "application/octet-stream"})
	var u upload
	if _, err := a.call(ctx, http.MethodPost, "/v1/uploads", bytes.NewReader(b), int64(len(b)), jsonHeader(""), &u, http.StatusCreated); err != nil {
		return nil, err
	}
	if u.ID == "" || u.PartSize <= 0 || u.PartCount <= 0 {
		return nil, fmt.Errorf("POST /v1/uploads: answer lacks id, part_size or part_count: %+v", u)
	}
	return &u, nil
}

// putPart is PUT /v1/uploads/{id}/parts/{n} with Content-Length.
func (a *api) putPart(ctx context.Context, id string, n int, body io.Reader, size int64) error {
	path := "/v1/uploads/" + url.PathEscape(id) + "/parts/" + strconv.Itoa(n)
	_, err := a.call(ctx, http.MethodPut, path, body, size, octetStream, nil, http.StatusOK, http.StatusCreated)
	return err
}

// completeUpload is POST /v1/uploads/{id}/complete.
func (a *api) completeUpload(ctx context.Context, id string) (*file, error) {
	var f file
	_, err := a.call(ctx, http.MethodPost, "/v1/uploads/"+url.PathEscape(id)+"/complete", nil, 0, nil, &f, http.StatusCreated, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// abortUpload is DELETE /v1/uploads/{id}; failures are ignored.
func (a *api) abortUpload(ctx context.Context, id string) {
	_, _ = a.call(ctx, http.MethodDelete, "/v1/uploads/"+url.PathEscape(id), nil, 0, nil, nil, http.StatusOK)
}

// list is GET /v1/files?query and returns how many files the page held.
func (a *api) list(ctx context.Context, query string) (int, error) {
	var page struct {
		Data []json.RawMessage `json:"data"`
	}
	if _, err := a.call(ctx, http.MethodGet, "/v1/files?"+query, nil, 0, nil, &page, http.StatusOK); err != nil {
		return 0, err
	}
	return len(page.Data), nil
}
