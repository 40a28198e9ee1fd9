package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs"
)

// showAllowed makes tools/list show a caller of the /mcp door only the
// tools its token's scopes allow (every operation ToolOperations names),
// so a model is not offered what would answer FORBIDDEN. A call of a tool
// left out is still checked where its operations run; a list without a
// caller (the stdio door, whose token the server behind it checks) shows
// every tool.
func showAllowed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		who, ok := agentfs.CallerFromContext(ctx)
		list, isList := res.(*mcp.ListToolsResult)
		if err != nil || !ok || !isList || method != "tools/list" {
			return res, err
		}
		shown := *list
		shown.Tools = nil
		for _, t := range list.Tools {
			if toolAllowed(who.Grant, t.Name) {
				shown.Tools = append(shown.Tools, t)
			}
		}
		return &shown, nil
	}
}

// toolAllowed reports whether g carries every scope tool's operations
// need.
func toolAllowed(g agentfs.Grant, tool string) bool {
	for _, op := range toolOperations[tool] {
		need, ok := agentfs.ScopesFor(op)
		if !ok {
			return false
		}
		for _, s := range need {
			if !g.Can(s) {
				return false
			}
		}
	}
	return true
}
