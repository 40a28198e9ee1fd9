package splice

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// setLowWater sets a socket's SO_RCVLOWAT: it reads as ready only once it
// holds n bytes (or the peer closed it, or failed).
func setLowWater(c *net.TCPConn, n int) {
	raw, err := c.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	})
}

// connFailed reports whether a connection failed on its own account: it
// was reset, or has an error pending. One the peer closed after sending
// everything (CLOSE_WAIT) has not: reading from it ends, it does not fail.
// It tells which socket of a splice failed.
func connFailed(c *net.TCPConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return true
	}
	failed := true
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		pending, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		failed = err != nil || pending != 0 ||
			info.State != unix.BPF_TCP_ESTABLISHED && info.State != unix.BPF_TCP_CLOSE_WAIT
	})
	return failed
}
