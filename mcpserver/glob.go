package mcpserver

import "github.com/agentfs/agentfs"

// maxGlobLen bounds a glob pattern.
const maxGlobLen = agentfs.MaxGlobLen

// glob is a search_files pattern (agentfs.Glob), matched against paths
// relative to the directory searched.
type glob struct{ g *agentfs.Glob }

// compileGlob parses a pattern; a malformed one is an error fit for the
// model.
func compileGlob(pattern string) (*glob, error) {
	g, err := agentfs.CompileGlob(pattern)
	if err != nil {
		return nil, err
	}
	return &glob{g: g}, nil
}

// match reports whether rel matches the pattern.
func (g *glob) match(rel string) bool { return g.g.Match(rel) }
