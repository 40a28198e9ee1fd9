package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// askRedirect makes a content request ask for a presigned S3 URL
// (redirect=true) and answer the 307 instead of following it.
func askRedirect(r *request) {
	if r.query == nil {
		r.query = url.Values{}
	}
	r.query.Set("redirect", "true")
	r.noFollow = true
}

// httpFor is the HTTP client that sends r: c's own, or for a request that
// must see a redirect, a copy of it that does not follow one.
func (c *Client) httpFor(r *request) *http.Client {
	if !r.noFollow {
		return c.http
	}
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hc
}

// RedirectError says that S3 refused the presigned URL the server
// redirected a content request to (an expired URL, a public endpoint that
// does not reach the bucket).
type RedirectError struct {
	Status int    // S3's status
	Code   string // S3's error code, when its body names one
}

func (e *RedirectError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("the presigned S3 URL of the content was refused: %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("the presigned S3 URL of the content was refused: %d", e.Status)
}

// followBlobRedirect fetches the presigned URL of a 307 from S3, without
// the Authorization header (the token is not S3's to see, and S3 refuses
// a request carrying two kinds of credentials). A Range is sent as is;
// If-Range is decided here, against the ETag the server announced for
// the blob (S3's own ETags are not AgentFS's): content replaced since
// comes back whole, as the server would have answered.
func (c *Client) followBlobRedirect(ctx context.Context, redirect *http.Response, opts ContentOptions) (*http.Response, error) {
	redirect.Body.Close()
	loc, err := redirect.Request.URL.Parse(redirect.Header.Get("Location"))
	if err != nil || loc.Host == "" {
		return nil, fmt.Errorf("content: the server's redirect has no usable Location %q", redirect.Header.Get("Location"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	if opts.Range != "" && (opts.IfRange == "" || opts.IfRange == redirect.Header.Get("ETag")) {
		req.Header.Set("Range", opts.Range)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("content: the presigned S3 URL: %w", err)
	}
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusPartialContent {
		return res, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	e := &RedirectError{Status: res.StatusCode}
	if _, rest, ok := strings.Cut(string(b), "<Code>"); ok {
		e.Code, _, _ = strings.Cut(rest, "</Code>")
	}
	return nil, e
}
