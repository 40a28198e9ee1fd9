package mcpserver

import (
	"context"
	"fmt"

	"github.com/agentfs/agentfs"
	"github.com/google/jsonschema-go/jsonschema"
)

type shareFileIn struct {
	Path      string `json:"path" jsonschema:"the live file to share, e.g. charts/loss.png"`
	ExpiresIn int64  `json:"expires_in,omitempty" jsonschema:"seconds the link works, 60 to 604800 (7 days); default 3600"`
	Version   int64  `json:"version,omitempty" jsonschema:"share this version only (file_history lists them); default: the file's current content whenever the link is opened"`
}

func shareFileTool() *toolSpec {
	return define(tool("share_file"), func(s *jsonschema.Schema) {
		seconds(s, "expires_in", agentfs.MinLinkExpiresIn, agentfs.MaxLinkExpiresIn)
		versionProperty(s)
	}, func(ctx context.Context, tb *toolbox, in *shareFileIn, cc *callContext) (*reply[Link], error) {
		p, f, err := tb.fileArg(ctx, cc, in.Path)
		if err != nil {
			return nil, err
		}
		cc.version = in.Version
		l, err := tb.b.Share(ctx, f.ID, ShareArgs{ExpiresIn: in.ExpiresIn, Version: in.Version})
		if err != nil {
			return nil, err
		}
		what := "its current content, whatever it is when the link is opened"
		if l.Version != nil {
			what = fmt.Sprintf("version %d", *l.Version)
		}
		text := fmt.Sprintf("Share link to %s (%s), valid until %s:\n%s\n"+
			"Anyone with this URL can download it without a token until then. The URL is shown only now: keep it or hand it over. (link %s)",
			p, what, l.ExpiresAt.Format(rfc3339), l.URL, l.ID)
		return &reply[Link]{Text: text, Out: *l}, nil
	})
}
