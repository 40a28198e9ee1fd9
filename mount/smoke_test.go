package mount_test

import (
	"testing"

	"github.com/agentfs/agentfs/mount"
)

func TestSmoke(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	dir, _ := mounted(t, c, mount.Options{})
	out := sh(t, dir, "mkdir -p a/b && echo hello > a/b/x.txt && cat a/b/x.txt && ls -la a a/b && chmod 755 a/b/x.txt && ls -l a/b/x.txt && mv a/b/x.txt a/y.txt && ls -R && rm a/y.txt && ls -la a")
	t.Log(out)
}
