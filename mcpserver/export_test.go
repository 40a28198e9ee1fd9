package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

// ToolHandlers are the tools and the SDK handlers a server binds them to,
// on b with opts: FuzzToolArguments calls them directly. It is an external
// test (package mcpserver_test) because the API server it runs against
// (apitest, server.New) wires this package.
func ToolHandlers(b Backend, opts Options) ([]*mcp.Tool, []mcp.ToolHandler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	tb := &toolbox{b: b, opts: opts}
	var tools []*mcp.Tool
	var handlers []mcp.ToolHandler
	for _, s := range toolSpecs() {
		tools = append(tools, s.tool)
		handlers = append(handlers, s.bind(tb))
	}
	return tools, handlers, nil
}
