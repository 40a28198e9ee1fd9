package agentfs

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The kinds of file a mount shows (DESIGN §21): a regular file, a symlink
// whose content is its target, and a directory marker, a zero-byte file
// that keeps an empty folder.
const (
	KindFile      = "file"
	KindSymlink   = "symlink"
	KindDirectory = "directory"
)

// DefaultMode is a new file's permission bits when its write names none.
const DefaultMode = 0o644

// MaxMode bounds the permission bits a file keeps (setuid, setgid, sticky
// and rwx for owner, group and others).
const MaxMode = 0o7777

// FileMeta is what a write says of a file besides its bytes. A nil Mode is
// DefaultMode for a new file and kept by a replace; a nil MTime follows the
// write's time; an empty Kind is KindFile for a new file and kept by a
// replace.
type FileMeta struct {
	Mode  *int
	MTime *time.Time
	Kind  string
}

// ErrBadMode and ErrBadKind say a mode or a kind is not one a file can
// carry.
var (
	ErrBadMode = errors.New("must be octal permission bits from 0 to 7777")
	ErrBadKind = errors.New("must be file, symlink or directory")
)

// ParseMode reads permission bits written in octal ("644", "0755").
func ParseMode(s string) (int, error) {
	if s == "" || len(s) > 6 {
		return 0, ErrBadMode
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > MaxMode {
		return 0, ErrBadMode
	}
	return int(n), nil
}

// ValidKind reports whether k names a kind of file.
func ValidKind(k string) bool {
	return k == KindFile || k == KindSymlink || k == KindDirectory
}

// Params adds the meta's set members to a write's parameters, so one
// key sent with other metadata is a conflict; members absent before they
// existed keep the keys recorded then replaying.
func (m FileMeta) Params(params map[string]string) {
	if m.Mode != nil {
		params["mode"] = strconv.FormatInt(int64(*m.Mode), 8)
	}
	if m.MTime != nil {
		params["mtime"] = m.MTime.UTC().Format(time.RFC3339Nano)
	}
	if m.Kind != "" {
		params["kind"] = m.Kind
	}
}

// ChildFilter selects the entries directly under Prefix, in byte order of
// their paths: the live files whose path has no "/" after the prefix, and
// the folders (a prefix ending in "/") that hold the others. After is the
// last entry of the previous page ("" for the first).
type ChildFilter struct {
	Prefix string
	After  string
	Limit  int
	// PathsOnly answers each file with its Path alone (a name listing, such
	// as MCP's list_directory): the store then reads no file rows, one
	// statement instead of two.
	PathsOnly bool
}

// Child is one entry of a listing by delimiter: a file, or, with File nil,
// a folder named by its Prefix (the listing's prefix, a segment and "/").
type Child struct {
	File   *File
	Prefix string
}

// Name is the entry's place in the listing's order: the file's path or
// the folder's prefix.
func (c Child) Name() string {
	if c.File != nil {
		return c.File.Path
	}
	return c.Prefix
}

// ChildCursor encodes the last entry of a page of a listing by delimiter
// as an opaque token.
func ChildCursor(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("c|" + name))
}

// ParseChildCursor decodes a token made by ChildCursor.
func ParseChildCursor(s string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 2+MaxPathBytes+1 || !utf8.Valid(raw) {
		return "", ErrInvalidCursor
	}
	name, ok := strings.CutPrefix(string(raw), "c|")
	if !ok || name == "" {
		return "", ErrInvalidCursor
	}
	return name, nil
}
