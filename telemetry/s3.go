package telemetry

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// s3Timer is an S3 client's transport that times each request by its
// operation and counts the bytes of its bodies.
type s3Timer struct {
	next   http.RoundTripper
	bucket string
	h      *prometheus.HistogramVec
	bytes  *prometheus.CounterVec
}

// RoundTrip sends r, timing it until the answer's headers. A request body
// counts by its declared length once S3 answered; a response body counts as
// it is read.
func (t *s3Timer) RoundTrip(r *http.Request) (*http.Response, error) {
	op := s3Operation(r, t.bucket)
	start := time.Now()
	res, err := t.next.RoundTrip(r)
	t.h.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		return res, err
	}
	if r.ContentLength > 0 {
		t.bytes.WithLabelValues(op, "sent").Add(float64(r.ContentLength))
	}
	if res.Body != nil && res.Body != http.NoBody {
		res.Body = &countedReader{rc: res.Body, c: t.bytes.WithLabelValues(op, "received")}
	}
	return res, nil
}

// countedReader counts the bytes read through it.
type countedReader struct {
	rc io.ReadCloser
	c  prometheus.Counter
}

func (b *countedReader) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.c.Add(float64(n))
	}
	return n, err
}

func (b *countedReader) Close() error { return b.rc.Close() }

// s3Operations are every value s3Operation returns: the label values of the
// S3 series.
var s3Operations = []string{
	"get", "stat", "list", "get_tags", "bucket_exists", "bucket_location",
	"put", "copy", "tag", "make_bucket",
	"delete", "delete_many", "delete_tags", "delete_bucket",
	"multipart_create", "multipart_part", "multipart_copy_part", "multipart_complete",
	"multipart_abort", "multipart_list_parts", "multipart_list_uploads",
	"other",
}

// s3Operation names the S3 operation a request asks for, from its method,
// its query's sub-resources and the copy header: a closed set
// (s3Operations), never the bucket or the key. bucket tells a
// virtual-hosted request (bucket.host/key) from a path-style one
// (host/bucket/key).
func s3Operation(r *http.Request, bucket string) string {
	q := r.URL.Query()
	object := isObjectRequest(r, bucket)
	copying := r.Header.Get("X-Amz-Copy-Source") != ""
	switch r.Method {
	case http.MethodGet:
		switch {
		case q.Has("uploadId"):
			return "multipart_list_parts"
		case q.Has("uploads"):
			return "multipart_list_uploads"
		case q.Has("tagging"):
			return "get_tags"
		case q.Has("location"):
			return "bucket_location"
		case object:
			return "get"
		}
		return "list"
	case http.MethodHead:
		if object {
			return "stat"
		}
		return "bucket_exists"
	case http.MethodPut:
		switch {
		case q.Has("tagging"):
			return "tag"
		case q.Has("uploadId") && copying:
			return "multipart_copy_part"
		case q.Has("uploadId"):
			return "multipart_part"
		case copying:
			return "copy"
		case object:
			return "put"
		}
		return "make_bucket"
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return "multipart_create"
		case q.Has("uploadId"):
			return "multipart_complete"
		case q.Has("delete"):
			return "delete_many"
		}
	case http.MethodDelete:
		switch {
		case q.Has("uploadId"):
			return "multipart_abort"
		case q.Has("tagging"):
			return "delete_tags"
		case object:
			return "delete"
		}
		return "delete_bucket"
	}
	return "other"
}

// isObjectRequest reports whether r names an object rather than a bucket.
func isObjectRequest(r *http.Request, bucket string) bool {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if bucket != "" && strings.HasPrefix(r.URL.Hostname(), bucket+".") {
		return path != "" // virtual-hosted: the path is the key
	}
	_, key, _ := strings.Cut(path, "/") // path-style: bucket/key
	return key != ""
}
