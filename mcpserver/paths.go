package mcpserver

import (
	"errors"
	"strings"

	"github.com/agentfs/agentfs"
)

// filePath turns a tool's path argument into an AgentFS file path: one
// leading "/" is accepted and dropped (models often write absolute paths),
// and the rest must be a valid path (the path rules), else INVALID_PATH.
func filePath(field, arg string) (string, error) {
	p := strings.TrimPrefix(arg, "/")
	if err := agentfs.ValidatePath(p); err != nil {
		return "", invalidPath(field, arg, err)
	}
	return p, nil
}

// dirPath turns a listing tool's path argument into a directory: "" for the
// root ("", "." and "/" name it), else a valid path without the leading or
// trailing "/". Its files are those whose path starts with dirPrefix(dir).
func dirPath(field, arg string) (string, error) {
	if arg == "" || arg == "." || arg == "/" || arg == "./" {
		return "", nil
	}
	p := strings.TrimPrefix(arg, "/")
	if strings.HasSuffix(p, "/") {
		p = strings.TrimSuffix(p, "/")
		if p == "" || strings.HasSuffix(p, "/") {
			return "", invalidPath(field, arg, errors.New("path has an empty segment"))
		}
	}
	if err := agentfs.ValidatePath(p); err != nil {
		return "", invalidPath(field, arg, err)
	}
	return p, nil
}

// dirPrefix is the path prefix of a directory's files.
func dirPrefix(dir string) string {
	if dir == "" {
		return ""
	}
	return dir + "/"
}
