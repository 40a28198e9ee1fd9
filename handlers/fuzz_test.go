package handlers_test

// Fuzz targets that drive the real router on the real test Postgres and S3
// (see apitest.NewServer): whatever a caller sends (paths, headers, query
// strings, JSON and multipart bodies), the API never answers 5xx, never
// panics or drops the connection, never hangs, answers every error as a
// problem with a code, and, on a route openapi.yaml declares, answers as the
// spec says.
//
// These targets need the test servers, so scripts/fuzz.sh (make fuzz), which
// runs without them, cannot run them; scripts/test.sh can, e.g.
//
//	scripts/test.sh ./handlers/ -run '^$' -fuzz '^FuzzUploadRequest$' -fuzztime 60s -fuzzminimizetime 20x
//
// An input takes milliseconds here, not microseconds, so bound minimizing
// by a count: the default of 60 s per new input leaves little time to fuzz.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/jsonutf8"
)

// fuzzTimeout bounds one exchange. Every answer takes far less; only a hang
// trips it.
const fuzzTimeout = 20 * time.Second

// fuzzServer is one API server shared by every input of a fuzz target.
type fuzzServer struct {
	srv       *apitest.Server
	readWrite string // token of subject "fuzz" with read and write
	readOnly  string // token of subject "fuzz" with read only
	client    *http.Client
	prefix    string // makes this process's fresh keys and paths unique
	seq       atomic.Int64
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	srv := apitest.NewServer(f, apitest.Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	f.Cleanup(tr.CloseIdleConnections)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &fuzzServer{
		srv:       srv,
		readWrite: srv.Token(f, "fuzz"),
		readOnly:  srv.Token(f, "fuzz", "read"),
		client: &http.Client{
			Transport:     tr,
			Timeout:       fuzzTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		prefix: hex.EncodeToString(b[:]),
	}
}

// fresh returns a name no other input of this process uses.
func (s *fuzzServer) fresh(kind string) string {
	return fmt.Sprintf("%s-%s-%d", kind, s.prefix, s.seq.Add(1))
}

// fuzzRequest is one request as sent, kept whole so a failure can print a
// reproducer.
type fuzzRequest struct {
	method  string
	target  string // request target: path and query, already valid on the wire
	header  http.Header
	body    []byte
	chunked bool // send the body without Content-Length
}

func newFuzzRequest(method, target string) *fuzzRequest {
	return &fuzzRequest{method: method, target: target, header: http.Header{}}
}

// set adds header name with the fuzzed value v: each line of v is one field
// line (so a value with a newline sends the header twice), with the bytes
// no HTTP/1.1 field value may hold removed, as neither Go's client nor its
// server lets them through. An empty v sends nothing.
func (r *fuzzRequest) set(name, v string) *fuzzRequest {
	if v == "" {
		return r
	}
	for _, line := range strings.Split(v, "\n") {
		r.header[name] = append(r.header[name], fieldValue(line))
	}
	return r
}

func fieldValue(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c != 0x7f || c == '\t' {
			b = append(b, c)
		}
	}
	return string(b)
}

func (r *fuzzRequest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.method, r.target)
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range r.header[k] {
			if k == "Authorization" && len(v) > 12 {
				v = v[:12] + "…"
			}
			fmt.Fprintf(&b, "\n  %s: %q", k, clip(v))
		}
	}
	if r.chunked {
		b.WriteString("\n  (body sent chunked, without Content-Length)")
	}
	fmt.Fprintf(&b, "\n  body (%d bytes): %q", len(r.body), clip(string(r.body)))
	return b.String()
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}

// do sends the request with the token for auth (see fuzzServer.auth) and
// checks the answer; the test fails on a 5xx, a broken or hanging exchange,
// an error that is no problem, or an answer that breaks openapi.yaml.
func (s *fuzzServer) do(t *testing.T, r *fuzzRequest, token string) *apitest.Response {
	t.Helper()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // unknown length: Transfer-Encoding: chunked
		}
	}
	req, err := http.NewRequest(r.method, s.srv.URL+r.target, body)
	if err != nil {
		return nil // not a request Go's client sends: nothing reaches the server to check
	}
	if token != "" {
		r.header.Set("Authorization", token)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	res, err := s.client.Do(req)
	if err != nil {
		if clientRefused(err) {
			return nil // Go's client would not send it, so the server never sees it
		}
		s.broken(t, r, err)
	}
	out := s.read(t, r, res)
	s.check(t, r, req, out)
	return out
}

// read reads the whole answer to r, failing on an exchange that breaks
// while it does.
func (s *fuzzServer) read(t *testing.T, r fmt.Stringer, res *http.Response) *apitest.Response {
	t.Helper()
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		s.broken(t, r, err)
	}
	return &apitest.Response{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// clientRefused reports whether Go's client refused to send a request
// (an input no real client of this kind can produce).
func clientRefused(err error) bool {
	msg := err.Error()
	for _, refused := range []string{"invalid header field", "invalid method", "can't write control character", "invalid trailer"} {
		if strings.Contains(msg, refused) {
			return true
		}
	}
	return false
}

// broken fails on an exchange that ended without a whole response; r
// prints the request as sent.
func (s *fuzzServer) broken(t *testing.T, r fmt.Stringer, err error) {
	t.Helper()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("no answer within %v (a hang): %v\nrequest: %s", fuzzTimeout, err, r)
	}
	t.Fatalf("the exchange broke (a panic or a dropped connection?): %v\nrequest: %s", err, r)
}

// check holds an answer to the rules every answer obeys, and logs the
// reproducer when it breaks one.
func (s *fuzzServer) check(t *testing.T, r *fuzzRequest, req *http.Request, res *apitest.Response) {
	t.Helper()
	if res.Header.Get("X-Request-ID") == "" {
		t.Errorf("no X-Request-ID")
	}
	if res.Status >= 500 {
		t.Errorf("answered %d: %s", res.Status, clip(string(res.Body)))
	}
	if res.Status >= 400 {
		if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%d with Content-Type %q, want application/problem+json", res.Status, ct)
		}
		if r.method != http.MethodHead {
			var p struct {
				Code   string `json:"code"`
				Status int    `json:"status"`
			}
			if err := json.Unmarshal(res.Body, &p); err != nil || p.Code == "" || p.Status != res.Status {
				t.Errorf("%d body is not a problem with a code (%v): %s", res.Status, err, clip(string(res.Body)))
			}
		}
	}
	// A route the spec declares must be answered as it says; any other is
	// only held to the rules above.
	_, router := apitest.Spec(t)
	if _, _, err := router.FindRoute(req); err == nil {
		apitest.Check(t, req, res)
	}
	if t.Failed() {
		t.Logf("reproducer: %s\nanswer %d %v\n%s", r, res.Status, res.Header, clip(string(res.Body)))
	}
}

// bearer returns the Authorization value of a token.
func bearer(tok string) string { return "Bearer " + tok }

// auth picks how a request authenticates: mostly with the read-write
// token, sometimes read-only, with none, or with garbage.
func (s *fuzzServer) auth(n uint8) string {
	switch n % 8 {
	case 5:
		return bearer(s.readOnly)
	case 6:
		return ""
	case 7:
		return "Bearer afs_not-a-token"
	}
	return bearer(s.readWrite)
}

// setup sends a request the fuzz target needs to have succeeded.
func (s *fuzzServer) setup(t testing.TB, method, target string, body []byte, want int, headers ...string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+target, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", bearer(s.readWrite))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, target, res.StatusCode, want, raw)
	}
	return raw
}

func (s *fuzzServer) setupID(t testing.TB, method, target string, body []byte, want int, headers ...string) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(s.setup(t, method, target, body, want, headers...), &v); err != nil || v.ID == "" {
		t.Fatalf("%s %s: no id (%v)", method, target, err)
	}
	return v.ID
}

// nextCursor is the query-escaped member field (a page's next_cursor) of
// the answer to GET target, which the fuzz target needs to have one.
func (s *fuzzServer) nextCursor(t testing.TB, target, field string) string {
	t.Helper()
	var page map[string]any
	if err := json.Unmarshal(s.setup(t, "GET", target, nil, http.StatusOK), &page); err != nil {
		t.Fatal(err)
	}
	c, _ := page[field].(string)
	if c == "" {
		t.Fatalf("%s: no %s", target, field)
	}
	return url.QueryEscape(c)
}

// get sends GET target with the fuzzed query, if any, under the
// read-write token.
func (s *fuzzServer) get(t *testing.T, target, query string) {
	if query != "" {
		target += "?" + escapeTarget(query, true)
	}
	s.do(t, newFuzzRequest(http.MethodGet, target), bearer(s.readWrite))
}

// escapeTarget makes s valid in a request target (RFC 9112 §3.2) without
// changing what is already valid: bytes outside pchar are percent-encoded
// and so is a '%' that starts no escape, so the request reaches the API
// rather than being refused by the HTTP server. Percent escapes stay as
// sent: %00, %2F and %FF reach the router. In a path (query false) '?'
// is encoded too.
func escapeTarget(s string, query bool) string {
	const hexDigits = "0123456789ABCDEF"
	isHex := func(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0 || query && c == '?'
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			ok = true
		}
		if ok {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// FuzzUploadRequest fuzzes a raw POST /v1/files: its path and if_exists
// (as encoded query values, or a raw query string), the headers an upload
// reads, and a small body.
func FuzzUploadRequest(f *testing.F) {
	s := newFuzzServer(f)
	long := strings.Repeat("a", 5000)
	for _, seed := range []struct {
		path, ifExists, rawQuery                     string
		useRaw                                       bool
		agent, run, ct, digest, ifMatch, ifNone, key string
		body                                         string
		chunked                                      bool
	}{
		{"notes/a.txt", "", "", false, "agent-1", "run-1", "text/plain", digestHeader("hello"), "", "", "", "hello", false},
		{"notes/a.txt", "replace", "", false, "", "", "text/plain; charset=utf-8", "", `"` + sha("hello") + `"`, "", "up-1", "hello again", false},
		{"notes/b.txt", "error", "", false, "", "", "", "", "", "*", "up-2", "", true},
		{"a\x00b/\x01c\x7f", "replace\x00", "", false, "a\x00gent", "run\r\nX-Injected: 1", "text/\x00plain", "sha-256=:\x00:", "\x00", "\x01", "k\x00", "\x00\x01\x02", false},
		{"../etc/passwd", "sometimes", "", false, "..", "../..", "../..", "", "..", "..", "..", "..", false},
		{"./a/../b//c/", "Replace", "", false, "-lead", "run id", "", "", "", "", "", "x", false},
		{strings.Repeat("ab/", 400), long, "", false, long, long, "text/" + long, "sha-256=:" + long + ":", `"` + long + `"`, long, long, long, false},
		{"bad\xff\xfe.txt", "\xff", "", false, "\xff", "r\xc3", "text/\xff", "sha-256=:\xff:", "\"\xff\"", "\xff", "\xff", "\xff\xfe", false},
		{"", "", "path=n.txt&if_exists=replace&limit=99999999999999999999999", true, "", "", "", "sha-256=:" + base64.StdEncoding.EncodeToString(make([]byte, 4096)) + ":", "", "", "99999999999999999999999999", "big", false},
		{"", "", "path=-1&if_exists=-1&size=-9223372036854775808", true, "-1", "-1", "", "", "-1", "-1", "-1", "neg", true},
		{"", "", "path=%zz&path=a&if_exists=%00&path", true, "", "", "", "", "", "", "", "raw", false},
		{"", "", "path=d%2Fe.txt&;if_exists=replace;&&=&%", true, "", "", "", "", "", "", "", "semi", false},
		{"dup.txt", "", "", false, "a1\na2", "r1\nr2", "text/plain\ntext/html", digestHeader("x") + "\n" + digestHeader("y"), "\"a\"\n\"b\"", "*\n*", "k1\nk2", "x", false},
		{"m.txt", "", "", false, "", "", "multipart/form-data; boundary=x", "", "", "", "", "--x\r\nnot a form", false},
		{"m2.txt", "", "", false, "", "", "multipart/form-data", "", "", "", "", "", false},
		{"w.txt", "", "", false, "", "", "", "", "*", "W/\"x\"", "\"quoted-key\"", "w", false},
		{"digests.txt", "", "", false, "", "", "", digestHeader("a") + ", " + digestHeader("b"), "", "", "", "a", false},
		{"digest-sha512.txt", "", "", false, "", "", "", "sha-512=:AAAA:, md5=x, sha-256=:" + strings.TrimRight(digestHeader("q")[9:], "=:") + ":", "", "", "", "q", true},
		{"ct.bin", "", "", false, "", "", ";;;", "", "", "", "", "", false},
		{"ct2.bin", "", "", false, "", "", "text/plain; charset=\"unterminated", "", "", "", "", "", false},
		{"", "", "", false, "", "", "", "", "", "", "", "", false},
		{"notes/a.txt", "replace", "", false, "", "", "", "", "\"\xff\"", "", "", "x", false},
		{"notes/a.txt", "replace", "", false, "", "", "", "", "*", "*", "", "x", false},
	} {
		f.Add(seed.path, seed.ifExists, seed.rawQuery, seed.useRaw, seed.agent, seed.run, seed.ct, seed.digest,
			seed.ifMatch, seed.ifNone, seed.key, []byte(seed.body), seed.chunked)
	}
	f.Fuzz(func(t *testing.T, path, ifExists, rawQuery string, useRaw bool,
		agent, run, ct, digest, ifMatch, ifNone, key string, body []byte, chunked bool) {
		target := "/v1/files"
		if useRaw {
			target += "?" + escapeTarget(rawQuery, true)
		} else {
			q := url.Values{}
			if path != "" {
				q.Set("path", path)
			}
			if ifExists != "" {
				q.Set("if_exists", ifExists)
			}
			if len(q) > 0 {
				target += "?" + q.Encode()
			}
		}
		r := newFuzzRequest(http.MethodPost, target)
		r.set("X-Agent-ID", agent).set("X-Run-ID", run).set("Content-Type", ct).set("Content-Digest", digest).
			set("If-Match", ifMatch).set("If-None-Match", ifNone).set("Idempotency-Key", key)
		r.body, r.chunked = body, chunked
		s.do(t, r, bearer(s.readWrite))
	})
}

// FuzzMultipartUpload fuzzes a multipart/form-data POST /v1/files: the
// boundary (as used and as declared), two form fields, the file part's
// field name and headers, its content, and the form's layout.
func FuzzMultipartUpload(f *testing.F) {
	s := newFuzzServer(f)
	const (
		withField1  = 1 << iota // write the first field
		withField2              // write the second field
		fileFirst               // the file part comes before the fields
		noFile                  // no file part
		unclosed                // no closing boundary
		chunkedBody             // no Content-Length
		bareLF                  // lines end in LF, not CRLF
		preamble                // text before the first boundary
	)
	const fields = withField1 | withField2
	long := strings.Repeat("p", 5000)
	for _, seed := range []struct {
		boundary, declared, name1, value1, name2, value2, fileName, fileHeaders string
		content                                                                 string
		layout                                                                  uint8
	}{
		{"b0undary", "", "path", "mp/a.txt", "if_exists", "error", "file", "Content-Type: text/plain", "hello", fields},
		{"b0undary", "", "path", "mp/a.txt", "if_exists", "replace", "file", "", "hello again", fields | chunkedBody},
		{"xyz", "", "path", "mp/first.txt", "if_exists", "replace", "file", "", "file before its fields", fields | fileFirst},
		{"xyz", "", "path", "mp/nofile.txt", "if_exists", "", "file", "", "", withField1 | noFile},
		{"xyz", "", "path", "mp/unclosed.txt", "", "", "file", "", "truncated", withField1 | unclosed},
		{"xyz", "other", "path", "mp/mismatch.txt", "", "", "file", "", "x", withField1},
		{"", "", "path", "mp/empty-boundary.txt", "", "", "file", "", "x", withField1},
		{strings.Repeat("b", 200), "", "path", "mp/long-boundary.txt", "", "", "file", "", "x", withField1},
		{"q", "\"q\"", "path", "mp/quoted.txt", "", "", "file", "", "x", withField1 | preamble},
		{"lf", "", "path", "mp/lf.txt", "", "", "file", "", "x", withField1 | bareLF},
		{"nul", "", "pa\x00th", "mp/\x00.txt", "if_exists\x00", "replace", "fi\x00le", "Content-Type: \x00", "\x00", fields},
		{"dots", "", "path", "../../etc/passwd", "if_exists", "sometimes", "file", "", "x", fields},
		{"longv", "", "path", long, "if_exists", strings.Repeat("r", 4097), "file", "", "x", fields},
		{"utf8", "", "path", "mp/\xff\xfe.txt", "\xff", "\xff", "file", "Content-Type: text/\xff", "\xff", fields},
		{"dup", "", "path", "mp/one.txt", "path", "mp/two.txt", "file", "Content-Type: a/b\r\nContent-Type: c/d", "x", fields},
		{"quote", "", "pa\"th", "mp/q.txt", "", "", "file\"; filename=\"evil", "Content-Transfer-Encoding: base64", "eA==", fields},
		{"hdr", "", "path", "mp/hdr.txt", "", "", "file", "Content-Type: ;;;\r\nX-Junk", "x", withField1},
		{"hdr2", "", "path", "mp/hdr2.txt", "", "", "file", "Content-Type: multipart/mixed; boundary=hdr2", "--hdr2\r\n\r\nx\r\n--hdr2--", withField1},
		{"nofields", "", "", "", "", "", "file", "", "x", 0},
		{"empty", "", "", "", "", "", "", "", "", noFile | unclosed},
		{"b", "b; boundary=c", "path", "mp/params.txt", "", "", "file", "", "x", withField1},
	} {
		f.Add(seed.boundary, seed.declared, seed.name1, seed.value1, seed.name2, seed.value2,
			seed.fileName, seed.fileHeaders, []byte(seed.content), seed.layout)
	}
	f.Fuzz(func(t *testing.T, boundary, declared, name1, value1, name2, value2, fileName, fileHeaders string,
		content []byte, layout uint8) {
		nl := "\r\n"
		if layout&bareLF != 0 {
			nl = "\n"
		}
		var b bytes.Buffer
		if layout&preamble != 0 {
			b.WriteString("preamble text" + nl)
		}
		part := func(disposition, headers string, value []byte) {
			b.WriteString("--" + boundary + nl)
			b.WriteString("Content-Disposition: " + disposition + nl)
			if headers != "" {
				b.WriteString(strings.TrimRight(headers, "\r\n") + nl)
			}
			b.WriteString(nl)
			b.Write(value)
			b.WriteString(nl)
		}
		writeFields := func() {
			if layout&withField1 != 0 {
				part(`form-data; name="`+name1+`"`, "", []byte(value1))
			}
			if layout&withField2 != 0 {
				part(`form-data; name="`+name2+`"`, "", []byte(value2))
			}
		}
		writeFile := func() {
			if layout&noFile == 0 {
				part(`form-data; name="`+fileName+`"; filename="upload.bin"`, fileHeaders, content)
			}
		}
		if layout&fileFirst != 0 {
			writeFile()
			writeFields()
		} else {
			writeFields()
			writeFile()
		}
		if layout&unclosed == 0 {
			b.WriteString("--" + boundary + "--" + nl)
		}
		if declared == "" {
			declared = boundary
		}
		r := newFuzzRequest(http.MethodPost, "/v1/files")
		r.set("Content-Type", "multipart/form-data; boundary="+declared)
		r.body, r.chunked = b.Bytes(), layout&chunkedBody != 0
		s.do(t, r, bearer(s.readWrite))
	})
}

// FuzzListQuery fuzzes the raw query string of GET /v1/files over a few
// live and deleted files.
func FuzzListQuery(f *testing.F) {
	s := newFuzzServer(f)
	for i, p := range []string{"list/a.txt", "list/b.txt", "other/c.txt"} {
		s.setup(f, "POST", "/v1/files?path="+url.QueryEscape(p), []byte(p), http.StatusCreated,
			"X-Run-ID", fmt.Sprintf("run-%d", i%2), "X-Agent-ID", "agent-1")
	}
	gone := s.setupID(f, "POST", "/v1/files?path=list/gone.txt", []byte("gone"), http.StatusCreated)
	s.setup(f, "DELETE", "/v1/files/"+gone, nil, http.StatusOK)
	cursor := s.nextCursor(f, "/v1/files?limit=1", "next_cursor")
	for _, q := range []string{
		"", "limit=1", "limit=1000", "limit=0", "limit=-1", "limit=1001",
		"limit=99999999999999999999999", "limit=1e3", "limit=0x10", "limit=+5", "limit= 5",
		"cursor=" + cursor, "cursor=" + cursor + "&limit=1&include_deleted=true",
		"cursor=" + cursor + "x", "cursor=" + cursor[:len(cursor)/2], "cursor=garbage", "cursor=%00", "cursor=%ff%fe",
		"prefix=list/", "prefix=%ff%fe", "prefix=%25_", "prefix=" + strings.Repeat("x", 1025), "prefix=%00",
		"path=list/a.txt", "path=../a", "path=a%00b", "path=list/a.txt&path=list/b.txt", "path=%2Flist%2Fa.txt",
		"run_id=run-0&agent_id=agent-1", "run_id=", "run_id=bad%20id", "agent_id=" + strings.Repeat("a", 129), "run_id=%ff",
		"include_deleted=maybe", "include_deleted=TRUE&limit=2", "include_deleted=1&path=list/gone.txt", "include_deleted=",
		"limit=1&limit=2", "%zz=1&;;&&==", "limit=%", "a=b;c=d", "prefix=%",
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("1|file_\x00")),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("1|file_\xff")),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("9223372036854775807|file_x")),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("-1|file_x")),
		"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("0|file_")),
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		s.get(t, "/v1/files", query)
	})
}

// FuzzHistoryQuery fuzzes the query strings of the listings of file
// history and lifecycle: a file's versions, upload sessions, batches and
// the event feed (whose wait is bounded by the fuzz timeout).
func FuzzHistoryQuery(f *testing.F) {
	s := newFuzzServer(f)
	const (
		routeVersions = iota
		routeUploads
		routeBatches
		routeEvents
		routes
	)
	id := s.setupID(f, "POST", "/v1/files?path=hq/a.txt", []byte("1"), http.StatusCreated, "X-Run-ID", "hq-run")
	for _, v := range []string{"2", "3"} {
		s.setup(f, "POST", "/v1/files?path=hq/a.txt&if_exists=replace", []byte(v), http.StatusOK, "X-Agent-ID", "hq-agent")
	}
	for _, p := range []string{"hq/u1", "hq/u2"} {
		s.setup(f, "POST", "/v1/uploads", []byte(`{"path":"`+p+`","size_bytes":3}`), http.StatusCreated, "Content-Type", "application/json")
	}
	for _, k := range []string{"hq-b1", "hq-b2"} {
		s.setup(f, "POST", "/v1/batch?wait=10", []byte(`{"operations":[{"op":"put","path":"hq/`+k+`","content":"b"}]}`),
			http.StatusAccepted, "Content-Type", "application/json", "Idempotency-Key", k)
	}
	vc := s.nextCursor(f, "/v1/files/"+id+"/versions?limit=1", "next_cursor")
	uc := s.nextCursor(f, "/v1/uploads?limit=1", "next_cursor")
	bc := s.nextCursor(f, "/v1/batch?limit=1", "next_cursor")
	ec := s.nextCursor(f, "/v1/events?limit=1", "next_cursor")
	for _, seed := range []struct {
		route uint8
		query string
	}{
		{routeVersions, ""}, {routeVersions, "limit=1&cursor=" + vc}, {routeVersions, "cursor=0"},
		{routeVersions, "cursor=99999999999999999999"}, {routeVersions, "cursor=" + uc}, {routeVersions, "limit=0"},
		{routeUploads, ""}, {routeUploads, "status=pending&path=hq/u1"}, {routeUploads, "cursor=" + uc + "&limit=1"},
		{routeUploads, "cursor=" + bc}, {routeUploads, "status=%00"}, {routeUploads, "path=..%2Fx"},
		{routeBatches, "status=succeeded"}, {routeBatches, "cursor=" + bc}, {routeBatches, "status=canceled&limit=1000"},
		{routeEvents, ""}, {routeEvents, "after=" + ec + "&limit=1"}, {routeEvents, "after=now&wait=1"},
		{routeEvents, "run_id=hq-run&type=file.created,file.replaced"}, {routeEvents, "agent_id=hq-agent&prefix=hq%2F"},
		{routeEvents, "file_id=" + id}, {routeEvents, "type=,"}, {routeEvents, "wait=31"}, {routeEvents, "after=" + ec + "x"},
		{routeEvents, "after=" + vc}, {routeEvents, "prefix=%25_%5C"}, {routeEvents, "run_id=a%2Fb&wait=0"},
	} {
		f.Add(seed.route, seed.query)
	}
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		target := [...]string{"/v1/files/" + id + "/versions", "/v1/uploads", "/v1/batch", "/v1/events"}[route%routes]
		// A wait the server takes may hold the request up to 30 s, longer
		// than a fuzz request may take: it is cut to 1 s.
		if q, _ := url.ParseQuery(query); route%routes == routeEvents {
			if n, err := strconv.Atoi(q.Get("wait")); err == nil && n > 1 && n <= 30 {
				q.Set("wait", "1")
				query = q.Encode()
			}
		}
		s.get(t, target, query)
	})
}

// FuzzJSONBodies fuzzes the JSON bodies of POST /v1/uploads, POST
// /v1/uploads/{id}/complete (on a fresh session, with or without its part),
// POST /v1/batch (with a fresh Idempotency-Key), and of a file's revert,
// move (of a fresh file), PATCH and new share link, their Content-Type and
// If-Match.
func FuzzJSONBodies(f *testing.F) {
	s := newFuzzServer(f)
	const (
		routeUploads = iota
		routeCompleteMissing
		routeComplete
		routeBatch
		routeRevert
		routeMove
		routePatch
		routeLink
		routes
	)
	hist := s.setupID(f, "POST", "/v1/files?path=json/hist.txt", []byte("one"), http.StatusCreated)
	s.setup(f, "POST", "/v1/files?path=json/hist.txt&if_exists=replace", []byte("two"), http.StatusOK)
	s.setup(f, "POST", "/v1/files?path=json/taken.txt", []byte("taken"), http.StatusCreated)
	ok := sha("0123456789")
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	manyOps := `{"operations":[` + strings.TrimSuffix(strings.Repeat(`{"op":"delete","file_id":"f"},`, 1001), ",") + `]}`
	for _, seed := range []struct {
		route   uint8
		body    string
		ct      string
		keyed   bool
		ifMatch string
	}{
		{routeUploads, `{"path":"big/data.bin","size_bytes":22020096,"content_type":"application/x-tar","sha256":"` + ok + `"}`, "application/json", false, ""},
		{routeUploads, `{"path":"k.bin","size_bytes":10}`, "application/json", true, ""},
		{routeUploads, `{"size_bytes":10}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":0}`, "application/json", false, ""},
		{routeUploads, `{"path":"../a","size_bytes":1}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1,"sha256":"XYZ"}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1,"if_exists":"maybe"}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1,"colour":"red"}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":"ten"}`, "application/json", false, ""},
		{routeUploads, `{"path":`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1}`, "text/plain", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1e400}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":9223372036854775808}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":-9223372036854775808}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1099511627777}`, "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1.5}`, "application/json", false, ""},
		{routeUploads, `{"path":"a\u0000b","size_bytes":1,"content_type":"text/\u0000"}`, "application/json", false, ""},
		{routeUploads, "{\"path\":\"bad\xff\",\"size_bytes\":1}", "application/json", false, ""},
		{routeUploads, `{"path":"a","path":"b","size_bytes":1,"size_bytes":2}`, "application/json", true, ""},
		{routeUploads, `{"path":null,"size_bytes":null}`, "application/json", false, ""},
		{routeUploads, "\xef\xbb\xbf{\"path\":\"bom\",\"size_bytes\":1}", "application/json", false, ""},
		{routeUploads, `{"path":"a","size_bytes":1} {}`, "application/json; charset=utf-16", false, ""},
		{routeUploads, deep, "APPLICATION/JSON", false, ""},
		{routeUploads, `null`, "", false, ""},
		{routeCompleteMissing, ``, "", false, ""},
		{routeCompleteMissing, `{}`, "application/json", true, ""},
		{routeComplete, ``, "", false, ""},
		{routeComplete, `{"if_exists":"replace","sha256":"` + ok + `"}`, "application/json", true, ""},
		{routeComplete, `{"sha256":"` + sha("other") + `"}`, "application/json", false, ""},
		{routeComplete, `{"sha256":null,"if_exists":null}`, "application/json", false, ""},
		{routeComplete, `{"if_exists":1}`, "application/json", false, ""},
		{routeComplete, `[]`, "application/jsonx", false, ""},
		{routeComplete, `   `, "text/plain", false, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"x.txt","content":"hello","content_type":"text/plain"},{"op":"put","path":"y.bin","content":"AAEC","encoding":"base64"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"delete","file_id":missingFileID},{"op":"restore","file_id":missingFileID},{"op":"copy","file_id":missingFileID,"path":"c.txt","if_exists":"replace"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"k1.txt","content":"one","idempotency_key":"item-k1"},{"op":"put","path":"k1.txt","content":"changed","idempotency_key":"item-k1"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"ok","content":"x"},{"op":"put","path":"../no","content":"x"},{"op":"delete"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"move","path":"a"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"a","content":"x","encoding":"hex"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"a","content":"!!","encoding":"base64"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"a","content":"x","idempotency_key":"bad key"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"delete","file_id":"f","content":"x"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"a","content":"x","colour":"red"}]}`, "application/json", true, ""},
		{routeBatch, `{"ops":[]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[`, "application/json", true, ""},
		{routeBatch, `{"operations":null}`, "application/json", true, ""},
		{routeBatch, `{"operations":[null,1,"x",[],{}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"n\u0000ul","content":"\u0000","content_type":"a/b; x=\"\u0000\""}]}`, "application/json", true, ""},
		{routeBatch, "{\"operations\":[{\"op\":\"put\",\"path\":\"u.txt\",\"content\":\"\xff\xfe\"}]}", "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"big","content":"` + strings.Repeat("x", 70000) + `"}]}`, "application/json", true, ""},
		{routeBatch, manyOps, "application/json", true, ""},
		{routeBatch, `{}`, "text/plain", true, ""},
		{routeBatch, `{"operations":[{"op":"delete","file_id":"\u0000"},{"op":"restore","file_id":"bad\udfff"}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"nokey.txt","content":"x"}]}`, "application/json", false, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"e.txt","content":"a\nb\u00e9\ud83d\ude00\ud800"},{"op":"put","path":"b64","content":"AAEC\/v7\/\nLz8=","encoding":"base64"},{"OP":"put","Path":"case","CONTENT":"x","content":null}]}`, "application/json", true, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"n","content":5},{"op":"put","path":"m","content":"x","content":"y"}],"Operations":null}`, "application/json", true, ""},
		{routeBatch, `null`, "application/json", true, ""},
		{routeComplete, `{"if_exists":"replace"}`, "application/json", false, "\"\xff\""},
		{routeComplete, `{"if_exists":"replace"}`, "application/json", false, "*"},
		{routeComplete, `{}`, "application/json", false, "\"` + ok + `\"\n\"x\""},
		{routeCompleteMissing, `{"if_exists":"replace"}`, "application/json", true, "\x00"},
		{routeRevert, `{"version":1}`, "application/json", false, ""},
		{routeRevert, `{"version":2}`, "application/json", true, "*"},
		{routeRevert, `{"version":0}`, "application/json", false, ""},
		{routeRevert, `{"version":99999999999999999999}`, "application/json", false, ""},
		{routeRevert, `{"version":"1"}`, "application/json", false, ""},
		{routeRevert, `{"version":1,"force":true}`, "application/json", false, ""},
		{routeRevert, `{}`, "", false, ""},
		{routeMove, `{"path":"json/moved.txt"}`, "application/json", false, ""},
		{routeMove, `{"path":"json/taken.txt"}`, "application/json", true, ""},
		{routeMove, `{"path":"json/taken.txt","if_exists":"replace"}`, "application/json", false, "\"nope\""},
		{routeMove, `{"path":"../up"}`, "application/json", false, ""},
		{routeMove, `{"path":"a\u0000b"}`, "application/json", false, ""},
		{routeMove, `{"path":null,"if_exists":"error"}`, "application/json", false, ""},
		{routeMove, `{"path":"x","if_exists":"sometimes"}`, "application/json", false, ""},
		{routePatch, `{"expires_at":null}`, "application/json", true, ""},
		{routePatch, `{"expires_at":"2099-01-01T00:00:00Z"}`, "application/json", false, ""},
		{routePatch, `{"expires_at":"2000-01-01T00:00:00Z"}`, "application/json", false, ""},
		{routePatch, `{"expires_at":"2099-13-45T99:99:99Z"}`, "application/json", false, ""},
		{routePatch, `{"expires_at":1}`, "application/json", false, ""},
		{routePatch, `{"path":"x"}`, "application/json", false, ""},
		{routePatch, `{"expires_at":null,"expires_at":"2099-01-01T00:00:00Z"}`, "application/json", false, ""},
		{routeLink, ``, "", false, ""},
		{routeLink, `{"expires_in":60,"version":1}`, "application/json", true, ""},
		{routeLink, `{"expires_in":604801}`, "application/json", false, ""},
		{routeLink, `{"version":9}`, "application/json", false, ""},
		{routeLink, `{"expires_in":-1,"version":-1}`, "application/json", false, ""},
		{routeMove, `{"path":"bad/\udc80.txt"}`, "application/json", false, ""},
		{routeMove, `{"path":"\ud83d\ude00.txt"}`, "application/json", false, ""},
		{routeUploads, `{"path":"u\ud800","size_bytes":1}`, "application/json", false, ""},
		{routeBatch, `{"operations":[{"op":"put","path":"s.txt","content":"\udfff"}]}`, "application/json", true, ""},
		{routeBatch, "{\"operations\":[{\"op\":\"put\",\"pa\xffth\":\"x\",\"content\":\"x\"}]}", "application/json", true, ""},
	} {
		f.Add(seed.route, []byte(seed.body), seed.ct, seed.keyed, seed.ifMatch)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, ct string, keyed bool, ifMatch string) {
		var r *fuzzRequest
		switch route % routes {
		case routeUploads:
			r = newFuzzRequest(http.MethodPost, "/v1/uploads")
		case routeCompleteMissing, routeComplete:
			id := s.setupID(t, "POST", "/v1/uploads", []byte(`{"path":"`+s.fresh("complete")+`.bin","size_bytes":10}`),
				http.StatusCreated, "Content-Type", "application/json")
			if route%routes == routeComplete {
				s.setup(t, "PUT", "/v1/uploads/"+id+"/parts/1", []byte("0123456789"), http.StatusOK)
			}
			r = newFuzzRequest(http.MethodPost, "/v1/uploads/"+id+"/complete")
		case routeBatch:
			r = newFuzzRequest(http.MethodPost, "/v1/batch")
			keyed = true
		case routeRevert:
			r = newFuzzRequest(http.MethodPost, "/v1/files/"+hist+"/revert")
		case routeMove:
			id := s.setupID(t, "POST", "/v1/files?path=json/"+s.fresh("move"), []byte("m"), http.StatusCreated)
			r = newFuzzRequest(http.MethodPost, "/v1/files/"+id+"/move")
		case routePatch:
			r = newFuzzRequest(http.MethodPatch, "/v1/files/"+hist)
		case routeLink:
			r = newFuzzRequest(http.MethodPost, "/v1/files/"+hist+"/links")
		}
		if keyed {
			r.set("Idempotency-Key", s.fresh("key"))
		}
		r.set("Content-Type", ct).set("If-Match", ifMatch)
		r.body = body
		res := s.do(t, r, bearer(s.readWrite))
		// A string that is not text is never stored as something else.
		if res != nil && res.Status < 300 && jsonutf8.Check(body) != nil {
			t.Fatalf("%s %s with a string that is not text (%v) answered %d", r.method, r.target, jsonutf8.Check(body), res.Status)
		}
	})
}

// FuzzPathsAndMethods fuzzes the method and the path segments of every
// route (and arbitrary paths), with a Range header, a condition (If-Match
// on writes; If-None-Match and If-Range on reads), a small body and a
// choice of credentials. A segment may name real resources: $file (10
// bytes, two versions), $empty (0 bytes), $deleted, $upload (a pending
// session of 10 bytes), $batch, $key (an Idempotency-Key that holds an
// outcome), $link (a share link's id) and $secret (another's secret).
func FuzzPathsAndMethods(f *testing.F) {
	s := newFuzzServer(f)
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT",
		"PROPFIND", "get", "M-SEARCH", "BREW"}
	templates := []string{
		"/v1/files/{a}", "/v1/files/{a}/content", "/v1/files/{a}/restore",
		"/v1/uploads/{a}", "/v1/uploads/{a}/parts/{b}", "/v1/uploads/{a}/complete",
		"/v1/batch/{a}", "/v1/operations/{a}", "/problems/{a}", "/v1/{a}", "/{a}", "/v1/files/{a}/{b}",
		"/v1/files/{a}/versions", "/v1/files/{a}/versions/{b}", "/v1/files/{a}/versions/{b}/content",
		"/v1/files/{a}/revert", "/v1/files/{a}/move", "/v1/files/{a}/links", "/v1/links/{a}", "/s/{a}",
		"/v1/runs/{a}", "/v1/batch/{a}/cancel",
	}
	ids := map[string]string{
		"$file":    s.setupID(f, "POST", "/v1/files?path=pm/ten.txt", []byte("0123456789"), http.StatusCreated, "Content-Type", "text/plain"),
		"$empty":   s.setupID(f, "POST", "/v1/files?path=pm/empty", nil, http.StatusCreated),
		"$deleted": s.setupID(f, "POST", "/v1/files?path=pm/deleted.txt", []byte("gone"), http.StatusCreated),
		"$upload": s.setupID(f, "POST", "/v1/uploads", []byte(`{"path":"pm/session.bin","size_bytes":10}`), http.StatusCreated,
			"Content-Type", "application/json"),
		"$batch": s.setupID(f, "POST", "/v1/batch", []byte(`{"operations":[{"op":"put","path":"pm/b.txt","content":"b"}]}`),
			http.StatusAccepted, "Content-Type", "application/json", "Idempotency-Key", "pm-batch"),
		"$key": "pm-key",
	}
	s.setup(f, "POST", "/v1/files?path=pm/keyed.txt", []byte("k"), http.StatusCreated, "Idempotency-Key", "pm-key",
		"X-Run-ID", "pm/run:1")
	s.setup(f, "POST", "/v1/files?path=pm/ten.txt&if_exists=replace", []byte("9876543210"), http.StatusOK)
	ids["$link"] = s.setupID(f, "POST", "/v1/files/"+ids["$file"]+"/links", []byte(`{"version":1}`), http.StatusCreated,
		"Content-Type", "application/json")
	var shared struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(s.setup(f, "POST", "/v1/files/"+ids["$file"]+"/links", nil, http.StatusCreated), &shared); err != nil {
		f.Fatal(err)
	}
	ids["$secret"] = shared.URL[strings.LastIndex(shared.URL, "/")+1:]
	s.setup(f, "DELETE", "/v1/files/"+ids["$deleted"], nil, http.StatusOK)
	resolve := func(v string) string {
		for k, id := range ids {
			v = strings.ReplaceAll(v, k, id)
		}
		return v
	}
	// reset puts the named resources back as a write may have left them:
	// $file and $empty live (a file that took the path of one of them is
	// moved aside first), $deleted deleted.
	restore := func(t *testing.T, name string) {
		for i := 0; i < 3; i++ {
			res := s.do(t, newFuzzRequest(http.MethodPost, "/v1/files/"+ids[name]+"/restore"), bearer(s.readWrite))
			if res == nil || res.Status == http.StatusOK {
				return
			}
			var taken struct {
				ExistingFileID string `json:"existing_file_id"`
			}
			if err := json.Unmarshal(res.Body, &taken); err != nil || res.Status != http.StatusConflict || taken.ExistingFileID == "" {
				t.Fatalf("restore %s: %d %s", name, res.Status, res.Body)
			}
			s.setup(t, "POST", "/v1/files/"+taken.ExistingFileID+"/move", []byte(`{"path":"pm/`+s.fresh("parked")+`"}`),
				http.StatusOK, "Content-Type", "application/json")
		}
		t.Fatalf("could not restore %s", name)
	}
	reset := func(t *testing.T) {
		s.setup(t, "DELETE", "/v1/files/"+ids["$deleted"], nil, http.StatusOK)
		restore(t, "$file")
		restore(t, "$empty")
	}
	idx := func(name string, list []string) uint8 {
		for i, v := range list {
			if v == name {
				return uint8(i)
			}
		}
		panic(name)
	}
	for _, seed := range []struct {
		method, tmpl, a, b, rng, cond, body string
		auth                                uint8
	}{
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=0-3", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=-2", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=10-", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=5-100,0-1", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=99999999999999999999-", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=-99999999999999999999", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=-0", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=3-1", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=--1", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=0-1\nbytes=2-3", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$empty", "", "bytes=0-0", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$empty", "", "bytes=-1", "", "", 0},
		{"HEAD", "/v1/files/{a}/content", "$file", "", "bytes=0-\x00", "", "", 0},
		{"GET", "/v1/files/{a}/content", "$deleted", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "$file", "", "", "", "", 5},
		{"DELETE", "/v1/files/{a}", "$file", "", "", "", "", 0},
		{"DELETE", "/v1/files/{a}", "$file", "", "", "", "", 5},
		{"POST", "/v1/files/{a}/restore", "$deleted", "", "", "", "", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "1", "", "", "0123456789", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "0", "", "", "x", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "-1", "", "", "x", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "99999999999999999999", "", "", "x", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "１", "", "", "x", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "$upload", "%00", "", "", "x", 0},
		{"GET", "/v1/uploads/{a}", "$upload", "", "", "", "", 6},
		{"POST", "/v1/uploads/{a}/complete", "$upload", "", "", "", "{}", 7},
		{"GET", "/v1/batch/{a}", "$batch", "", "", "", "", 0},
		{"GET", "/v1/operations/{a}", "$key", "", "", "", "", 0},
		{"GET", "/v1/operations/{a}", "bad key", "", "", "", "", 0},
		{"GET", "/v1/operations/{a}", "%22quoted%22", "", "", "", "", 0},
		{"GET", "/problems/{a}", "NOT_FOUND", "", "", "", "", 0},
		{"GET", "/problems/{a}", "not_found", "", "", "", "", 6},
		{"GET", "/v1/files/{a}", "%00", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "..", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "$file/..", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "%2F..%2F..%2Fetc%2Fpasswd", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "%ff%fe", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", "bad\xffid", "", "", "", "", 0},
		{"GET", "/v1/files/{a}", strings.Repeat("f", 9000), "", "", "", "", 0},
		{"GET", "/v1/files/{a}/{b}", "$file", "content%00", "", "", "", 0},
		{"GET", "/{a}", "", "", "", "", "", 0},
		{"GET", "/{a}", "v1/files/", "", "", "", "", 0},
		{"GET", "/{a}", "/v1//files", "", "", "", "", 0},
		{"GET", "/{a}", "metrics", "", "", "", "", 6},
		{"GET", "/{a}", "openapi.yaml", "", "", "", "", 6},
		{"POST", "/{a}", "healthz", "", "", "", "x", 0},
		{"PATCH", "/v1/files/{a}", "$file", "", "", "", "{}", 0},
		{"OPTIONS", "/v1/{a}", "files", "", "", "", "", 0},
		{"TRACE", "/v1/{a}", "files", "", "", "", "", 0},
		{"PROPFIND", "/v1/files/{a}", "$file", "", "", "", "", 0},
		{"BREW", "/v1/uploads/{a}", "$upload", "", "", "", "", 0},
		{"CONNECT", "/v1/{a}", "files", "", "", "", "", 0},
		{"get", "/v1/files/{a}/content", "$file", "", "", "", "", 0},
		{"M-SEARCH", "/{a}", "*", "", "", "", "", 6},
		{"DELETE", "/v1/uploads/{a}", "$upload", "", "", "", "", 5},
		{"GET", "/v1/files/{a}/content", "$file", "", "bytes=0-1", "\"stale\"", "", 0},
		{"GET", "/v1/files/{a}/content", "$file", "", "", "*", "", 0},
		{"GET", "/v1/files/{a}", "$file", "", "", "W/\"x\", \xff, *", "", 0},
		{"DELETE", "/v1/files/{a}", "$file", "", "", "\"\xff\"", "", 0},
		{"DELETE", "/v1/files/{a}", "$file", "", "", "\"0\"\n\"1\"", "", 0},
		{"DELETE", "/v1/files/{a}", "%00", "", "", "", "", 0},
		{"POST", "/v1/files/{a}/restore", "%ff", "", "", "", "", 0},
		{"GET", "/v1/files/{a}/content", "%ff", "", "bytes=0-1", "", "", 0},
		{"GET", "/v1/uploads/{a}", "%00", "", "", "", "", 0},
		{"PUT", "/v1/uploads/{a}/parts/{b}", "%ff", "1", "", "", "x", 0},
		{"POST", "/v1/uploads/{a}/complete", "%00", "", "", "", "", 0},
		{"DELETE", "/v1/uploads/{a}", "%ff", "", "", "", "", 0},
		{"GET", "/v1/batch/{a}", "%00", "", "", "", "", 0},
		{"GET", "/v1/operations/{a}", "%00", "", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions", "$file", "", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions", "$deleted", "", "", "", "", 6},
		{"GET", "/v1/files/{a}/versions/{b}", "$file", "1", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}", "$file", "0", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}", "$file", "99999999999999999999", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}", "$file", "-1", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}", "$file", "1%00", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}/content", "$file", "1", "bytes=2-4", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}/content", "$file", "2", "bytes=10-", "", "", 0},
		{"HEAD", "/v1/files/{a}/versions/{b}/content", "$deleted", "1", "", "", "", 0},
		{"GET", "/v1/files/{a}/versions/{b}/content", "$file", "1", "", "*", "", 0},
		{"POST", "/v1/files/{a}/revert", "$file", "", "", "", `{"version":1}`, 0},
		{"POST", "/v1/files/{a}/revert", "$file", "", "", "\"stale\"", `{"version":2}`, 0},
		{"POST", "/v1/files/{a}/revert", "$deleted", "", "", "", `{"version":1}`, 0},
		{"POST", "/v1/files/{a}/move", "$file", "", "", "", `{"path":"pm/moved.txt"}`, 0},
		{"POST", "/v1/files/{a}/move", "$empty", "", "", "", `{"path":"pm/ten.txt","if_exists":"replace"}`, 0},
		{"PATCH", "/v1/files/{a}", "$file", "", "", "", `{"expires_at":null}`, 0},
		{"PATCH", "/v1/files/{a}", "$file", "", "", "", `{"expires_at":"2099-01-01T00:00:00Z"}`, 5},
		{"POST", "/v1/files/{a}/links", "$file", "", "", "", `{"expires_in":60}`, 0},
		{"GET", "/v1/files/{a}/links", "$file", "", "", "", "", 0},
		{"DELETE", "/v1/links/{a}", "$link", "", "", "", "", 0},
		{"DELETE", "/v1/links/{a}", "lnk_nope", "", "", "", "", 0},
		{"GET", "/s/{a}", "$secret", "", "bytes=0-3", "", "", 6},
		{"HEAD", "/s/{a}", "$secret", "", "", "", "", 7},
		{"GET", "/s/{a}", "$secret", "", "", "*", "", 6},
		{"GET", "/s/{a}", "$secretx", "", "", "", "", 6},
		{"GET", "/s/{a}", "%00", "", "", "", "", 6},
		{"POST", "/s/{a}", "$secret", "", "", "", "x", 6},
		{"GET", "/v1/runs/{a}", "pm%2Frun:1", "", "", "", "", 0},
		{"GET", "/v1/runs/{a}", "pm/run:1", "", "", "", "", 0},
		{"GET", "/v1/runs/{a}", "%ff", "", "", "", "", 0},
		{"GET", "/v1/runs/{a}", "%zz", "", "", "", "", 0},
		{"POST", "/v1/batch/{a}/cancel", "$batch", "", "", "", "", 0},
		{"POST", "/v1/batch/{a}/cancel", "batch_nope", "", "", "", "", 5},
	} {
		f.Add(idx(seed.method, methods), "", idx(seed.tmpl, templates), seed.a, seed.b, seed.rng, seed.cond, []byte(seed.body), seed.auth)
	}
	for _, m := range []string{"Get", "gEt", "HEAD ", "POST\x00", "X", "QUERY", "LOCK", "!#$%&'*+-.^_`|~", strings.Repeat("M", 300), "ÄÖÜ", "GET\tX"} {
		f.Add(uint8(0), m, uint8(0), "$file", "", "", "", []byte("x"), uint8(0))
	}
	f.Fuzz(func(t *testing.T, method uint8, rawMethod string, tmpl uint8, a, b, rng, cond string, body []byte, auth uint8) {
		m := methods[int(method)%len(methods)]
		if rawMethod != "" {
			m = rawMethod // any string: Go's client refuses what is not a token
		}
		target := strings.NewReplacer(
			"{a}", escapeTarget(resolve(a), false),
			"{b}", escapeTarget(resolve(b), false),
		).Replace(templates[int(tmpl)%len(templates)])
		r := newFuzzRequest(m, target)
		r.set("Range", rng)
		if m == http.MethodGet || m == http.MethodHead {
			r.set("If-None-Match", cond).set("If-Range", cond)
		} else {
			r.set("If-Match", cond)
		}
		if len(body) > 0 {
			r.body = body
		}
		s.do(t, r, s.auth(auth))
		if m != http.MethodGet && m != http.MethodHead {
			reset(t)
		}
	})
}

// FuzzRequestHeaders writes requests on the wire, so header lines reach
// the server exactly as fuzzed: any method, duplicate headers, odd casing,
// empty values, whitespace, forms of Authorization, X-Run-ID, X-Agent-ID
// and Idempotency-Key that no well-behaved client sends. An answer from
// the API obeys every rule of check; only Go's server may refuse a request
// whose framing it cannot parse (400 or 431, plain text, no handler ran).
// Framing headers (Host, Content-Length, Transfer-Encoding, Connection,
// Expect) are the proxy's own, so the body stays one request.
func FuzzRequestHeaders(f *testing.F) {
	s := newFuzzServer(f)
	file := s.setupID(f, "POST", "/v1/files?path=rh/ten.txt", []byte("0123456789"), http.StatusCreated)
	upload := s.setupID(f, "POST", "/v1/uploads", []byte(`{"path":"rh/session.bin","size_bytes":10}`), http.StatusCreated,
		"Content-Type", "application/json")
	s.setup(f, "POST", "/v1/files?path=rh/keyed.txt", []byte("k"), http.StatusCreated, "Idempotency-Key", "rh-key")
	targets := []string{
		"/v1/files?path=rh/new.txt", "/v1/files?path=rh/ten.txt&if_exists=replace", "/v1/files",
		"/v1/files/" + file, "/v1/files/" + file + "/content", "/v1/files/" + file + "/restore",
		"/v1/uploads", "/v1/uploads/" + upload, "/v1/uploads/" + upload + "/parts/1", "/v1/uploads/" + upload + "/complete",
		"/v1/batch", "/v1/operations/rh-key", "/v1/protocol", "/healthz", "/problems/NOT_FOUND", "/nowhere",
	}
	// authForms are ways to send a token (%s), tokenless ones, and none.
	authForms := []string{
		"Authorization: Bearer %s", "authorization: bearer %s", "AUTHORIZATION: BEARER %s", "Authorization:Bearer %s",
		"Authorization: Bearer  %s  ", "Authorization:\tBearer\t%s", "Authorization: %s", "Authorization: Bearer",
		"Authorization: Bearer ", "Authorization:", "Authorization: Basic dXNlcjpwYXNz", "Authorization: Bearer %s, Bearer %s",
		"Authorization: Bearer %s\nAuthorization: Bearer %s", "Authorization: Bearer %s\nauthorization: Bearer afs_other",
		"Authorization: Bearer %s\nAuthorization:", "",
	}
	for _, seed := range []struct {
		method string
		target uint8
		auth   uint8
		lines  string
		body   string
	}{
		{"GET", 2, 0, "", ""},
		{"POST", 0, 0, "Idempotency-Key: k1\nIdempotency-Key: k2", "x"},
		{"POST", 0, 1, "idempotency-key: k1\nIDEMPOTENCY-KEY: k1", "x"},
		{"POST", 0, 0, "Idempotency-Key:", "x"},
		{"POST", 0, 0, "Idempotency-Key:    ", "x"},
		{"POST", 0, 0, `Idempotency-Key: "quoted-key"`, "x"},
		{"POST", 0, 0, `Idempotency-Key: "unbalanced`, "x"},
		{"POST", 0, 0, "Idempotency-Key: " + strings.Repeat("k", 128), "x"},
		{"POST", 0, 0, "Idempotency-Key: " + strings.Repeat("k", 129), "x"},
		{"POST", 0, 0, "Idempotency-Key: -lead", "x"},
		{"POST", 0, 0, "Idempotency-Key: k;param=1", "x"},
		{"POST", 0, 0, "Idempotency-Key: k1, k2", "x"},
		{"POST", 1, 0, "X-Run-ID: r1\nX-Run-ID: r1", "x"},
		{"POST", 1, 0, "x-run-id: r1\nX-RUN-ID: r2", "x"},
		{"POST", 1, 0, "X-Run-ID:", "x"},
		{"POST", 1, 0, "X-Run-ID: r1, r2", "x"},
		{"POST", 1, 0, "X-Run-ID: " + strings.Repeat("r", 129), "x"},
		{"POST", 1, 0, "X-Agent-ID: \xff\xfe", "x"},
		{"POST", 1, 0, "X-Agent-ID: a\x01b", "x"},
		{"POST", 1, 0, "X-Agent-ID : spaced", "x"},
		{"POST", 1, 0, "X-Agent-ID:  padded  ", "x"},
		{"POST", 1, 0, " X-Agent-ID: folded", "x"},
		{"POST", 1, 0, "X-Agent-ID: a\n folded", "x"},
		{"POST", 1, 0, "no colon at all", "x"},
		{"POST", 1, 0, ": no name", "x"},
		{"POST", 1, 0, "Content-Type: text/plain\ncontent-type: text/html", "x"},
		{"POST", 1, 0, "Content-Digest: sha-256=:" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + ":\ncontent-digest: sha-256=:AA==:", "x"},
		{"POST", 1, 0, "If-Match: *\nIf-Match: \"x\"", "x"},
		{"GET", 4, 0, "Range: bytes=0-1\nRange: bytes=2-3", ""},
		{"GET", 4, 0, "If-None-Match: W/\"x\"\nIf-None-Match: *", ""},
		{"GET", 4, 0, "Range: bytes=0-1\nIf-Range: \"x\"\nif-range: \"y\"", ""},
		{"POST", 0, 0, "Content-Digest: sha-256=:AA==:\nContent-Digest: sha-256=:" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + ":", ""},
		{"GET", 2, 0, "X-Agent-ID: a\nx-agent-id: a", ""},
		{"DELETE", 3, 0, "If-Match: *\nIf-Match: *", ""},
		{"HEAD", 3, 12, "", ""},
		{"HEAD", 4, 1, "X-Request-ID: r\nX-Request-ID: s", ""},
		{"DELETE", 3, 13, "If-Match: \"x\"", ""},
		{"PUT", 8, 0, "Content-Digest:", "0123456789"},
		{"POST", 10, 0, "Content-Type: application/json", `{"operations":[{"op":"put","path":"rh/b.txt","content":"b"}]}`},
		{"POST", 10, 0, "Content-Type: application/json\nIdempotency-Key: b1\nIdempotency-Key: b1", `{"operations":[]}`},
		{"get", 2, 0, "", ""},
		{"BREW", 5, 0, "", ""},
		{"M-SEARCH", 15, 15, "", ""},
		{"G\x00ET", 2, 0, "", ""},
		{"", 2, 0, "", ""},
		{"GET /x HTTP/1.1\r\nX-Smuggled: 1", 2, 0, "", ""},
		{"POST", 6, 3, strings.Repeat("X-Many: v\n", 200), `{"path":"rh/m.bin","size_bytes":1}`},
		{"POST", 0, 9, "X-Long: " + strings.Repeat("v", 70000), "x"},
	} {
		f.Add(seed.method, seed.target, seed.auth, seed.lines, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, method string, target, auth uint8, lines string, body []byte) {
		r := &rawRequest{method: method, target: targets[int(target)%len(targets)], body: body}
		if form := authForms[int(auth)%len(authForms)]; form != "" {
			r.lines = append(r.lines, strings.Split(strings.ReplaceAll(form, "%s", s.readWrite), "\n")...)
		}
		for _, line := range strings.Split(lines, "\n") {
			if line != "" && !framing(line) {
				r.lines = append(r.lines, line)
			}
		}
		res := s.doRaw(t, r)
		// A header that changes what a request means, sent twice, is
		// refused: never served with one line of it silently ignored.
		if name := repeatedSingleHeader(r.lines); name != "" && res != nil && res.Status < 300 &&
			strings.HasPrefix(r.target, "/v1/") && r.target != "/v1/protocol" {
			t.Fatalf("answered %d to a request with %s in more than one line\nrequest: %s", res.Status, name, r)
		}
		if method != http.MethodGet && method != http.MethodHead {
			s.setup(t, "POST", "/v1/files/"+file+"/restore", nil, http.StatusOK)
		}
	})
}

// singleLineHeaders are the headers the API takes in one line only (400
// INVALID_HEADER otherwise).
var singleLineHeaders = []string{"Authorization", "Idempotency-Key", "Content-Type", "Content-Digest", "If-Match",
	"If-None-Match", "If-Range", "Range", "X-Agent-ID", "X-Run-ID", "MCP-Protocol-Version", "Mcp-Session-Id"}

// repeatedSingleHeader is the first of singleLineHeaders that lines send
// more than once, or "".
func repeatedSingleHeader(lines []string) string {
	seen := map[string]int{}
	for _, l := range lines {
		if name, _, ok := strings.Cut(l, ":"); ok {
			seen[http.CanonicalHeaderKey(name)]++
		}
	}
	for _, name := range singleLineHeaders {
		if seen[http.CanonicalHeaderKey(name)] > 1 {
			return name
		}
	}
	return ""
}

// rawRequest is a request as written on the wire.
type rawRequest struct {
	method, target string
	lines          []string // header lines, as sent
	body           []byte
}

func (r *rawRequest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %s", r.method, r.target)
	for _, l := range r.lines {
		if i := strings.Index(l, "afs_"); i >= 0 && len(l) > i+12 {
			l = l[:i+12] + "…"
		}
		fmt.Fprintf(&b, "\n  %q", clip(l))
	}
	fmt.Fprintf(&b, "\n  body (%d bytes): %q", len(r.body), clip(string(r.body)))
	return b.String()
}

// framing reports whether a header line sets how the request is framed or
// routed on the connection, which FuzzRequestHeaders keeps to itself.
func framing(line string) bool {
	name, _, _ := strings.Cut(line, ":")
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "host", "content-length", "transfer-encoding", "connection", "expect", "upgrade", "te", "trailer":
		return true
	}
	return false
}

// doRaw writes r on a connection of its own and checks the answer: one
// from the API (it carries X-Request-ID) obeys check; without it only Go's
// own refusal of a malformed request (400 or 431) is allowed.
// doRaw sends r as written and checks the answer, which it returns (nil
// when the answer did not pass through the API).
func (s *fuzzServer) doRaw(t *testing.T, r *rawRequest) *apitest.Response {
	t.Helper()
	host := strings.TrimPrefix(s.srv.URL, "http://")
	conn, err := net.DialTimeout("tcp", host, fuzzTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(fuzzTimeout))
	oneLine := strings.NewReplacer("\r", "", "\n", "")
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n",
		oneLine.Replace(r.method), r.target, host, len(r.body))
	for _, l := range r.lines {
		head.WriteString(oneLine.Replace(l) + "\r\n")
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(append(head.Bytes(), r.body...)); err != nil {
		s.broken(t, r, err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: oneLine.Replace(r.method)})
	if err != nil {
		s.broken(t, r, err)
	}
	out := s.read(t, r, res)
	if res.Header.Get("X-Request-ID") == "" {
		if res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("answered %d without passing through the API: %s\nrequest: %s", res.StatusCode, clip(string(out.Body)), r)
		}
		return nil
	}
	req, err := http.NewRequest(oneLine.Replace(r.method), s.srv.URL+r.target, nil)
	if err != nil {
		t.Fatalf("the API answered a request Go would not build (%v)\nrequest: %s", err, r)
	}
	s.check(t, &fuzzRequest{method: req.Method, target: r.target, header: http.Header{}, body: r.body}, req, out)
	if t.Failed() {
		t.Logf("raw request: %s", r)
	}
	return out
}

// FuzzSearchQuery fuzzes the raw query string of GET /v1/search over a
// few text and binary files: patterns, globs, ranges and cursors each
// answer a page or a clear problem, never a 500.
func FuzzSearchQuery(f *testing.F) {
	s := newFuzzServer(f)
	for p, body := range map[string]string{"src/a.go": "package a\nfunc A() {}\n", "docs/b.md": "# B\r\nneedle café\n",
		"bin/c.bin": "x\x00y", "u/日本.txt": "日本語 text"} {
		s.setup(f, "POST", "/v1/files?path="+url.QueryEscape(p), []byte(body), http.StatusCreated)
	}
	cursor := s.nextCursor(f, "/v1/search?q=.&limit=1", "next_cursor")
	for _, q := range []string{
		"q=needle", "q=.&limit=1&cursor=" + cursor, "q=x&cursor=" + cursor, "q=.&limit=1&cursor=" + cursor[:len(cursor)/2],
		"q=func+%5Cw%2B", "q=(a*)*b", "q=a%7B1000%7D", "q=a%7B1001%7D", "q=((a%7B99%7D)%7B99%7D)%7B99%7D", "q=%ff", "q=%00", "q=",
		"q=.&glob=**/*.go", "q=.&glob=../x", "q=.&glob=%5B", "q=.&glob=%7B%7B%7B%7Ba,b%7D", "q=.&prefix=src/", "q=.&prefix=%ff",
		"q=.&context=10", "q=.&context=1000", "q=.&context=-1", "q=.&limit=0", "q=.&limit=1001", "q=.&literal=true&ignore_case=1",
		"q=%E6%97%A5&ignore_case=true", "q=%5E%24", "q=%5Cb&run_id=r", "q=.&run_id=%20", "q=a|b|c|d&literal=maybe",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		s.do(t, newFuzzRequest(http.MethodGet, "/v1/search?"+escapeTarget(query, true)), bearer(s.readWrite))
	})
}
