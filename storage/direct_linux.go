package storage

import (
	"net"
	"syscall"
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
