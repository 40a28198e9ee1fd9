package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"strings"
)

// pointHelp is how the tools of points in time describe a point.
const pointHelp = "a checkpoint id or name, an event cursor, an RFC 3339 time, or now"

type checkpointIn struct {
	Name string `json:"name,omitempty" jsonschema:"a name unique among your checkpoints, e.g. before-refactor; default none"`
	Path string `json:"path,omitempty" jsonschema:"the directory whose versions it keeps, e.g. src; default all files"`
	Note string `json:"note,omitempty" jsonschema:"why, for whoever reads it later"`
}

func checkpointTool() *toolSpec {
	return define(tool("checkpoint"), nil, func(ctx context.Context, tb *toolbox, in *checkpointIn, cc *callContext) (*reply[Checkpoint], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		cp, err := tb.b.Checkpoint(ctx, in.Name, dirPrefix(dir), in.Note)
		if err != nil {
			return nil, err
		}
		return &reply[Checkpoint]{Text: fmt.Sprintf("Checkpoint %s%s at %s. Use it as from in diff or to in restore.",
			cp.ID, nameSuffix(cp.Name), cp.Cursor), Out: *cp}, nil
	})
}

func nameSuffix(name *string) string {
	if name == nil {
		return ""
	}
	return " (" + *name + ")"
}

type listCheckpointsIn struct {
	Path string `json:"path,omitempty" jsonschema:"only checkpoints of this directory; default all"`
}

// CheckpointList is list_checkpoints' structured output.
type CheckpointList struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
}

func listCheckpointsTool() *toolSpec {
	return define(tool("list_checkpoints"), nil, func(ctx context.Context, tb *toolbox, in *listCheckpointsIn, cc *callContext) (*reply[CheckpointList], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		cps, err := tb.b.Checkpoints(ctx, dirPrefix(dir))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		if len(cps) == 0 {
			b.WriteString("No checkpoints.")
		}
		for _, cp := range cps {
			fmt.Fprintf(&b, "%s%s  %s  %s  %s\n", cp.ID, nameSuffix(cp.Name), cp.Prefix, cp.CreatedAt.Format(rfc3339), cp.Note)
		}
		return &reply[CheckpointList]{Text: b.String(), Out: CheckpointList{Checkpoints: cps}}, nil
	})
}

type diffIn struct {
	From string `json:"from" jsonschema:"the earlier point: a checkpoint id or name, an event cursor, an RFC 3339 time, or now"`
	To   string `json:"to,omitempty" jsonschema:"the later point; default now"`
	Path string `json:"path,omitempty" jsonschema:"only files under this directory; default all"`
}

func diffTool() *toolSpec {
	return define(tool("diff"), nil, func(ctx context.Context, tb *toolbox, in *diffIn, cc *callContext) (*reply[DiffResult], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		d, err := tb.b.Diff(ctx, in.From, in.To, dirPrefix(dir))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		if len(d.Changes) == 0 {
			fmt.Fprintf(&b, "No changes between %s and %s.", in.From, cmp.Or(in.To, "now"))
		}
		for _, ch := range d.Changes {
			fmt.Fprintf(&b, "%s %s\n", ch.Change, ch.Path)
		}
		if d.HasMore {
			b.WriteString("(more changes: narrow path)\n")
		}
		if d.Patch != "" {
			b.WriteString("\n" + d.Patch)
		}
		return &reply[DiffResult]{Text: b.String(), Out: *d}, nil
	})
}

type restoreIn struct {
	Path   string `json:"path" jsonschema:"the directory to put back, e.g. src; / for every file"`
	To     string `json:"to" jsonschema:"the point to put it back to: a checkpoint id or name, an event cursor, an RFC 3339 time, or now"`
	DryRun bool   `json:"dry_run,omitempty" jsonschema:"show what would change, change nothing"`
}

func restoreTool() *toolSpec {
	return define(tool("restore"), nil, func(ctx context.Context, tb *toolbox, in *restoreIn, cc *callContext) (*reply[RestoreResult], error) {
		dir, err := cc.pathArg(dirPath, in.Path)
		if err != nil {
			return nil, err
		}
		r, err := tb.b.RestorePoint(ctx, dirPrefix(dir), in.To, in.DryRun)
		if err != nil {
			return nil, err
		}
		return &reply[RestoreResult]{Text: restoreText(r, in.To), Out: *r}, nil
	})
}

func restoreText(r *RestoreResult, to string) string {
	var b strings.Builder
	if r.DryRun {
		fmt.Fprintf(&b, "A restore to %s would undo %s:\n", to, count(len(r.Plan), "change"))
		for _, ch := range r.Plan {
			fmt.Fprintf(&b, "%s %s\n", ch.Change, ch.Path)
		}
		return b.String()
	}
	n := r.Batch.Counts
	fmt.Fprintf(&b, "Restore to %s: batch %s %s, %d items (%d succeeded, %d failed, %d pending).\n",
		to, r.Batch.ID, r.Batch.Status, n.Total, n.Succeeded, n.Failed, n.Pending)
	for _, it := range r.Batch.Items {
		if it.Error != nil && it.Path != nil {
			fmt.Fprintf(&b, "%s: %s %s\n", *it.Path, it.Error.Code, it.Error.Detail)
		}
	}
	return b.String()
}

type forkIn struct {
	Source      string `json:"source" jsonschema:"the directory to copy, e.g. src"`
	Destination string `json:"destination" jsonschema:"the directory the copies go to; it must hold no file, and neither directory may contain the other"`
	AsOf        string `json:"as_of,omitempty" jsonschema:"the point to copy: a checkpoint id or name, an event cursor, an RFC 3339 time, or now (the default)"`
}

func forkTool() *toolSpec {
	return define(tool("fork"), nil, func(ctx context.Context, tb *toolbox, in *forkIn, cc *callContext) (*reply[Fork], error) {
		src, err := dirPath("source", in.Source)
		if err != nil {
			return nil, err
		}
		dst, err := dirPath("destination", in.Destination)
		if err != nil {
			return nil, err
		}
		cc.path = dst
		f, err := tb.b.Fork(ctx, dirPrefix(src), dirPrefix(dst), in.AsOf)
		if err != nil {
			return nil, err
		}
		return &reply[Fork]{Text: fmt.Sprintf("Fork %s: %s of %s copied to %s. Merge it back with merge {fork_id: %q}.",
			f.ID, count(int(f.Files), "file"), f.From, f.To, f.ID), Out: *f}, nil
	})
}

type mergeIn struct {
	ForkID     string `json:"fork_id" jsonschema:"the fork to merge back, fork_…"`
	OnConflict string `json:"on_conflict,omitempty" jsonschema:"fail (default: any file changed on both sides stops the merge, nothing applied), fork or target (the side that wins)"`
	DryRun     bool   `json:"dry_run,omitempty" jsonschema:"show what would change, change nothing"`
}

func mergeTool() *toolSpec {
	return define(tool("merge"), nil, func(ctx context.Context, tb *toolbox, in *mergeIn, cc *callContext) (*reply[Merge], error) {
		if in.OnConflict != "" && in.OnConflict != "fail" && in.OnConflict != "fork" && in.OnConflict != "target" {
			return nil, validation("on_conflict", "must be fail, fork or target")
		}
		m, err := tb.b.Merge(ctx, in.ForkID, in.OnConflict, in.DryRun)
		if err != nil {
			return nil, err
		}
		return &reply[Merge]{Text: mergeText(m), Out: *m}, nil
	})
}
