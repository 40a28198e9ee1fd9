//go:build !linux

package splice

import "net"

// setLowWater does nothing: the splice path it tunes is Linux's.
func setLowWater(*net.TCPConn, int) {}

// connFailed reports a connection as failed, always: without a way to ask
// the socket, a failed relay is taken for S3's failure.
func connFailed(*net.TCPConn) bool { return true }
