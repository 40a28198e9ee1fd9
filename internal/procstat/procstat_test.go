package procstat

import (
	"os"
	"testing"
)

func TestRSSOfThisProcess(t *testing.T) {
	n, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n < 1<<20 {
		t.Errorf("RSS of a running Go test = %d bytes, want at least 1 MiB", n)
	}
	if _, err := RSS(-1); err == nil {
		t.Error("RSS of pid -1: no error")
	}
}
