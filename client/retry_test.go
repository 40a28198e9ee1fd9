package client

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// TestClassify is the client retry policy for every route the client
// sends.
func TestClassify(t *testing.T) {
	t.Parallel()
	const maxDelay = 30 * time.Second
	// unknownOutcomeSafe: may the request be repeated without a key after
	// its connection failed before any response?
	routes := []struct {
		call               call
		unknownOutcomeSafe bool
	}{
		{call{Route: routeProtocol}, true},
		{call{Route: routePutFile}, false},
		{call{Route: routePutFile, Replace: true}, true},
		{call{Route: routeListFiles}, true},
		{call{Route: routeFile}, true},
		{call{Route: routeFileContent}, true},
		{call{Route: routeDeleteFile}, true},
		{call{Route: routeRestoreFile}, true},
		{call{Route: routeOperation}, true},
		{call{Route: routeCreateUpload}, true},
		{call{Route: routeUploadPart}, true},
		{call{Route: routeComplete}, true},
		{call{Route: routeAbortUpload}, true},
		{call{Route: routeUpload}, true},
		{call{Route: routeBatch}, true},
		// POST /v1/batch always carries a key (CreateBatch makes one);
		// without it the server refuses it, so it is never repeated.
		{call{Route: routeCreateBatch}, false},
		{call{Route: routeListBatches}, true},
		{call{Route: routeCancelBatch}, true},
		{call{Route: routeListUploads}, true},
		{call{Route: routeListVersions}, true},
		{call{Route: routeVersion}, true},
		{call{Route: routeVersionContent}, true},
		// A revert or a move repeated without a key could undo a write
		// made in between; with one (the client makes one) it replays.
		{call{Route: routeRevert}, false},
		{call{Route: routeMove}, false},
		{call{Route: routePatchFile}, true},
		{call{Route: routeCreateLink}, false},
		{call{Route: routeLinks}, true},
		{call{Route: routeRevokeLink}, true},
		{call{Route: routeEvents}, true},
		{call{Route: routeRun}, true},
		{call{Route: routeRunArchive}, true},
		{call{Route: routeRunRecovery}, true},
		// A run revert always carries a key (RevertRun makes one), like
		// a batch; without it the server refuses it.
		{call{Route: routeRevertRun}, false},
	}
	type row struct {
		name  string
		res   result
		keyed verdict // the verdict for the request with an Idempotency-Key
		plain verdict // without one; -1: as unknownOutcomeSafe says
	}
	const bySafety verdict = -1
	rows := []row{
		{"ConnectionFailed", result{}, retry, bySafety},
		{"ConnectionFailedBodyLost", result{BodyLost: true}, stop, stop},
		{"408", result{Status: 408, Code: "REQUEST_TIMEOUT"}, retry, retry},
		{"429", result{Status: 429, Code: "RATE_LIMITED", RetryAfter: time.Second}, retry, retry},
		{"429Quota", result{Status: 429, Code: "QUOTA_EXCEEDED", RetryAfter: 20 * time.Second}, retry, retry},
		{"500", result{Status: 500, Code: "INTERNAL"}, retry, retry},
		{"502NotAProblem", result{Status: 502}, retry, retry},
		{"503", result{Status: 503, Code: "STORAGE_UNAVAILABLE", RetryAfter: time.Second}, retry, retry},
		{"504", result{Status: 504}, retry, retry},
		{"503RetryAfterAtCap", result{Status: 503, RetryAfter: maxDelay}, retry, retry},
		{"503RetryAfterAboveCap", result{Status: 503, RetryAfter: maxDelay + time.Second}, stop, stop},
		{"429RetryAfterAboveCap", result{Status: 429, RetryAfter: time.Hour}, stop, stop},
		{"503BodyLost", result{Status: 503, BodyLost: true}, stop, stop},
		{"InProgress", result{Status: 409, Code: "OPERATION_IN_PROGRESS", RetryAfter: time.Second}, poll, bySafety},
		{"InProgressNoRetryAfter", result{Status: 409, Code: "OPERATION_IN_PROGRESS"}, poll, bySafety},
		{"InProgressBodyLost", result{Status: 409, Code: "OPERATION_IN_PROGRESS", BodyLost: true}, poll, stop},
		{"InProgressRetryAfterAboveCap", result{Status: 409, Code: "OPERATION_IN_PROGRESS", RetryAfter: time.Minute}, stop, stop},
		{"400", result{Status: 400, Code: "INVALID_REQUEST"}, stop, stop},
		{"401", result{Status: 401, Code: "UNAUTHENTICATED"}, stop, stop},
		{"403", result{Status: 403, Code: "FORBIDDEN"}, stop, stop},
		{"404", result{Status: 404, Code: "NOT_FOUND"}, stop, stop},
		{"405", result{Status: 405, Code: "METHOD_NOT_ALLOWED"}, stop, stop},
		{"409PathExists", result{Status: 409, Code: "PATH_EXISTS"}, stop, stop},
		{"409Conflict", result{Status: 409, Code: "IDEMPOTENCY_CONFLICT"}, stop, stop},
		{"409UploadCompleted", result{Status: 409, Code: "UPLOAD_COMPLETED"}, stop, stop},
		{"409UploadAborted", result{Status: 409, Code: "UPLOAD_ABORTED"}, stop, stop},
		{"409UploadExpired", result{Status: 409, Code: "UPLOAD_EXPIRED"}, stop, stop},
		{"422SizeMismatch", result{Status: 422, Code: "SIZE_MISMATCH"}, stop, stop},
		{"422PartsMissing", result{Status: 422, Code: "PARTS_MISSING"}, stop, stop},
		{"400KeyRequired", result{Status: 400, Code: "IDEMPOTENCY_KEY_REQUIRED"}, stop, stop},
		{"409WithRetryAfter", result{Status: 409, Code: "PATH_EXISTS", RetryAfter: time.Second}, stop, stop},
		{"411", result{Status: 411, Code: "LENGTH_REQUIRED"}, stop, stop},
		{"412", result{Status: 412, Code: "PRECONDITION_FAILED"}, stop, stop},
		{"413", result{Status: 413, Code: "PAYLOAD_TOO_LARGE"}, stop, stop},
		{"415", result{Status: 415, Code: "UNSUPPORTED_MEDIA_TYPE"}, stop, stop},
		{"416", result{Status: 416, Code: "RANGE_NOT_SATISFIABLE"}, stop, stop},
		{"422Checksum", result{Status: 422, Code: "CHECKSUM_MISMATCH"}, stop, stop},
		{"422Validation", result{Status: 422, Code: "VALIDATION_FAILED"}, stop, stop},
		{"451", result{Status: 451, Code: "CONTENT_BLOCKED"}, stop, stop},
	}
	for _, rt := range routes {
		for _, rw := range rows {
			name := fmt.Sprintf("%s/replace=%v/%s", rt.call.Route, rt.call.Replace, rw.name)
			t.Run(name, func(t *testing.T) {
				keyed := rt.call
				keyed.Keyed = true
				if got := classify(keyed, rw.res, maxDelay); got != rw.keyed {
					t.Errorf("keyed: %v, want %v", got, rw.keyed)
				}
				want := rw.plain
				if want == bySafety {
					want = stop
					if rt.unknownOutcomeSafe {
						want = retry
					}
				}
				if got := classify(rt.call, rw.res, maxDelay); got != want {
					t.Errorf("without key: %v, want %v", got, want)
				}
			})
		}
	}
}

func TestServerRoute(t *testing.T) {
	t.Parallel()
	for route, want := range map[string]string{
		routePutFile:     "/v1/files",
		routeDeleteFile:  "/v1/files/:id",
		routeRestoreFile: "/v1/files/:id/restore",
		routeUploadPart:  "/v1/uploads/:id/parts/:n",
		routeComplete:    "/v1/uploads/:id/complete",
		routeCreateBatch: "/v1/batch",
		routeRevert:      "/v1/files/:id/revert",
		routeMove:        "/v1/files/:id/move",
		routePatchFile:   "/v1/files/:id",
		routeCreateLink:  "/v1/files/:id/links",
		routeRevokeLink:  "/v1/links/:id",
		routeCancelBatch: "/v1/batch/:id/cancel",
	} {
		if got := serverRoute(route); got != want {
			t.Errorf("serverRoute(%q) = %q, want %q", route, got, want)
		}
	}
}

// TestDelaysFullJitter draws many waits from a seeded source: each lies in
// [0, the doubling delay capped at MaxDelay], and they spread over that
// whole range.
func TestDelaysFullJitter(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 8, InitialDelay: time.Second, MaxDelay: 30 * time.Second}
	bounds := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	low, high := make([]bool, len(bounds)), make([]bool, len(bounds))
	for seed := uint64(0); seed < 500; seed++ {
		d := newDelays(p, &lockedRand{r: rand.New(rand.NewPCG(seed, 1))})
		for i, b := range bounds {
			bound := b * time.Second
			w := d.NextBackOff()
			if w < 0 || w > bound {
				t.Fatalf("seed %d wait %d = %v, outside [0, %v]", seed, i, w, bound)
			}
			low[i] = low[i] || w < bound/4
			high[i] = high[i] || w > bound*3/4
		}
	}
	for i := range bounds {
		if !low[i] || !high[i] {
			t.Errorf("wait %d never fell in both the low and the high quarter of its range", i)
		}
	}
}

func TestDelaysSeededSourceRepeats(t *testing.T) {
	t.Parallel()
	p, _ := RetryPolicy{}.withDefaults()
	waits := func() []time.Duration {
		d := newDelays(p, &lockedRand{r: rand.New(rand.NewPCG(42, 7))})
		var out []time.Duration
		for range 6 {
			out = append(out, d.NextBackOff())
		}
		return out
	}
	a, b := waits(), waits()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("one seed gave %v and %v", a, b)
	}
	other := newDelays(p, &lockedRand{r: rand.New(rand.NewPCG(43, 7))})
	same := true
	for _, w := range a {
		same = same && other.NextBackOff() == w
	}
	if same {
		t.Fatal("another seed gave the same waits")
	}
}

// TestDelaysRetryAfterIsAFloor: a hint is never shortened by the jitter,
// applies to the next wait only, and the doubling goes on beneath it.
func TestDelaysRetryAfterIsAFloor(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Second}
	for seed := uint64(0); seed < 200; seed++ {
		d := newDelays(p, &lockedRand{r: rand.New(rand.NewPCG(seed, 2))})
		d.atLeast(5 * time.Second)
		if w := d.NextBackOff(); w < 5*time.Second {
			t.Fatalf("seed %d: waited %v despite Retry-After 5s", seed, w)
		}
		if w := d.NextBackOff(); w > 20*time.Millisecond {
			t.Fatalf("seed %d: the floor outlived its wait: %v", seed, w)
		}
	}
}

// TestDelaysStopAfterMaxAttempts: wrapped as the client wraps it, the
// backoff allows MaxAttempts-1 waits, then stops.
func TestDelaysStopAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	for _, attempts := range []int{1, 2, 8} {
		p, err := RetryPolicy{MaxAttempts: attempts}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		b := backoff.WithMaxRetries(newDelays(p, &lockedRand{}), uint64(p.MaxAttempts-1))
		waits := 0
		for b.NextBackOff() != backoff.Stop {
			waits++
		}
		if waits != attempts-1 {
			t.Errorf("MaxAttempts %d: %d waits, want %d", attempts, waits, attempts-1)
		}
	}
}

func TestRetryPolicyDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	p, err := RetryPolicy{}.withDefaults()
	if err != nil || p.MaxAttempts != 8 || p.InitialDelay != time.Second || p.MaxDelay != 30*time.Second {
		t.Fatalf("defaults %+v, %v", p, err)
	}
	for _, bad := range []RetryPolicy{
		{MaxDelay: 61 * time.Second},
		{MaxAttempts: -1},
		{InitialDelay: -time.Second},
		{InitialDelay: 2 * time.Second, MaxDelay: time.Second},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
		if _, err := New("http://127.0.0.1:1", "t", WithRetryPolicy(bad)); err == nil {
			t.Errorf("New accepted %+v", bad)
		}
	}
	if p, err := (RetryPolicy{MaxDelay: 60 * time.Second}).withDefaults(); err != nil || p.MaxDelay != time.Minute {
		t.Fatalf("60s cap: %+v, %v", p, err)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                  0,
		"1":                 time.Second,
		" 30 ":              30 * time.Second,
		"0":                 0,
		"-5":                0,
		"soon":              0,
		"1.5":               0,
		"99999999999999999": maxRetryAfter,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestProblemOfNonProblemBody(t *testing.T) {
	t.Parallel()
	res := &http.Response{
		StatusCode: 502,
		Header:     http.Header{"Retry-After": {"3"}, "X-Request-Id": {"req_x"}},
	}
	res.Body = io.NopCloser(strings.NewReader("<html>bad gateway</html>"))
	p := problemOf(res)
	if p.Status != 502 || p.Code != "" || !p.Retryable || p.RetryAfter != 3*time.Second || p.RequestID != "req_x" ||
		!strings.Contains(p.Detail, "bad gateway") {
		t.Fatalf("problem %+v", p)
	}
	if !strings.Contains(p.Error(), "502") {
		t.Fatalf("Error() = %q", p.Error())
	}
}

func TestSHA256OfDigest(t *testing.T) {
	t.Parallel()
	const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for v, want := range map[string]string{
		"sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:":             empty,
		"md5=:abc=:, sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:": empty,
		"sha-256=:short=:": "",
		"":                 "",
	} {
		if got := sha256OfDigest(v); got != want {
			t.Errorf("sha256OfDigest(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	t.Parallel()
	for name, mk := range map[string]func() (*Client, error){
		"NoScheme":   func() (*Client, error) { return New("127.0.0.1:8080", "t") },
		"FTP":        func() (*Client, error) { return New("ftp://h", "t") },
		"Query":      func() (*Client, error) { return New("http://h/?a=1", "t") },
		"BadAgentID": func() (*Client, error) { return New("http://h", "t", WithAgentID("has space")) },
		"BadRunID":   func() (*Client, error) { return New("http://h", "t", WithRunID("")) },
		"NilHTTP":    func() (*Client, error) { return New("http://h", "t", WithHTTPClient(nil)) },
	} {
		if _, err := mk(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New("https://h:1/prefix/", "t", WithAgentID("a-1"), WithRunID("run:2")); err != nil {
		t.Fatal(err)
	}
}

func TestNewIdempotencyKeyMatchesPattern(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k := NewIdempotencyKey()
		if !keyPattern.MatchString(k) || seen[k] {
			t.Fatalf("key %q is malformed or repeated", k)
		}
		seen[k] = true
	}
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
