package mcpserver

import "github.com/agentfs/agentfs/textdiff"

// unifiedDiff renders the change from before to after as a unified diff of
// path ("" when nothing changed).
func unifiedDiff(path, before, after string) string { return textdiff.Unified(path, before, after) }

// splitLines splits s after each newline; the last line may lack one.
func splitLines(s string) []string { return textdiff.SplitLines(s) }
