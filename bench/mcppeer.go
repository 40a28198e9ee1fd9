package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPeerBudget bounds each of AgentFS's four tools' p50 over that of the
// reference filesystem server's same tool.
const mcpPeerBudget = 2.0

// mcpListEntries is the size of the directory list_directory lists.
const mcpListEntries = 200

// The reference MCP filesystem server: the npm package, run by Node 24 from
// tools/node (scripts/bench.sh: ensure_deps node npm exports both
// variables).
const refServerScript = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

// mcpTool is one tool call of the comparison on either side: args(i) are
// the arguments of call i.
type mcpTool struct {
	name       string
	agent, ref func(i int) map[string]any
}

// mcpPeer: write_file of 4 KiB, read_text_file of it, list_directory of
// 200 entries and edit_file of one replacement, each through AgentFS's
// /mcp (the session given: Streamable HTTP) and through the reference
// filesystem server (@modelcontextprotocol/server-filesystem over stdio,
// on a temporary directory on local disk), both driven by this one Go SDK
// client, one call at a time, alternating; the p50s count. For AgentFS it
// also counts, from its /metrics, the Postgres statements and S3 requests
// per call of each tool.
func (b *bench) mcpPeer(ctx context.Context, agent *mcp.ClientSession) ([]row, []string, error) {
	c := b.cfg
	n := c.mcpCalls
	names := []string{"write_file 4 KiB", "read_text_file 4 KiB", fmt.Sprintf("list_directory (%d entries)", mcpListEntries), "edit_file (one replacement in 4 KiB)"}
	rowName := func(tool string) string {
		return fmt.Sprintf("MCP %s: /mcp vs the reference filesystem server (stdio, local disk), p50 of %d each", tool, n)
	}
	node, tools := os.Getenv("NODE24"), os.Getenv("NODE_TOOLS_DIR")
	if node == "" || tools == "" {
		var rows []row
		for _, t := range names {
			rows = append(rows, row{name: rowName(t), agentfs: "not run: NODE24 and NODE_TOOLS_DIR unset (scripts/bench.sh sets them)",
				budget: fmt.Sprintf("p50 ≤ %g×", mcpPeerBudget)})
		}
		return rows, nil, nil
	}
	root, err := os.MkdirTemp("", "agentfs-bench-mcpref-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	// Resolved, as the server resolves its allowed directory (symlinks).
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, node, filepath.Join(tools, refServerScript), root)
	cmd.Stderr = io.Discard
	ref, err := mcp.NewClient(&mcp.Implementation{Name: "agentfs-bench", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("start the reference filesystem server (%s %s): %w", node, refServerScript, err)
	}
	defer ref.Close()
	if v := ref.InitializeResult().ServerInfo; v != nil {
		logf("  reference: %s %s over stdio on %s", v.Name, v.Version, root)
	}

	// What both sides work on: 4 KiB text in lines of 64 bytes, and in
	// the edited files a marker that each edit moves on by one.
	const size = 4096
	text := b.data.text(0, size)
	for i := 63; i < len(text); i += 64 {
		text[i] = '\n'
	}
	content := string(text)
	marker := func(i int) string { return fmt.Sprintf("<<edit-%08d>>", i) }
	editable := marker(0) + "\n" + content[len(marker(0))+1:]

	agentDir, refDir := b.path("mcp/peer"), filepath.Join(root, "peer")
	if err := os.MkdirAll(filepath.Join(refDir, "list"), 0o755); err != nil {
		return nil, nil, err
	}
	textHdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	for i := range mcpListEntries {
		name := fmt.Sprintf("list/%03d.txt", i)
		if _, _, err := b.api.putFile(ctx, agentDir+"/"+name, strings.NewReader(content), size, textHdr); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(refDir, name), text, 0o644); err != nil {
			return nil, nil, err
		}
	}
	const editFiles = 8 // edits go round these, so no one file's history grows long
	for i := range editFiles {
		name := fmt.Sprintf("edit/%d.txt", i)
		if _, _, err := b.api.putFile(ctx, agentDir+"/"+name, strings.NewReader(editable), int64(len(editable)), textHdr); err != nil {
			return nil, nil, err
		}
		if err := os.MkdirAll(filepath.Join(refDir, "edit"), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(refDir, name), []byte(editable), 0o644); err != nil {
			return nil, nil, err
		}
	}
	const warmup = 5
	written := func(i int) string { return fmt.Sprintf("write/%d.txt", i%(warmup+n)) }
	edit := func(dir string) func(i int) map[string]any {
		return func(i int) map[string]any {
			round := i / editFiles
			return map[string]any{"path": fmt.Sprintf("%s/edit/%d.txt", dir, i%editFiles),
				"edits": []map[string]any{{"oldText": marker(round), "newText": marker(round + 1)}}}
		}
	}
	tools4 := []mcpTool{
		{"write_file",
			func(i int) map[string]any {
				return map[string]any{"path": agentDir + "/" + written(i), "content": content}
			},
			func(i int) map[string]any {
				return map[string]any{"path": filepath.Join(refDir, written(i)), "content": content}
			}},
		{"read_text_file",
			func(i int) map[string]any { return map[string]any{"path": agentDir + "/" + written(i)} },
			func(i int) map[string]any { return map[string]any{"path": filepath.Join(refDir, written(i))} }},
		{"list_directory",
			func(int) map[string]any { return map[string]any{"path": agentDir + "/list"} },
			func(int) map[string]any { return map[string]any{"path": filepath.Join(refDir, "list")} }},
		{"edit_file", edit(agentDir), edit(refDir)},
	}
	if err := os.MkdirAll(filepath.Join(refDir, "write"), 0o755); err != nil {
		return nil, nil, err
	}

	var rows []row
	var notes []string
	for k, t := range tools4 {
		call := func(s *mcp.ClientSession, side string, args map[string]any) (time.Duration, error) {
			t0 := time.Now()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: t.name, Arguments: args})
			d := time.Since(t0)
			if err != nil {
				return 0, fmt.Errorf("%s %s %v: %w", side, t.name, args["path"], err)
			}
			if res.IsError {
				return 0, fmt.Errorf("%s %s %v: tool error: %s", side, t.name, args["path"], oneLine(toolText(res), 200))
			}
			if err := checkPeerResult(t.name, toolText(res), content); err != nil {
				return 0, fmt.Errorf("%s %s %v: %w", side, t.name, args["path"], err)
			}
			return d, nil
		}
		before, err := b.serverCalls(ctx)
		if err != nil {
			return nil, nil, err
		}
		cpu0 := b.cpuNow()
		viaAgent, viaRef, err := alternated(warmup, n,
			func(i int) (time.Duration, error) { return call(agent, "/mcp", t.agent(i)) },
			func(i int) (time.Duration, error) { return call(ref, "reference", t.ref(i)) })
		if err != nil {
			return nil, nil, err
		}
		cpu1 := b.cpuNow()
		after, err := b.serverCalls(ctx)
		if err != nil {
			return nil, nil, err
		}
		per := after.minus(before).per(warmup + n)
		if b.cfg.serverPID > 0 {
			per.serverCPU = (cpu1.server - cpu0.server) / time.Duration(warmup+n)
		}
		if cpu0.pgKnown && cpu1.pgKnown {
			per.pgCPU = (cpu1.pg - cpu0.pg) / time.Duration(warmup+n)
		}
		rows = append(rows, p50RatioRow(rowName(names[k]), viaAgent, viaRef, mcpPeerBudget))
		logf("  %s: /mcp p50 %s (p90 %s), reference p50 %s (p90 %s); per /mcp call %s",
			t.name, fmtMS(percentile(viaAgent, 50)), fmtMS(percentile(viaAgent, 90)),
			fmtMS(percentile(viaRef, 50)), fmtMS(percentile(viaRef, 90)), per)
		notes = append(notes, fmt.Sprintf("MCP %s per /mcp call: %s.", t.name, per))
	}
	notes = append(notes, "MCP peer: both sides through github.com/modelcontextprotocol/go-sdk's client in this process; "+
		"the reference is @modelcontextprotocol/server-filesystem under Node 24 over stdio on a temporary directory; "+
		"statements and S3 requests are AgentFS's own /metrics counts, CPU from /proc (agentfs, the Postgres processes), over all calls of a tool, warm-up included.")
	return rows, notes, nil
}

// toolText joins a tool result's text content.
func toolText(res *mcp.CallToolResult) string {
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return text.String()
}

// checkPeerResult checks that a call did what the comparison needs, on
// either server: a read returned the content, a listing named the 200
// files, an edit showed its diff.
func checkPeerResult(tool, text, content string) error {
	switch tool {
	case "read_text_file":
		if !strings.Contains(text, content) {
			return fmt.Errorf("answered %d bytes, not the 4 KiB written", len(text))
		}
	case "list_directory":
		if got := strings.Count(text, "[FILE]"); got != mcpListEntries {
			return fmt.Errorf("listed %d files, want %d: %s", got, mcpListEntries, oneLine(text, 200))
		}
	case "edit_file":
		if !strings.Contains(text, "+<<edit-") {
			return fmt.Errorf("no diff in the answer: %s", oneLine(text, 200))
		}
	}
	return nil
}

// serverCounts are the Postgres calls (by operation: select, insert, …,
// begin, commit, acquire) and S3 requests (by operation) that the AgentFS
// server has made, from its /metrics.
type serverCounts struct{ pg, s3 map[string]float64 }

func (b *bench) serverCalls(ctx context.Context) (serverCounts, error) {
	out := serverCounts{pg: map[string]float64{}, s3: map[string]float64{}}
	resp, err := b.api.request(ctx, http.MethodGet, "/metrics", nil, 0, nil)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var into map[string]float64
		switch {
		case strings.HasPrefix(line, "agentfs_postgres_call_duration_seconds_count{"):
			into = out.pg
		case strings.HasPrefix(line, "agentfs_s3_request_duration_seconds_count{"):
			into = out.s3
		default:
			continue
		}
		labels, value, ok := strings.Cut(line[strings.IndexByte(line, '{')+1:], "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		_, op, _ := strings.Cut(labels, `operation="`)
		op, _, _ = strings.Cut(op, `"`)
		into[op] += v
	}
	return out, sc.Err()
}

func (s serverCounts) minus(o serverCounts) serverCounts {
	d := serverCounts{pg: map[string]float64{}, s3: map[string]float64{}}
	for k, v := range s.pg {
		d.pg[k] = v - o.pg[k]
	}
	for k, v := range s.s3 {
		d.s3[k] = v - o.s3[k]
	}
	return d
}

func (s serverCounts) per(calls int) serverPer {
	return serverPer{counts: s, calls: float64(calls)}
}

// serverPer shows counts per call: Postgres statements (pool acquires
// apart) and S3 requests, each with its operations.
type serverPer struct {
	counts serverCounts
	calls  float64
	// serverCPU and pgCPU are the CPU the AgentFS server and Postgres
	// used per call (0: not measured).
	serverCPU, pgCPU time.Duration
}

func (p serverPer) String() string {
	show := func(m map[string]float64, skip string) (float64, string) {
		var total float64
		var parts []string
		for _, k := range sortedKeys(m) {
			if m[k] <= 0 || k == skip {
				continue
			}
			total += m[k]
			parts = append(parts, fmt.Sprintf("%s %.2g", k, m[k]/p.calls))
		}
		return total / p.calls, strings.Join(parts, ", ")
	}
	pg, pgParts := show(p.counts.pg, "acquire")
	s3, s3Parts := show(p.counts.s3, "")
	out := fmt.Sprintf("%.2g Postgres statements (%s; pool acquires %.2g), %.2g S3 requests (%s)",
		pg, pgParts, p.counts.pg["acquire"]/p.calls, s3, s3Parts)
	if p.serverCPU > 0 {
		out += fmt.Sprintf("; CPU agentfs %s", fmtMS(p.serverCPU))
		if p.pgCPU > 0 {
			out += fmt.Sprintf(", postgres %s", fmtMS(p.pgCPU))
		}
	}
	return out
}

func sortedKeys(m map[string]float64) []string {
	return slices.Sorted(maps.Keys(m))
}
