// Package mcpserver is AgentFS's tool door for agents: the Model Context
// Protocol tools (MCP), defined once over a Backend of domain
// operations. The stdio door (`agentfs mcp`) runs them over ClientBackend,
// which forwards to a server through the Go client; the API server's /mcp
// door runs them over its admission core.
//
// Tool names and argument shapes follow the reference MCP filesystem
// server, so models already know them. A failed call is a tool result with
// isError set, whose text starts with the problem code and says whether
// retrying helps and what to do next, and whose structured content is the
// problem; protocol errors are kept for calls whose arguments are not JSON
// or do not match the tool's input schema.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/jsonutf8"
)

// Options adjust the tools. Zero fields take their defaults. The env tags
// name the variables agentfs serve and agentfs mcp read them from (package
// envconfig).
type Options struct {
	// MaxReadBytes is how much text read_text_file (and each file of
	// read_multiple_files) returns; a longer file is cut with a note saying
	// how to read the rest. Default 256 KiB.
	MaxReadBytes int64 `env:"AGENTFS_MCP_MAX_READ_BYTES" envMin:"1024"`
	// MaxMediaBytes caps the base64 that read_media_file returns. Default
	// 4 MiB.
	MaxMediaBytes int64 `env:"AGENTFS_MCP_MAX_MEDIA_BYTES" envMin:"1024"`
	// MaxWriteBytes caps the content of write_file and the size of a file
	// edit_file edits. Default 4 MiB.
	MaxWriteBytes int64 `env:"AGENTFS_MCP_MAX_WRITE_BYTES"`
	// MaxBatchCalls is the most calls one JSON-RPC batch to the /mcp door
	// may hold (where the protocol has batches). Default 32.
	MaxBatchCalls int `env:"AGENTFS_MCP_MAX_BATCH_CALLS" envMax:"1048576"`
	// MaxAnswerBytes bounds what the calls of one /mcp request answer
	// together: once their answers hold this much, its further calls
	// answer PAYLOAD_TOO_LARGE without running. Default 16 MiB.
	MaxAnswerBytes int64 `env:"AGENTFS_MCP_MAX_ANSWER_BYTES"`
	// ScanFiles is how many files one call of list_directory or
	// directory_tree reads before it answers with a cursor to continue
	// (search_files reads ten times as many). Default 1000.
	ScanFiles int
	// AgentID and RunID attribute the backend's writes; list_run_files
	// called without run_id or agent_id lists RunID's files (else
	// AgentID's).
	AgentID string `env:"AGENTFS_AGENT_ID"`
	RunID   string `env:"AGENTFS_RUN_ID"`
	// OnCall, when set, is called once per tool call with the tool's name
	// and its outcome (OutcomeOK, OutcomeError or OutcomeProtocolError),
	// for a counter such as CountCalls. Both values come from closed sets.
	OnCall func(tool, outcome string)
	// Logger receives internal errors (with detail the model never sees).
	Logger *slog.Logger
	// Version is reported to clients as the server implementation's version.
	Version string
}

// Limit defaults.
const (
	DefaultMaxReadBytes  = 256 << 10
	DefaultMaxMediaBytes = 4 << 20
	DefaultMaxWriteBytes = 4 << 20
	DefaultScanFiles     = 1000
	DefaultMaxBatchCalls = 32
	DefaultMaxAnswer     = 16 << 20
)

// Outcomes of a tool call, as Options.OnCall reports them.
const (
	OutcomeOK            = "ok"
	OutcomeError         = "error"          // a tool result with isError
	OutcomeProtocolError = "protocol_error" // malformed arguments
)

func (o Options) withDefaults() (Options, error) {
	if o.MaxReadBytes == 0 {
		o.MaxReadBytes = DefaultMaxReadBytes
	}
	if o.MaxMediaBytes == 0 {
		o.MaxMediaBytes = DefaultMaxMediaBytes
	}
	if o.MaxWriteBytes == 0 {
		o.MaxWriteBytes = DefaultMaxWriteBytes
	}
	if o.ScanFiles == 0 {
		o.ScanFiles = DefaultScanFiles
	}
	if o.MaxBatchCalls == 0 {
		o.MaxBatchCalls = DefaultMaxBatchCalls
	}
	if o.MaxAnswerBytes == 0 {
		o.MaxAnswerBytes = DefaultMaxAnswer
	}
	if o.MaxReadBytes < 1024 || o.MaxMediaBytes < 1024 || o.MaxWriteBytes < 1 || o.ScanFiles < 1 || o.MaxBatchCalls < 1 || o.MaxAnswerBytes < 1 {
		return o, errors.New("mcpserver: MaxReadBytes and MaxMediaBytes must be at least 1024; MaxWriteBytes, ScanFiles, MaxBatchCalls and MaxAnswerBytes positive")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	return o, nil
}

// instructions tell a client what the tools are for.
const instructions = `AgentFS stores files for agents, safe to retry. Paths are relative, like reports/summary.md; directories are path prefixes. ` +
	`Writes are idempotent per idempotency_key: repeating a write with the same key never writes twice. ` +
	`A failed call starts with an error code and says what to do next.`

// New returns an MCP server whose tools act through b. In the HTTP door's
// stateless mode, build one per request from the request's principal: the
// tool definitions are prepared once per process, so New is cheap.
func New(b Backend, opts Options) (*mcp.Server, error) {
	if b == nil {
		return nil, errors.New("mcpserver: nil Backend")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "agentfs", Title: "AgentFS", Version: opts.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: opts.Logger, Capabilities: &mcp.ServerCapabilities{}})
	tb := &toolbox{b: b, opts: opts}
	for _, spec := range toolSpecs() {
		s.AddTool(spec.tool, spec.bind(tb))
	}
	return s, nil
}

// toolOperations names the operations each tool runs (agentfs.Op…): a
// token needs every scope agentfs's operation table gives them. The tools
// do not check it themselves: each operation is checked where it runs
// (the admission core, the read gate, or the server the stdio door
// forwards to).
var toolOperations = map[string][]string{
	"read_text_file":      {agentfs.OpListFiles, agentfs.OpReadContent},
	"read_media_file":     {agentfs.OpListFiles, agentfs.OpReadContent},
	"read_multiple_files": {agentfs.OpListFiles, agentfs.OpReadContent},
	"write_file":          {agentfs.OpPut},
	"edit_file":           {agentfs.OpListFiles, agentfs.OpReadContent, agentfs.OpPut},
	"list_directory":      {agentfs.OpListFiles},
	"directory_tree":      {agentfs.OpListFiles},
	"search_files":        {agentfs.OpListFiles},
	"get_file_info":       {agentfs.OpListFiles},
	"delete_file":         {agentfs.OpListFiles, agentfs.OpDelete},
	"restore_file":        {agentfs.OpRestore},
	"list_run_files":      {agentfs.OpListFiles},
	"move_file":           {agentfs.OpListFiles, agentfs.OpMove},
	"file_history":        {agentfs.OpListFiles, agentfs.OpListVersions},
	"revert_file":         {agentfs.OpListFiles, agentfs.OpRevert},
	"share_file":          {agentfs.OpListFiles, agentfs.OpCreateLink},
	"run_summary":         {agentfs.OpGetRun},
	"checkpoint":          {agentfs.OpCreateCheckpoint},
	"list_checkpoints":    {agentfs.OpListCheckpoints},
	"diff":                {agentfs.OpDiff, agentfs.OpReadContent},
	"restore":             {agentfs.OpRestorePoint},
}

// ToolOperations names the operations a tool runs, whose scopes
// (agentfs.ScopesFor) a token needs for it: what a tools/list filtered by
// a token's grant shows, and what the tests hold each tool to.
func ToolOperations(tool string) []string { return slices.Clone(toolOperations[tool]) }

// ToolNames lists the tools New registers, in registration order.
func ToolNames() []string {
	var names []string
	for _, s := range toolSpecs() {
		names = append(names, s.tool.Name)
	}
	return names
}

// toolbox is what every tool handler works with: the backend and the
// options of one server.
type toolbox struct {
	b    Backend
	opts Options
}

// attributed is a backend whose calls carry their own attribution: the
// /mcp door's, where each request says its agent and run.
type attributed interface {
	Attribution(ctx context.Context) (agentID, runID string)
}

// attribution is the agent and run this call acts for.
func (tb *toolbox) attribution(ctx context.Context) (agentID, runID string) {
	if a, ok := tb.b.(attributed); ok {
		return a.Attribution(ctx)
	}
	return tb.opts.AgentID, tb.opts.RunID
}

// reply is a tool's successful answer: text for the model, the structured
// output (matching the tool's output schema), and further content blocks.
type reply[Out any] struct {
	Text  string
	Out   Out
	Extra []mcp.Content
}

// toolSpec is one tool, prepared once per process.
type toolSpec struct {
	tool *mcp.Tool
	// call decodes the arguments and runs the tool. It returns a
	// *jsonrpc.Error for malformed arguments, and fills in cc, the context
	// to word a failure with.
	call func(ctx context.Context, tb *toolbox, raw json.RawMessage, cc *callContext) (*mcp.CallToolResult, error)
}

// runFunc is a tool's body: it may fill in cc (path, key, limit) so that a
// failure is worded for the model.
type runFunc[In, Out any] func(ctx context.Context, tb *toolbox, in *In, cc *callContext) (*reply[Out], error)

// define prepares a tool: its input schema from In (adjusted by adjust),
// its output schema from Out, and the decoding of its arguments.
func define[In, Out any](t *mcp.Tool, adjust func(*jsonschema.Schema), run runFunc[In, Out]) *toolSpec {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s input schema: %v", t.Name, err))
	}
	if adjust != nil {
		adjust(in)
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s input schema: %v", t.Name, err))
	}
	t.InputSchema = in
	if t.OutputSchema == nil {
		out, err := jsonschema.For[Out](nil)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s output schema: %v", t.Name, err))
		}
		t.OutputSchema = out
	}
	spec := &toolSpec{tool: t}
	spec.call = func(ctx context.Context, tb *toolbox, raw json.RawMessage, cc *callContext) (*mcp.CallToolResult, error) {
		args, perr := decodeArgs[In](raw, resolved)
		if perr != nil {
			return nil, perr
		}
		rep, err := run(ctx, tb, args, cc)
		if err != nil {
			return nil, err
		}
		res := &mcp.CallToolResult{Content: append([]mcp.Content{&mcp.TextContent{Text: rep.Text}}, rep.Extra...)}
		res.StructuredContent = rep.Out
		return res, nil
	}
	return spec
}

// decodeArgs decodes a call's arguments: a JSON object (absent or null
// counts as {}) that matches the input schema. A string in it that is not
// Unicode text is a tool error (textArgument); anything else is a
// protocol error, invalid params.
func decodeArgs[In any](raw json.RawMessage, schema *jsonschema.Resolved) (*In, error) {
	if f := jsonutf8.Check(raw); f != nil {
		return nil, textArgument(f)
	}
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, invalidParams("arguments are not valid JSON: %v", err)
		}
	}
	if v == nil {
		v, raw = map[string]any{}, json.RawMessage("{}")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, invalidParams("arguments must be a JSON object")
	}
	if err := schema.Validate(v); err != nil {
		return nil, invalidParams("arguments do not match the tool's input schema: %v", err)
	}
	in := new(In)
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, invalidParams("arguments do not match the tool's input schema: %v", err)
	}
	return in, nil
}

func invalidParams(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// bind returns the SDK handler of the tool on one server: it turns
// failures into tool errors (or protocol errors for malformed arguments),
// survives a panic, and counts the outcome.
func (s *toolSpec) bind(tb *toolbox) mcp.ToolHandler {
	name := s.tool.Name
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		var raw json.RawMessage
		if req != nil && req.Params != nil {
			raw = req.Params.Arguments
		}
		if a := answersOf(ctx); a != nil {
			res, err = a.run(callContext{tool: name}, func() (*mcp.CallToolResult, error) { return s.safeCall(ctx, tb, raw) })
		} else {
			res, err = s.safeCall(ctx, tb, raw)
		}
		outcome := OutcomeOK
		switch {
		case err != nil:
			outcome = OutcomeProtocolError
		case res.IsError:
			outcome = OutcomeError
		}
		if tb.opts.OnCall != nil {
			tb.opts.OnCall(name, outcome)
		}
		return res, err
	}
}

// safeCall runs the tool; every failure but a protocol error becomes a
// tool error result.
func (s *toolSpec) safeCall(ctx context.Context, tb *toolbox, raw json.RawMessage) (res *mcp.CallToolResult, err error) {
	cc := &callContext{tool: s.tool.Name}
	defer func() {
		if v := recover(); v != nil {
			tb.opts.Logger.Error("mcp tool panicked", "tool", s.tool.Name, "panic", v, "stack", string(debug.Stack()))
			res, err = failure(*cc, internal()), nil
		}
	}()
	res, err = s.call(ctx, tb, raw, cc)
	var rpcErr *jsonrpc.Error
	var p *Problem
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr):
		return nil, rpcErr
	case errors.As(err, &p):
		return failure(*cc, p), nil
	}
	tb.opts.Logger.Error("mcp tool failed", "tool", s.tool.Name, "error", err)
	return failure(*cc, internal()), nil
}

func internal() *Problem {
	return NewProblem(http.StatusInternalServerError, CodeInternal, "AgentFS could not complete the call because of an internal error")
}

// failure is the tool result of a problem.
func failure(cc callContext, p *Problem) *mcp.CallToolResult {
	if p.Type == "" {
		p.Type = "/problems/" + p.Code
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: errorText(cc, p)}},
		StructuredContent: p,
	}
}

var (
	specsOnce sync.Once
	specs     []*toolSpec
)

// toolSpecs returns every tool, prepared once per process.
func toolSpecs() []*toolSpec {
	specsOnce.Do(func() {
		specs = []*toolSpec{
			readTextFileTool(), readMediaFileTool(), readMultipleFilesTool(),
			writeFileTool(), editFileTool(),
			listDirectoryTool(), directoryTreeTool(), searchFilesTool(),
			getFileInfoTool(), deleteFileTool(), restoreFileTool(), listRunFilesTool(),
			moveFileTool(), fileHistoryTool(), revertFileTool(), shareFileTool(), runSummaryTool(),
			checkpointTool(), listCheckpointsTool(), diffTool(), restoreTool(),
		}
	})
	return specs
}

// Annotation helpers: every tool acts on AgentFS only (a closed world).
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)}
}

func writes(title string, destructive, idempotent bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: ptr(destructive), IdempotentHint: idempotent, OpenWorldHint: ptr(false)}
}

func ptr[T any](v T) *T { return &v }
