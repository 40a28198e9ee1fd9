package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/procstat"
	"github.com/agentfs/agentfs/internal/testkit"
	"github.com/agentfs/agentfs/storage/storagetest"
)

// rpc is one JSON-RPC request to /mcp, sent as it is.
type rpc struct {
	url, token, version string
	body                []byte
}

// rpcAnswer is an answer of /mcp, read whole.
type rpcAnswer struct {
	status      int
	contentType string
	body        []byte
}

func (r rpc) send(t *testing.T) rpcAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url+"/mcp", bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r.version != "" {
		req.Header.Set("MCP-Protocol-Version", r.version)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := testkit.ReadAll(t, res.Body, nil)
	return rpcAnswer{status: res.StatusCode, contentType: res.Header.Get("Content-Type"), body: body}
}

// toolCalls is a JSON-RPC batch of n calls of one tool.
func toolCalls(n int, tool string, args map[string]any) []byte {
	var calls []map[string]any
	for i := range n {
		calls = append(calls, map[string]any{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
			"params": map[string]any{"name": tool, "arguments": args}})
	}
	b, _ := json.Marshal(calls)
	return b
}

// rpcError reads a JSON-RPC error answer.
func (a rpcAnswer) rpcError(t *testing.T) (code int, message string) {
	t.Helper()
	var out struct {
		JSONRPC string `json:"jsonrpc"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if !strings.HasPrefix(a.contentType, "application/json") || json.Unmarshal(a.body, &out) != nil ||
		out.JSONRPC != "2.0" || out.Error == nil {
		t.Fatalf("%d %s: not a JSON-RPC error: %s", a.status, a.contentType, a.body)
	}
	return out.Error.Code, out.Error.Message
}

// peakRSS samples a process's RSS every 20 ms while do runs and returns the
// highest seen.
func peakRSS(t *testing.T, pid int, do func()) int64 {
	t.Helper()
	var (
		mu   sync.Mutex
		peak int64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	sample := func() {
		v, err := procstat.RSS(pid)
		if err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		peak = max(peak, v)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	do()
	close(done)
	wg.Wait()
	sample()
	return peak
}

// TestMCPDoorBounds drives the /mcp door of `agentfs serve` with requests a
// client of the SDK does not send: JSON-RPC batches, the largest write,
// writes against a byte quota.
func TestMCPDoorBounds(t *testing.T) {
	t.Parallel()
	bin, cfg := buildBinary(t), storagetest.Config(t)
	a := startServe(t, bin, cfg, "AGENTFS_MCP_MAX_ANSWER_BYTES=8388608")
	q := startServe(t, bin, cfg, "AGENTFS_QUOTA_BYTES=4096")
	r := startServe(t, bin, cfg, "AGENTFS_RATE_LIMIT=0.01", "AGENTFS_RATE_BURST=6")
	for _, p := range []*process{a, q, r} {
		p.waitReady(t)
	}
	token := func(subject string) string {
		return createToken(t, bin, cfg, "--subject", subject, "--scopes", "read,write")
	}

	t.Run("BatchesAreRefusedWhereTheProtocolHasNone", func(t *testing.T) {
		tok := token("batcher")
		for _, v := range []string{"2024-11-05", "2025-06-18", "2025-11-25"} {
			ans := rpc{url: a.url, token: tok, version: v, body: toolCalls(2, "list_directory", map[string]any{"path": "/"})}.send(t)
			code, msg := ans.rpcError(t)
			if ans.status != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "batch") {
				t.Fatalf("a batch with MCP-Protocol-Version %s: %d %s", v, ans.status, ans.body)
			}
		}
	})

	t.Run("BatchesAreBoundedWhereTheProtocolHasThem", func(t *testing.T) {
		tok := token("bounded")
		for _, v := range []string{"", "2025-03-26"} {
			ans := rpc{url: a.url, token: tok, version: v, body: toolCalls(3, "list_directory", map[string]any{"path": "/"})}.send(t)
			var answers []json.RawMessage
			if ans.status != http.StatusOK || json.Unmarshal(ans.body, &answers) != nil || len(answers) != 3 {
				t.Fatalf("a batch of 3 with version %q: %d %s", v, ans.status, ans.body)
			}
			ans = rpc{url: a.url, token: tok, version: v, body: toolCalls(33, "list_directory", map[string]any{"path": "/"})}.send(t)
			if code, msg := ans.rpcError(t); ans.status != http.StatusBadRequest || code != -32600 || !strings.Contains(msg, "32 calls") {
				t.Fatalf("a batch of 33 with version %q: %d %s", v, ans.status, ans.body)
			}
		}
	})

	t.Run("EachCallOfABatchCountsAgainstTheRateLimit", func(t *testing.T) {
		tok := token("rated")
		ans := rpc{url: r.url, token: tok, body: toolCalls(6, "list_directory", map[string]any{"path": "/"})}.send(t)
		if ans.status != http.StatusOK {
			t.Fatalf("a batch of the whole burst: %d %s", ans.status, ans.body)
		}
		ans = rpc{url: r.url, token: tok, body: toolCalls(1, "list_directory", map[string]any{"path": "/"})}.send(t)
		if ans.status != http.StatusTooManyRequests || !strings.Contains(string(ans.body), "RATE_LIMITED") {
			t.Fatalf("the call after a batch that spent the burst: %d %s", ans.status, ans.body)
		}
	})

	t.Run("MemoryStaysBoundedUnderAHostileBatch", func(t *testing.T) {
		tok := token("hostile")
		s, _ := mcpSession(t, []string{a.url}, http.Header{"Authorization": {"Bearer " + tok}})
		big := strings.Repeat("0123456789abcdef", 3<<20/16) // 3 MiB: the largest read_media_file answers
		if res, text := callTool(t, s, "write_file", map[string]any{"path": "big.txt", "content": big}); res.IsError {
			t.Fatalf("write_file: %s", text)
		}
		pid := a.cmd.Process.Pid
		idle := peakRSS(t, pid, func() { time.Sleep(300 * time.Millisecond) })
		var statuses []int
		peak := peakRSS(t, pid, func() {
			for _, body := range [][]byte{
				toolCalls(400, "read_text_file", map[string]any{"path": "big.txt"}),
				toolCalls(32, "read_media_file", map[string]any{"path": "big.txt"}),
			} {
				statuses = append(statuses, rpc{url: a.url, token: tok, body: body}.send(t).status)
			}
		})
		t.Logf("server RSS idle %d MiB, peak %d MiB under hostile batches (answered %v)", idle>>20, peak>>20, statuses)
		if grow := peak - idle; grow > 128<<20 {
			t.Fatalf("server RSS grew by %d MiB under one request at a time", grow>>20)
		}
	})

	t.Run("AWriteOfTheWholeLimitIsAccepted", func(t *testing.T) {
		s, _ := mcpSession(t, []string{a.url}, http.Header{"Authorization": {"Bearer " + token("writer")}})
		limit := 4 << 20
		for name, content := range map[string]string{
			"ascii.txt":   strings.Repeat("a", limit),
			"escaped.txt": strings.Repeat("\x01", limit), // six bytes of JSON each
		} {
			res, text := callTool(t, s, "write_file", map[string]any{"path": name, "content": content})
			if res.IsError {
				t.Fatalf("write_file of %d bytes (%s): %s", limit, name, text)
			}
		}
		// One byte over the limit (within the body cap), and a body over the
		// cap (read to find the call, never taken whole).
		for _, content := range []string{strings.Repeat("a", limit+1), strings.Repeat("\x01", limit+limit/4)} {
			res, text := callTool(t, s, "write_file", map[string]any{"path": "over.txt", "content": content})
			if !res.IsError || !strings.HasPrefix(text, "PAYLOAD_TOO_LARGE: ") || !strings.Contains(text, fmt.Sprint(limit)) {
				t.Fatalf("write_file of %d bytes: %v %s", len(content), res.IsError, text)
			}
		}
	})

	t.Run("OnlyBytesStoredCountAgainstTheQuota", func(t *testing.T) {
		tok := token("quota")
		s, _ := mcpSession(t, []string{q.url}, http.Header{"Authorization": {"Bearer " + tok}})
		if res, text := callTool(t, s, "write_file", map[string]any{"path": "q/a.txt", "content": strings.Repeat("a", 100)}); res.IsError {
			t.Fatalf("write_file: %s", text)
		}
		for range 50 {
			if res, text := callTool(t, s, "read_text_file", map[string]any{"path": "q/a.txt"}); res.IsError {
				t.Fatalf("read_text_file: %s", text)
			}
		}
		for range 20 { // each fails: a file holds the path
			if res, text := callTool(t, s, "write_file", map[string]any{"path": "q/a.txt", "content": strings.Repeat("b", 100)}); !res.IsError {
				t.Fatalf("write_file over a file: %s", text)
			}
		}
		if res, text := callTool(t, s, "write_file", map[string]any{"path": "q/b.txt", "content": strings.Repeat("b", 3996)}); res.IsError {
			t.Fatalf("write_file of what the quota has left: %s", text)
		}
		res, text := callTool(t, s, "write_file", map[string]any{"path": "q/c.txt", "content": "c"})
		if !res.IsError || !strings.HasPrefix(text, "QUOTA_EXCEEDED: ") {
			t.Fatalf("write_file past the quota: %v %s", res.IsError, text)
		}
		if res, text := callTool(t, s, "read_text_file", map[string]any{"path": "q/b.txt"}); res.IsError {
			t.Fatalf("read_text_file once the quota is spent: %s", text)
		}
	})
}
