package storage_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentfs/agentfs"
)

// TestListChildrenSeeksPastSubtrees: a listing by delimiter lands on one
// row per entry through files_live_children; a folder of thousands of
// files below the prefix costs one seek, not a walk (EXPLAIN ANALYZE shows
// no scan of the files table and no rows filtered away in bulk).
func TestListChildrenSeeksPastSubtrees(t *testing.T) {
	ctx := context.Background()
	store, _ := setup(t)
	var paths []string
	for i := range 3000 {
		paths = append(paths, fmt.Sprintf("src/big/deep/%04d.go", i), fmt.Sprintf("other/%04d", i))
	}
	paths = append(paths, "src/a.go", "src/big.go", "src/z/1", "src/zz.go")
	if err := store.SeedPaths(ctx, "s", paths); err != nil {
		t.Fatal(err)
	}
	got, err := store.ListChildren(ctx, "s", agentfs.ChildFilter{Prefix: "src/", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name())
	}
	if strings.Join(names, " ") != "src/a.go src/big.go src/big/ src/z/ src/zz.go" {
		t.Fatalf("src/ lists %q", names)
	}
	// Paths only: the same entries from the walk alone, each file holding
	// only its path.
	only, err := store.ListChildren(ctx, "s", agentfs.ChildFilter{Prefix: "src/", Limit: 100, PathsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var onlyNames []string
	for i, c := range only {
		onlyNames = append(onlyNames, c.Name())
		if c.File != nil && (c.File.ID != "" || c.File.Path != got[i].File.Path) {
			t.Fatalf("paths only: entry %d is %+v, want only the path %s", i, c.File, got[i].File.Path)
		}
		if (c.File == nil) != (got[i].File == nil) {
			t.Fatalf("paths only: entry %d is %+v, the full listing's %+v", i, c, got[i])
		}
	}
	if strings.Join(onlyNames, " ") != strings.Join(names, " ") {
		t.Fatalf("paths only lists %q, the full listing %q", onlyNames, names)
	}
	// Paged, from each kind of entry: the same pages as the full listing's
	// (the range read alone ends some, the walk others).
	for _, f := range []agentfs.ChildFilter{{Prefix: "src/", Limit: 2}, {Prefix: "src/", After: "src/big.go", Limit: 2},
		{Prefix: "src/", After: "src/big/", Limit: 100}, {Prefix: "", Limit: 3}, {Prefix: "other/", After: "other/2990", Limit: 5}} {
		full, err := store.ListChildren(ctx, "s", f)
		if err != nil {
			t.Fatal(err)
		}
		f.PathsOnly = true
		only, err := store.ListChildren(ctx, "s", f)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []string
		for _, c := range full {
			a = append(a, c.Name())
		}
		for _, c := range only {
			b = append(b, c.Name())
		}
		if strings.Join(a, " ") != strings.Join(b, " ") || len(a) == 0 {
			t.Fatalf("%+v: paths only %q, full %q", f, b, a)
		}
	}
	plan, err := store.ExplainChildren(ctx, "s", agentfs.ChildFilter{Prefix: "src/", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "files_live_children") || strings.Contains(plan, "Seq Scan on files") {
		t.Fatalf("the walk does not seek through files_live_children:\n%s", plan)
	}
	for _, m := range regexp.MustCompile(`(?:Rows Removed by Filter|rows)=?:? ?(\d+)`).FindAllStringSubmatch(plan, -1) {
		if n, _ := strconv.Atoi(m[1]); n > 10 {
			t.Fatalf("a step of the walk touched %d rows:\n%s", n, plan)
		}
	}
	t.Logf("plan:\n%s", plan)
}
