package mcpserver

import "github.com/modelcontextprotocol/go-sdk/mcp"

// toolTexts is what each tool tells a model before it is called: its
// description and its annotations (title and hints), by tool name, in the
// order of toolSpecs. Each tool's code (tools_*.go) takes its entry with
// tool.
var toolTexts = map[string]struct {
	annotations *mcp.ToolAnnotations
	description string
}{
	"read_text_file": {
		annotations: readOnly("Read text file"),
		description: "Read a UTF-8 text file from AgentFS, whole or only its first (head) or last (tail) N lines. " +
			"At most a fixed number of bytes comes back per call, with a note when the file was cut; use read_media_file for images and other binary files.",
	},
	"read_media_file": {
		annotations: readOnly("Read media file"),
		description: "Read an image, audio or other binary file from AgentFS and return it base64-encoded with its MIME type. " +
			"Files whose base64 exceeds a fixed limit are refused; use read_text_file for text.",
	},
	"read_multiple_files": {
		annotations: readOnly("Read multiple files"),
		description: "Read several UTF-8 text files at once; a file that cannot be read is reported in place and does not fail the others. " +
			"All files together return at most one read's worth of bytes; read a long file alone with read_text_file.",
	},
	"write_file": {
		annotations: writes("Write file", true, true),
		description: "Create a text file in AgentFS, or overwrite one with if_exists=replace (optionally only if it still has expected_etag). " +
			"Content is UTF-8 text up to a fixed size; to change part of a file use edit_file.",
	},
	"edit_file": {
		annotations: writes("Edit file", true, false),
		description: "Edit a text file by replacing exact text: each oldText must occur exactly once. Answers a unified diff; dryRun previews it. " +
			"The write succeeds only if nobody changed the file since it was read (else PRECONDITION_FAILED, nothing lost); to rewrite a whole file use write_file.",
	},
	"list_directory": {
		annotations: readOnly("List directory"),
		description: "List the files and subdirectories directly in a directory, as [FILE] name and [DIR] name lines (a directory is a path prefix). " +
			"Large directories come in parts with a cursor; to find files by name pattern use search_files, for a whole subtree directory_tree.",
	},
	"directory_tree": {
		annotations: readOnly("Directory tree"),
		description: "Show a directory's files and subdirectories recursively as a JSON tree of {name, type, children}. " +
			"Large trees come in parts with a cursor; for one level use list_directory, to find files by pattern search_files.",
	},
	"search_files": {
		annotations: readOnly("Search files"),
		description: "Find files whose path below a directory matches a glob pattern (*.md in that directory, **/*.md anywhere below), optionally leaving out excludePatterns. " +
			"Answers matching paths; searches through many files in parts with a cursor. It matches names only, never content: to search inside files, use grep_files.",
	},
	"grep_files": {
		annotations: readOnly("Search file contents"),
		description: "Search inside files, line by line, like grep -rn: answers path:line:text for each line matching pattern (RE2 regex, or a fixed string with literal), " +
			"in path order, with optional context lines. Narrow with path (a directory) and glob (e.g. **/*.py). Exact and current: sees every write at once. " +
			"search_files matches names instead.",
	},
	"get_file_info": {
		annotations: readOnly("Get file info"),
		description: "Get a file's metadata: id, size, content type, version, etag (for write_file's expected_etag), sha256, times, and the agent and run that wrote it. " +
			"A path that only prefixes other files is reported as a directory.",
	},
	"delete_file": {
		annotations: writes("Delete file", true, true),
		description: "Delete the live file at a path. The delete is soft: restore_file with the file id brings it back until its purge_after time. " +
			"Directories cannot be deleted as such; delete their files.",
	},
	"restore_file": {
		annotations: writes("Restore file", false, true),
		description: "Undo a delete: the file with this id becomes live again at its path, with its id and content. " +
			"Fails with PATH_EXISTS if another file took the path meanwhile; restoring a live file changes nothing.",
	},
	"list_run_files": {
		annotations: readOnly("List run files"),
		description: "List the live files that a run (or an agent) created, newest first, with their ids, sizes and versions; without arguments, the files of this session's run. " +
			"Answers one page at a time with a cursor for the next.",
	},
	"move_file": {
		annotations: writes("Move file", false, false),
		description: "Move (rename) one file to a new path: it keeps its id, url, version and history, and no bytes are copied. " +
			"Never overwrites: a live file at the destination answers PATH_EXISTS. To move a directory, move each of its files (search_files finds them).",
	},
	"file_history": {
		annotations: readOnly("File history"),
		description: "List the versions of a file, newest first: number, size, sha256 and etag, the agent and run that wrote it, when, and which is current. " +
			"Every write that changed the content made one; old versions are kept for a limited time. revert_file brings one back, share_file shares one.",
	},
	"revert_file": {
		annotations: writes("Revert file", true, true),
		description: "Make an earlier version's content the current content of a file, as a new version: nothing is lost, the replaced content stays in file_history. " +
			"Reverting to the content the file already has changes nothing. A deleted file must be brought back with restore_file first.",
	},
	"share_file": {
		annotations: writes("Share file", false, false),
		description: "Make a share link: a secret URL that serves a file's bytes without a token, for people and tools outside AgentFS, valid 60 s to 7 days (default 1 hour). " +
			"The URL is shown only in this answer; each call makes a new link. Also the way to get all of a file too large for read_text_file.",
	},
	"run_summary": {
		annotations: readOnly("Run summary"),
		description: "Summarize what one run did to files: how many it created, replaced, deleted, restored, moved and reverted, the bytes it wrote, how many of its files are live now, " +
			"its first and last write and its agents. Without run_id, this session's run. list_run_files lists the files themselves.",
	},
	"checkpoint": {
		annotations: writes("Checkpoint", false, false),
		description: "Name the present as a point before a risky step: instant whatever the number of files (a position, not a copy). " +
			"diff shows what changed since, restore puts a directory back to it. A name in use answers CHECKPOINT_EXISTS.",
	},
	"list_checkpoints": {
		annotations: readOnly("List checkpoints"),
		description: "List your checkpoints, newest first: id, name, directory, note and when each was made; use one as from in diff or to in restore.",
	},
	"diff": {
		annotations: readOnly("Diff"),
		description: "Show what changed between two points (" + pointHelp + "): each file added, modified, deleted or moved, " +
			"and a unified diff of the text files. Changed and changed back is no change.",
	},
	"restore": {
		annotations: writes("Restore", true, false),
		description: "Put a directory back to a point: files added since are deleted (restorable), modified ones get the point's bytes as a new version, " +
			"deleted ones come back, moved ones move back. A file changed meanwhile fails PRECONDITION_FAILED. dry_run shows the plan.",
	},
	"fork": {
		annotations: writes("Fork", false, false),
		description: "Copy a directory to work on it apart: every file appears under destination as a new file sharing its bytes (instant, nothing copied). " +
			"Change either side freely; merge brings the copy's changes back. A destination holding files answers PATH_EXISTS.",
	},
	"merge": {
		annotations: writes("Merge", true, false),
		description: "Merge a fork back into the directory it was copied from, all at once: files changed only in the fork are applied, " +
			"files changed only in the original are kept. A file changed on both sides answers MERGE_CONFLICT listing each, unless on_conflict picks a side.",
	},
	"run_recovery": {
		annotations: readOnly("Run recovery"),
		description: "Take over a run whose worker died: what its events confirm, each idempotency key it claimed (completed: nothing to redo; " +
			"in_progress: wait; abandoned: nothing happened, send the same request again with the same key and run), its uploads missing parts " +
			"and batches still running, and the next actions in order, each an exact request. All of it holds at one event cursor (as_of).",
	},
	"complete_upload": {
		annotations: writes("Complete upload", true, true),
		description: "Finish an upload session whose parts are all in (run_recovery names it): its file is written at the session's path " +
			"from the parts the server holds. Safe to repeat: a completed session answers its file again. A session missing parts " +
			"fails with PARTS_MISSING; no tool sends parts, so write the file with write_file and end the session with abort_upload.",
	},
	"abort_upload": {
		annotations: writes("Abort upload", true, true),
		description: "End an upload session without writing its file, dropping the parts it holds. Safe to repeat. run_recovery names it " +
			"for a dead worker's session that is missing parts, once the file was written with write_file.",
	},
}

// tool is the named tool as toolTexts describes it, for define to fill in.
func tool(name string) *mcp.Tool {
	t, ok := toolTexts[name]
	if !ok {
		panic("mcpserver: no text for tool " + name)
	}
	return &mcp.Tool{Name: name, Description: t.description, Annotations: t.annotations}
}
