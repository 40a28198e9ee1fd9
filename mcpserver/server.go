// Package mcpserver is AgentFS's tool door for agents: the Model Context
// Protocol tools (MCP), defined once over a Backend of domain
// operations. The stdio door (`agentfs mcp`) runs them over ClientBackend,
// which forwards to a server through the Go client; the API server's /mcp
// door runs them over its admission core.
//
// Tool names and argument shapes follow the reference MCP filesystem
// server, so models already know them. A failed call is a tool result with
// isError set, whose text starts with the problem code and says whether
// retrying helps and what to do next, and whose _meta carries the problem
// ("agentfs/problem"); arguments that do not match the tool's input schema
// are such a failure too (VALIDATION_FAILED naming them).
package mcpserver

import (
	"cmp"
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
	// ScanFiles is how many files one call of directory_tree reads before
	// it answers with a cursor to continue (search_files reads ten times as
	// many), and how many entries (up to 1000) one call of list_directory
	// answers. Default 1000.
	ScanFiles int
	// AgentID and RunID attribute the backend's writes; list_run_files
	// called without run_id or agent_id lists RunID's files (else
	// AgentID's).
	AgentID string `env:"AGENTFS_AGENT_ID"`
	RunID   string `env:"AGENTFS_RUN_ID"`
	// OnCall, when set, is called once per tool call with the tool's name
	// and its outcome (OutcomeOK, OutcomeError or OutcomeInvalidArguments),
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
	OutcomeOK    = "ok"
	OutcomeError = "error" // a tool result with isError
	// OutcomeInvalidArguments is a tool error whose arguments the tool's
	// input schema refused (VALIDATION_FAILED before anything ran).
	OutcomeInvalidArguments = "invalid_arguments"
)

// ProblemMeta is the key of a failed call's problem in its result's _meta.
const ProblemMeta = "agentfs/problem"

func (o Options) withDefaults() (Options, error) {
	o.MaxReadBytes = cmp.Or(o.MaxReadBytes, DefaultMaxReadBytes)
	o.MaxMediaBytes = cmp.Or(o.MaxMediaBytes, DefaultMaxMediaBytes)
	o.MaxWriteBytes = cmp.Or(o.MaxWriteBytes, DefaultMaxWriteBytes)
	o.ScanFiles = cmp.Or(o.ScanFiles, DefaultScanFiles)
	o.MaxBatchCalls = cmp.Or(o.MaxBatchCalls, DefaultMaxBatchCalls)
	o.MaxAnswerBytes = cmp.Or(o.MaxAnswerBytes, DefaultMaxAnswer)
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
	return newServer(b, opts, nil)
}

// newServer is New, whose resources take subscriptions through subs when
// it is set (the /mcp door's).
func newServer(b Backend, opts Options, subs subscriptions) (*mcp.Server, error) {
	if b == nil {
		return nil, errors.New("mcpserver: nil Backend")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// The list of resources changes with every write: no list_changed
	// notification is promised (subscriptions tell of each change).
	so := &mcp.ServerOptions{Instructions: instructions, Logger: opts.Logger,
		Capabilities: &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}}}
	if subs != nil {
		so.SubscribeHandler, so.UnsubscribeHandler = subs.subscribe, subs.unsubscribe
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "agentfs", Title: "AgentFS", Version: opts.Version}, so)
	tb := &toolbox{b: b, opts: opts}
	for _, spec := range toolSpecs() {
		s.AddTool(spec.tool, spec.bind(tb))
	}
	s.AddReceivingMiddleware(showAllowed)
	addResources(s, tb)
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
	"grep_files":          {agentfs.OpSearch},
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
	"fork":                {agentfs.OpCreateFork},
	"merge":               {agentfs.OpMerge},
	"run_recovery":        {agentfs.OpRunRecovery},
	"complete_upload":     {agentfs.OpCompleteUpload},
	"abort_upload":        {agentfs.OpAbortUpload},
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
	// call decodes the arguments and runs the tool, filling in cc, the
	// context to word a failure with (cc.invalid: the arguments did not
	// match the input schema).
	call func(ctx context.Context, tb *toolbox, raw json.RawMessage, cc *callContext) (*mcp.CallToolResult, error)
}

// runFunc is a tool's body: it may fill in cc (path, key, limit) so that a
// failure is worded for the model.
type runFunc[In, Out any] func(ctx context.Context, tb *toolbox, in *In, cc *callContext) (*reply[Out], error)

// define prepares a tool: its input schema from In (adjusted by adjust),
// its output schema from Out, both made portable (schema.go), and the
// decoding of its arguments.
func define[In, Out any](t *mcp.Tool, adjust func(*jsonschema.Schema), run runFunc[In, Out]) *toolSpec {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s input schema: %v", t.Name, err))
	}
	if adjust != nil {
		adjust(in)
	}
	portableInput(in)
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s input schema: %v", t.Name, err))
	}
	// The SDK reads a tool's input schema on every call (it looks for
	// parameters that travel as headers): as JSON text, that is one parse
	// instead of a marshal by reflection and a parse.
	schemaJSON, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: %s input schema: %v", t.Name, err))
	}
	t.InputSchema = json.RawMessage(schemaJSON)
	if t.OutputSchema == nil {
		out, err := jsonschema.For[Out](nil)
		if err != nil {
			panic(fmt.Sprintf("mcpserver: %s output schema: %v", t.Name, err))
		}
		t.OutputSchema = out
	}
	if out, ok := t.OutputSchema.(*jsonschema.Schema); ok {
		portableOutput(out)
	}
	spec := &toolSpec{tool: t}
	spec.call = func(ctx context.Context, tb *toolbox, raw json.RawMessage, cc *callContext) (*mcp.CallToolResult, error) {
		args, perr := decodeArgs[In](raw, in, resolved)
		if perr != nil {
			cc.invalid = true
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
// counts as {}) that matches the input schema. Arguments that do not are
// a tool error VALIDATION_FAILED naming them (a string that is not Unicode
// text: textArgument), so that the model can correct its call.
func decodeArgs[In any](raw json.RawMessage, schema *jsonschema.Schema, resolved *jsonschema.Resolved) (*In, error) {
	if f := jsonutf8.Check(raw); f != nil {
		return nil, textArgument(f)
	}
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, validation("arguments", "are not valid JSON: "+err.Error())
		}
	}
	if v == nil {
		v, raw = map[string]any{}, json.RawMessage("{}")
	}
	if args, ok := v.(map[string]any); ok {
		dropNullOptionals(schema, args) // decoding raw reads them as absent too
	}
	if p := argumentProblem(schema, resolved, v); p != nil {
		return nil, p
	}
	in := new(In)
	if err := json.Unmarshal(raw, in); err != nil {
		return nil, validation("arguments", "do not match the tool's input schema: "+err.Error())
	}
	return in, nil
}

// bind returns the SDK handler of the tool on one server: it turns
// every failure into a tool error, survives a panic, and counts the
// outcome.
func (s *toolSpec) bind(tb *toolbox) mcp.ToolHandler {
	name := s.tool.Name
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var raw json.RawMessage
		if req != nil && req.Params != nil {
			raw = req.Params.Arguments
		}
		var res *mcp.CallToolResult
		cc := &callContext{tool: name}
		if a := answersOf(ctx); a != nil {
			res = a.run(*cc, func() *mcp.CallToolResult { return s.safeCall(ctx, tb, raw, cc) })
		} else {
			res = s.safeCall(ctx, tb, raw, cc)
		}
		outcome := OutcomeOK
		switch {
		case cc.invalid:
			outcome = OutcomeInvalidArguments
		case res.IsError:
			outcome = OutcomeError
		}
		if tb.opts.OnCall != nil {
			tb.opts.OnCall(name, outcome)
		}
		return res, nil
	}
}

// safeCall runs the tool; every failure becomes a tool error result.
func (s *toolSpec) safeCall(ctx context.Context, tb *toolbox, raw json.RawMessage, cc *callContext) (res *mcp.CallToolResult) {
	defer func() {
		if v := recover(); v != nil {
			tb.opts.Logger.Error("mcp tool panicked", "tool", s.tool.Name, "panic", v, "stack", string(debug.Stack()))
			res = failure(*cc, internal())
		}
	}()
	res, err := s.call(ctx, tb, raw, cc)
	var p *Problem
	switch {
	case err == nil:
		return res
	case errors.As(err, &p):
		return failure(*cc, p)
	}
	tb.opts.Logger.Error("mcp tool failed", "tool", s.tool.Name, "error", err)
	return failure(*cc, internal())
}

func internal() *Problem {
	return NewProblem(http.StatusInternalServerError, CodeInternal, "AgentFS could not complete the call because of an internal error")
}

// failure is the tool result of a problem: its text for the model, the
// problem itself in _meta. Never structured content: clients validate that
// against the tool's output schema, a failure's too.
func failure(cc callContext, p *Problem) *mcp.CallToolResult {
	if p.Type == "" {
		p.Type = "/problems/" + p.Code
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: errorText(cc, p)}},
		Meta:    mcp.Meta{ProblemMeta: p},
	}
}

// ProblemOf is the problem of a failed call's result (as this package
// made it, or as a client decoded it), or nil for a result without one.
func ProblemOf(res *mcp.CallToolResult) *Problem {
	if res == nil || !res.IsError {
		return nil
	}
	switch v := res.Meta[ProblemMeta].(type) {
	case *Problem:
		return v
	case nil:
		return nil
	default:
		raw, err := json.Marshal(v)
		var p Problem
		if err != nil || json.Unmarshal(raw, &p) != nil || p.Code == "" {
			return nil
		}
		return &p
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
			listDirectoryTool(), directoryTreeTool(), searchFilesTool(), grepFilesTool(),
			getFileInfoTool(), deleteFileTool(), restoreFileTool(), listRunFilesTool(),
			moveFileTool(), fileHistoryTool(), revertFileTool(), shareFileTool(), runSummaryTool(),
			checkpointTool(), listCheckpointsTool(), diffTool(), restoreTool(), forkTool(), mergeTool(), runRecoveryTool(),
			completeUploadTool(), abortUploadTool(),
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
