//go:build !linux

package storagetest

import "syscall"

// dieWithParent is Linux-only; elsewhere a test that times out may leave
// its servers running.
func dieWithParent() *syscall.SysProcAttr { return nil }
