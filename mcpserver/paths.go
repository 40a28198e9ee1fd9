package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/agentfs/agentfs"
	"github.com/agentfs/agentfs/jsonutf8"
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

// pathArguments are the tool arguments that name paths.
var pathArguments = map[string]bool{"path": true, "paths": true, "source": true, "destination": true}

// textArgument is the tool error of arguments holding a string that is not
// Unicode text (invalid UTF-8, or a lone surrogate escape), which decoding
// would have turned into U+FFFD: INVALID_PATH when it is a path, else
// VALIDATION_FAILED, naming the argument.
func textArgument(f *jsonutf8.Fault) *Problem {
	field := f.Field
	if field == "" {
		field = "arguments"
	}
	if f.Key || !pathArguments[f.Name] {
		return validation(field, f.Reason)
	}
	p := NewProblem(http.StatusUnprocessableEntity, CodeInvalidPath, field+": "+f.Reason)
	p.Errors = []FieldError{{Field: field, Message: f.Reason}}
	return p
}

// pathArg checks a tool's path argument with check (filePath or dirPath)
// and names it as the path the call acts on.
func (cc *callContext) pathArg(check func(field, arg string) (string, error), arg string) (string, error) {
	p, err := check("path", arg)
	if err != nil {
		return "", err
	}
	cc.path = p
	return p, nil
}

// fileArg is the live file a tool's path argument names (as of the call's
// point, if it names one): the path checked and named as the one the call
// acts on (pathArg), then the file found there (fileAt).
func (tb *toolbox) fileArg(ctx context.Context, cc *callContext, arg string) (string, *File, error) {
	p, err := cc.pathArg(filePath, arg)
	if err != nil {
		return "", nil, err
	}
	f, err := tb.fileAt(ctx, p)
	return p, f, err
}
