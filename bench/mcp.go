package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpBudget is the bound on MCP write_file's p50 over that of
// POST /v1/files, both of 4 KiB.
const mcpBudget = 1.5

// bearer adds the token to every request the MCP client sends.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// mcp: write_file of 4 KiB through the MCP SDK's own client (Streamable
// HTTP to /mcp, the bearer token on every request) against POST /v1/files
// of the same 4 KiB, one call at a time, alternating; the p50s count.
func (b *bench) mcp(ctx context.Context) ([]row, error) {
	c := b.cfg
	const size = 4096
	name := fmt.Sprintf("MCP write_file 4 KiB vs POST /v1/files 4 KiB, p50 of %d each", c.mcpCalls)
	tr, err := newTransport()
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentfs-bench", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             c.url + "/mcp",
		HTTPClient:           &http.Client{Transport: bearer{token: c.token, next: tr}},
		DisableStandaloneSSE: true,
		MaxRetries:           -1, // every number is one request
	}, nil)
	if err != nil {
		if strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "Not Found") {
			return []row{{name: name, agentfs: "not served yet (/mcp: 404)", budget: fmt.Sprintf("p50 ≤ %g×", mcpBudget)}}, nil
		}
		return nil, fmt.Errorf("connect to %s/mcp: %w", c.url, err)
	}
	defer session.Close()

	content := string(b.data.text(0, size))
	textHdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	write := func(i int) (time.Duration, error) {
		p := b.path(fmt.Sprintf("mcp/tool/%d.txt", i))
		t0 := time.Now()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": p, "content": content}})
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("write_file %s: %w", p, err)
		}
		if res.IsError {
			return 0, fmt.Errorf("write_file %s: tool error: %s", p, oneLine(toolText(res), 200))
		}
		return d, nil
	}
	post := func(i int) (time.Duration, error) {
		t0 := time.Now()
		_, _, err := b.api.putFile(ctx, b.path(fmt.Sprintf("mcp/rest/%d.txt", i)), strings.NewReader(content), size, textHdr)
		return time.Since(t0), err
	}
	viaMCP, viaREST, err := alternated(5, c.mcpCalls, write, post)
	if err != nil {
		return nil, err
	}
	m50, r50 := percentile(viaMCP, 50), percentile(viaREST, 50)
	logf("  write_file p50 %s (p90 %s), POST /v1/files p50 %s (p90 %s)", fmtMS(m50), fmtMS(percentile(viaMCP, 90)), fmtMS(r50), fmtMS(percentile(viaREST, 90)))
	b.notes = append(b.notes, fmt.Sprintf("MCP: write_file through github.com/modelcontextprotocol/go-sdk's client (Streamable HTTP, stateless server), p90 %s; POST /v1/files p90 %s; both unkeyed, one call at a time.",
		fmtMS(percentile(viaMCP, 90)), fmtMS(percentile(viaREST, 90))))
	rows := []row{p50RatioRow(name, viaMCP, viaREST, mcpBudget)}
	peer, notes, err := b.mcpPeer(ctx, session)
	if err != nil {
		return nil, err
	}
	b.notes = append(b.notes, notes...)
	return append(rows, peer...), nil
}
