package handlers_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
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

// TestMetricLabelsStayBounded sends odd methods and paths without a token:
// every label value comes from a closed set, so the number of series stops
// growing however many such requests arrive.
func TestMetricLabelsStayBounded(t *testing.T) {
	_, b := setup(t)
	anon := apitest.NewClient(t, b.srv.URL, "")
	odd := func(n int) {
		for i := 0; i < n; i++ {
			method := fmt.Sprintf("ZZ%d", rand.IntN(1<<30))
			anon.Do(method, "/v1/files", nil)
			anon.Do("GET", fmt.Sprintf("/v1/nowhere/%d", rand.IntN(1<<30)), nil)
		}
	}
	odd(20)
	series(t, anon) // the scrape itself becomes a series from the next one on
	before := series(t, anon)
	odd(300)
	if after := series(t, anon); after != before {
		t.Fatalf("300 more odd requests grew the HTTP series from %d to %d:\n%s", before, after, anon.Do("GET", "/metrics", nil).Body)
	}
	body := anon.Do("GET", "/metrics", nil).Body
	if !strings.Contains(string(body), `method="other"`) || !strings.Contains(string(body), `route="unmatched"`) {
		t.Fatalf("odd methods and paths are not counted as other / unmatched:\n%s", body)
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
