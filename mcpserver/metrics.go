package mcpserver

import "github.com/prometheus/client_golang/prometheus"

// NewCallCounter returns the counter of tool calls by tool and outcome,
// agentfs_mcp_tool_calls_total, for the caller to register. Both labels
// take values from closed sets: the registered tool names, and OutcomeOK,
// OutcomeError or OutcomeInvalidArguments.
func NewCallCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentfs_mcp_tool_calls_total",
		Help: "MCP tool calls by tool and outcome (ok; error: a tool error result; invalid_arguments: a tool error for arguments the input schema refused).",
	}, []string{"tool", "outcome"})
}

// CountCalls returns an Options.OnCall hook that counts every call in vec
// (made by NewCallCounter).
func CountCalls(vec *prometheus.CounterVec) func(tool, outcome string) {
	return func(tool, outcome string) { vec.WithLabelValues(tool, outcome).Inc() }
}
