package storage

import (
	"io/fs"
	"path"
	"strconv"
	"strings"
	"testing"
)

// TestMigrationNumbersAreUnique: each migration has its own number. The
// migrator records a migration by its number, so of two files with one
// number only the first would ever run, silently.
func TestMigrationNumbersAreUnique(t *testing.T) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no embedded migrations (%v)", err)
	}
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("migration %s is not named NNN_name.sql", base)
		}
		if other, dup := seen[n]; dup {
			t.Fatalf("migrations %s and %s share the number %d: renumber the newer one", other, base, n)
		}
		seen[n] = base
	}
}
