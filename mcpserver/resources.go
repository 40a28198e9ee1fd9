package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Files are MCP resources too, named by the URI template ResourceTemplate
// (agentfs:///reports/q3.md is the live file at reports/q3.md): clients
// that attach context as resources read them with resources/read, list
// them with resources/list and, on the /mcp door, subscribe to them.

// ResourceScheme and ResourceTemplate name files as resources.
const (
	ResourceScheme   = "agentfs"
	ResourceTemplate = "agentfs:///{+path}"
)

// ResourcePrefixMeta is the key, in resources/list's _meta, of the path
// prefix to list (e.g. "reports/"); without it every file is listed.
const ResourcePrefixMeta = "agentfs/prefix"

// resourcePage is the most files one resources/list page holds (fewer
// when Options.ScanFiles is smaller).
const resourcePage = 100

// ResourceURI is the resource URI of the file at path.
func ResourceURI(path string) string {
	return (&url.URL{Scheme: ResourceScheme, Path: "/" + path}).String()
}

// ResourcePath is the file path a resource URI names, or an error saying
// why it names none. A URI ending in "/" names a directory (a prefix),
// which only subscriptions take (dir is then true).
func ResourcePath(uri string) (path string, dir bool, err error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != ResourceScheme || u.Host != "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false, fmt.Errorf("%q is not an AgentFS resource URI (agentfs:///PATH, e.g. agentfs:///reports/q3.md)", uri)
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p == "" {
		return "", true, nil
	}
	if strings.HasSuffix(p, "/") {
		d, err := dirPath("uri", p)
		return dirPrefix(d), true, problemError(err)
	}
	p, err = filePath("uri", p)
	return p, false, problemError(err)
}

// problemError words a tool problem for a JSON-RPC error's message.
func problemError(err error) error {
	var p *Problem
	if errors.As(err, &p) {
		return errors.New(p.Error())
	}
	return err
}

// addResources registers the file template and the resources/list of s.
func addResources(s *mcp.Server, tb *toolbox) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "file", Title: "AgentFS file", URITemplate: ResourceTemplate,
		Description: "A live file of AgentFS by its path: agentfs:///reports/q3.md. Text reads as text; other bytes as a blob.",
	}, tb.readResource)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.ListResourcesRequest); ok && method == "resources/list" {
				return tb.listResources(ctx, r)
			}
			return next(ctx, method, req)
		}
	})
}

// readResource is resources/read of a file: its text when it is UTF-8,
// else its bytes as a blob, up to the media limit.
func (tb *toolbox) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, dir, err := ResourcePath(uri)
	if err != nil {
		return nil, invalidParams(err.Error())
	}
	if dir {
		return nil, invalidParams(fmt.Sprintf("%s names a directory; read a file (resources/list lists them)", uri))
	}
	f, err := tb.b.FileAt(ctx, p)
	var pr *Problem
	if errors.As(err, &pr) && pr.Code == CodeNotFound {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, tb.rpcProblem(err)
	}
	maxRaw := tb.opts.MaxMediaBytes / 4 * 3
	if f.SizeBytes > maxRaw {
		return nil, tb.rpcProblem(mediaTooLarge(f.Path, f.SizeBytes, tb.opts.MaxMediaBytes))
	}
	c, err := tb.b.Read(ctx, ReadRequest{FileID: f.ID, Length: maxRaw})
	if err != nil {
		return nil, tb.rpcProblem(err)
	}
	rc := &mcp.ResourceContents{URI: uri, MIMEType: mediaType(c.ContentType, c.Data),
		Meta: mcp.Meta{"agentfs/etag": c.ETag, "agentfs/file_id": f.ID}}
	if utf8.Valid(c.Data) {
		rc.Text = string(c.Data)
	} else {
		rc.Blob = c.Data
	}
	// A file is its subject's alone, and changes: cached by the client
	// that asked only, never served from a cache without asking again.
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}, Cacheable: private}, nil
}

// listResources is resources/list: the live files under the prefix its
// _meta names (ResourcePrefixMeta), resourcePage at a time, oldest path
// first as the API lists them.
func (tb *toolbox) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	prefix := ""
	var cursor string
	if req.Params != nil {
		cursor = req.Params.Cursor
		if v, ok := req.Params.Meta[ResourcePrefixMeta]; ok {
			s, isString := v.(string)
			d, err := dirPath("_meta."+ResourcePrefixMeta, s)
			if !isString || err != nil {
				return nil, invalidParams(fmt.Sprintf("_meta.%s must be a directory path such as reports/", ResourcePrefixMeta))
			}
			prefix = dirPrefix(d)
		}
	}
	list, err := tb.b.List(ctx, ListFilter{Prefix: prefix, Limit: min(resourcePage, tb.opts.ScanFiles), Cursor: cursor})
	if err != nil {
		return nil, tb.rpcProblem(err)
	}
	out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: private}
	for _, f := range list.Files {
		out.Resources = append(out.Resources, &mcp.Resource{URI: ResourceURI(f.Path), Name: f.Path,
			MIMEType: f.ContentType, Size: f.SizeBytes})
	}
	if list.HasMore {
		out.NextCursor = list.NextCursor
	}
	return out, nil
}

// private is the cache hint of what one subject reads: the requesting
// client's alone, stale at once.
var private = mcp.Cacheable{CacheScope: "private"}

func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// rpcProblem is a JSON-RPC error whose message starts with the problem's
// code and whose data is the problem.
func (tb *toolbox) rpcProblem(err error) error {
	var p *Problem
	if !errors.As(err, &p) {
		tb.opts.Logger.Error("mcp resource request failed", "error", err)
		p = internal()
	}
	code := int64(jsonrpc.CodeInternalError)
	if p.Status >= 400 && p.Status < 500 {
		code = jsonrpc.CodeInvalidParams
	}
	data, _ := json.Marshal(p)
	return &jsonrpc.Error{Code: code, Message: p.Error(), Data: data}
}
