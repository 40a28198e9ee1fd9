package storagetest

import "syscall"

// dieWithParent makes a child process receive SIGKILL when the test binary
// dies, so a test that times out (which runs no cleanups) leaves no server
// behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
