package handlers_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/handlers/apitest"
	"github.com/agentfs/agentfs/storage/storagetest"
)

var seriesLine = regexp.MustCompile(`(?m)^agentfs_http_request[a-z_]*\{`)

// series counts the HTTP metric series /metrics shows.
func series(t *testing.T, anon *apitest.Client) int {
	t.Helper()
	return len(seriesLine.FindAll(anon.Do("GET", "/metrics", nil).Expect(t, 200).Body, -1))
}

// scrape reads /metrics into a map from each series (name and labels, as
// written) to its value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	body := apitest.NewClient(t, url, "").Do("GET", "/metrics", nil).Expect(t, 200).Body
	m := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("unreadable metrics line %q", line)
		}
		m[line[:i]] = v
	}
	return m
}

// domainSeries lists the AgentFS series of a scrape but the Go runtime's.
func domainSeries(m map[string]float64) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, "agentfs_") {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// TestMetricLabelsStayBounded sends odd methods and paths without a token,
// and writes with ever new paths, keys, agents, runs and subjects: every
// label value comes from a closed set, so the number of series stops
// growing however many such requests arrive.
func TestMetricLabelsStayBounded(t *testing.T) {
	c, b := setup(t)
	anon := apitest.NewClient(t, b.srv.URL, "")
	odd := func(n int) {
		for i := 0; i < n; i++ {
			method := fmt.Sprintf("ZZ%d", rand.IntN(1<<30))
			anon.Do(method, "/v1/files", nil)
			anon.Do("GET", fmt.Sprintf("/v1/nowhere/%d", rand.IntN(1<<30)), nil)
		}
	}
	writes := func(n int) {
		for i := 0; i < n; i++ {
			r := rand.IntN(1 << 30)
			path, key := fmt.Sprintf("bounded/%d.txt", r), fmt.Sprintf("key-%d", r)
			hdr := []string{"Idempotency-Key", key, "X-Agent-ID", fmt.Sprintf("agent-%d", r), "X-Run-ID", fmt.Sprintf("run-%d", r)}
			f := upload(t, c, path, "v1", hdr...).Expect(t, 201).File(t)
			upload(t, c, path, "v1", hdr...).Expect(t, 201)                                                // replayed
			upload(t, c, path, "v2", hdr...).ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT") // conflict
			c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200)
			c.Do("GET", fmt.Sprintf("/v1/files/file_%d", r), nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
			other := b.srv.Client(t, fmt.Sprintf("subject-%d", r))
			upload(t, other, path, "theirs").Expect(t, 201)
		}
	}
	odd(20)
	writes(2)
	series(t, anon) // the scrape itself becomes a series from the next one on
	before := series(t, anon)
	all := domainSeries(scrape(t, b.srv.URL))
	odd(300)
	writes(30)
	if after := series(t, anon); after != before {
		t.Fatalf("300 more odd requests grew the HTTP series from %d to %d:\n%s", before, after, anon.Do("GET", "/metrics", nil).Body)
	}
	if grown := domainSeries(scrape(t, b.srv.URL)); len(grown) != len(all) {
		t.Fatalf("30 more rounds of writes grew the series from %d to %d:\nbefore: %s\nafter: %s",
			len(all), len(grown), strings.Join(all, "\n"), strings.Join(grown, "\n"))
	}
	body := anon.Do("GET", "/metrics", nil).Body
	if !strings.Contains(string(body), `method="other"`) || !strings.Contains(string(body), `route="unmatched"`) {
		t.Fatalf("odd methods and paths are not counted as other / unmatched:\n%s", body)
	}
	for _, word := range []string{"bounded/", "key-", "agent-", "run-", "subject-", "file_"} {
		if strings.Contains(string(body), word) {
			t.Fatalf("a path, key, agent, run, subject or id (%q) is in a label:\n%s", word, body)
		}
	}
}

// TestDomainMetricsAfterATourOfWrites makes one of each kind of write
// (upload, replace, keyed replay, conflict, a key in progress, batch, upload
// session, sweep) and reads each new series back from /metrics with the
// value the tour earned.
func TestDomainMetricsAfterATourOfWrites(t *testing.T) {
	c, b := setup(t)
	before := scrape(t, b.srv.URL)
	for _, s := range []string{
		`agentfs_idempotency_requests_total{outcome="executed"}`, `agentfs_batch_items_total{op="put",outcome="applied"}`,
		`agentfs_upload_sessions{status="pending"}`, `agentfs_batch_queue_jobs{state="available"}`,
		`agentfs_sweeper_runs_total{result="ok",task="expired_uploads"}`,
	} {
		if v, ok := before[s]; !ok || v != 0 {
			t.Fatalf("before any write, %s is %v (shown: %v), want a 0 on show", s, v, ok)
		}
	}

	f := upload(t, c, "tour/a.txt", "first", "Idempotency-Key", "tour-1").Expect(t, 201).File(t)
	upload(t, c, "tour/a.txt", "first", "Idempotency-Key", "tour-1").Expect(t, 201)
	upload(t, c, "tour/a.txt", "other", "Idempotency-Key", "tour-1").ExpectProblem(t, http.StatusConflict, "IDEMPOTENCY_CONFLICT")
	c.Do("POST", "/v1/files?path=tour/a.txt&if_exists=replace", "second!").Expect(t, 200)
	if got := c.Do("GET", "/v1/files/"+f.ID+"/content", nil).Expect(t, 200); string(got.Body) != "second!" {
		t.Fatalf("content %q", got.Body)
	}

	// A key in progress: a body that has not finished arriving holds its
	// key, and the same request meanwhile is told to wait.
	pr, pw := io.Pipe()
	done := make(chan *apitest.Response, 1)
	go func() {
		done <- c.Do("POST", "/v1/files?path=tour/slow.txt", pr, "Idempotency-Key", "tour-slow",
			"Content-Digest", digestHeader("slow body"))
	}()
	_, _ = pw.Write([]byte("slow "))
	storagetest.Eventually(t, 10*time.Second, "the slow upload to claim its key", func() bool {
		return c.Do("GET", "/v1/operations/tour-slow", nil).Status == http.StatusOK
	})
	c.Do("POST", "/v1/files?path=tour/slow.txt", "slow body", "Idempotency-Key", "tour-slow",
		"Content-Digest", digestHeader("slow body")).ExpectProblem(t, http.StatusConflict, "OPERATION_IN_PROGRESS")
	_, _ = pw.Write([]byte("body"))
	pw.Close()
	(<-done).Expect(t, 201)

	bt, _ := runBatch(t, c, "tour-batch", []map[string]any{
		{"op": "put", "path": "tour/b.txt", "content": "bee"},
		{"op": "copy", "file_id": f.ID, "path": "tour/c.txt"},
		{"op": "delete", "file_id": missingFileID},
	}, http.StatusAccepted)
	if bt.Status != "partially_succeeded" {
		t.Fatalf("batch: %+v", bt)
	}

	data := randomBytes(partSize+1, 7)
	u := createUpload(t, c, map[string]any{"path": "tour/big.bin", "size_bytes": len(data)}, http.StatusCreated)
	putPart(t, c, u.ID, 1, partOf(data, 1)).Expect(t, 200)
	putPart(t, c, u.ID, 2, partOf(data, 2)).Expect(t, 200)
	complete(t, c, u.ID, "").Expect(t, http.StatusCreated)
	left := createUpload(t, c, map[string]any{"path": "tour/left.bin", "size_bytes": 10}, http.StatusCreated)
	mid := scrape(t, b.srv.URL)
	if v := mid[`agentfs_upload_sessions{status="pending"}`]; v != 1 {
		t.Fatalf("one session left pending, the gauge says %v", v)
	}
	// The session left pending expired an hour ago; the sweep ends it.
	storagetest.Exec(t, b.srv.Config, `UPDATE uploads SET expires_at = now() - interval '1 hour' WHERE id = $1`, left.ID)
	b.srv.Sweep()

	after := scrape(t, b.srv.URL)
	want := map[string]float64{ // at least
		`agentfs_idempotency_requests_total{outcome="executed"}`:                               3, // tour-1, tour-slow, tour-batch
		`agentfs_idempotency_requests_total{outcome="replayed"}`:                               1,
		`agentfs_idempotency_requests_total{outcome="conflict"}`:                               1,
		`agentfs_idempotency_requests_total{outcome="in_progress"}`:                            1,
		`agentfs_batch_items_total{op="put",outcome="applied"}`:                                1,
		`agentfs_batch_items_total{op="copy",outcome="applied"}`:                               1,
		`agentfs_batch_items_total{op="delete",outcome="failed"}`:                              1,
		`agentfs_sweeper_runs_total{result="ok",task="expired_uploads"}`:                       1,
		`agentfs_sweeper_runs_total{result="ok",task="unreferenced_blobs"}`:                    1,
		`agentfs_sweeper_removed_total{task="expired_uploads"}`:                                1,
		`agentfs_postgres_call_duration_seconds_count{operation="select"}`:                     1,
		`agentfs_postgres_call_duration_seconds_count{operation="insert"}`:                     1,
		`agentfs_postgres_call_duration_seconds_count{operation="update"}`:                     1,
		`agentfs_postgres_call_duration_seconds_count{operation="begin"}`:                      1,
		`agentfs_postgres_call_duration_seconds_count{operation="commit"}`:                     1,
		`agentfs_postgres_call_duration_seconds_count{operation="acquire"}`:                    1,
		`agentfs_s3_request_duration_seconds_count{operation="put"}`:                           3, // first, second!, bee (a body of unknown length goes up in parts)
		`agentfs_s3_request_duration_seconds_count{operation="get"}`:                           1,
		`agentfs_s3_request_duration_seconds_count{operation="multipart_create"}`:              1,
		`agentfs_s3_request_duration_seconds_count{operation="multipart_part"}`:                2,
		`agentfs_s3_request_duration_seconds_count{operation="multipart_complete"}`:            1,
		`agentfs_s3_body_bytes_total{direction="sent",operation="put"}`:                        float64(len("first" + "second!" + "bee")),
		`agentfs_s3_body_bytes_total{direction="sent",operation="multipart_part"}`:             float64(len(data) + len("slow body")),
		`agentfs_s3_body_bytes_total{direction="received",operation="get"}`:                    float64(len("second!")),
		`agentfs_http_body_bytes_total{direction="received",route="/v1/files"}`:                float64(len("first" + "first" + "second!" + "slow body")),
		`agentfs_http_body_bytes_total{direction="sent",route="/v1/files/:id/content"}`:        float64(len("second!")),
		`agentfs_http_body_bytes_total{direction="received",route="/v1/uploads/:id/parts/:n"}`: float64(len(data)),
		`agentfs_state_up`: 1,
	}
	for s, min := range want {
		if v, ok := after[s]; !ok || v < min {
			t.Errorf("%s = %v (shown: %v), want at least %v", s, v, ok, min)
		}
	}
	exact := map[string]float64{
		`agentfs_upload_sessions{status="pending"}`:                      0, // expired by the sweep
		`agentfs_upload_sessions{status="completing"}`:                   0,
		`agentfs_batch_queue_jobs{state="available"}`:                    0, // the batch ended
		`agentfs_batch_queue_jobs{state="running"}`:                      0,
		`agentfs_batch_queue_oldest_wait_seconds`:                        0,
		`agentfs_sweeper_runs_total{result="ok",task="expired_uploads"}`: 1,
		`agentfs_sweeper_removed_total{task="expired_uploads"}`:          1,
		`agentfs_idempotency_requests_total{outcome="conflict"}`:         1,
		`agentfs_idempotency_requests_total{outcome="in_progress"}`:      1,
		`agentfs_idempotency_requests_total{outcome="claim_lost"}`:       0,
	}
	for s, v := range exact {
		if got, ok := after[s]; !ok || got != v {
			t.Errorf("%s = %v (shown: %v), want %v", s, got, ok, v)
		}
	}
	// A histogram's sum is the time its calls took: positive once any call
	// was timed.
	for _, s := range []string{`agentfs_postgres_call_duration_seconds_sum{operation="select"}`,
		`agentfs_s3_request_duration_seconds_sum{operation="put"}`} {
		if after[s] <= 0 {
			t.Errorf("%s = %v, want a positive time", s, after[s])
		}
	}
	if t.Failed() {
		t.Logf("the AgentFS series:\n%s", strings.Join(domainSeries(after), "\n"))
	}
}

// TestClientGoneIsNotAnOutage sends a whole upload as HTTP/1.0 and
// half-closes the connection: the server sees its client gone while it
// stores the bytes. That is logged as "client gone" at debug level, never as
// an error, and counted as 499, never as a 503.
func TestClientGoneIsNotAnOutage(t *testing.T) {
	_, b := setup(t)
	token := b.srv.Token(t, "alice")
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := strings.Repeat("x", 4<<20)
	fmt.Fprintf(conn, "POST /v1/files?path=gone.bin HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Idempotency-Key: gone-1\r\nContent-Length: %d\r\n\r\n%s", token, len(body), body)
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.Copy(io.Discard, conn)
	storagetest.Eventually(t, 30*time.Second, `the server to log "client gone"`, func() bool {
		return strings.Contains(b.srv.Logs.String(), "client gone")
	})
	logs := b.srv.Logs.String()
	if regexp.MustCompile(`level=(ERROR|WARN).*`).MatchString(logs) {
		t.Fatalf("a client that went away was logged as a failure:\n%s", logs)
	}
	anon := apitest.NewClient(t, b.srv.URL, "")
	metrics := string(anon.Do("GET", "/metrics", nil).Body)
	if strings.Contains(metrics, `route="/v1/files",status="503"`) || !strings.Contains(metrics, `route="/v1/files",status="499"`) {
		t.Fatalf("a client that went away must be counted as 499, not 503:\n%s", metrics)
	}
	c := b.srv.Client(t, "alice")
	c.Do("GET", "/v1/operations/gone-1", nil).ExpectProblem(t, http.StatusNotFound, "NOT_FOUND")
}
