//go:build !linux

package storage

import "net"

// setLowWater does nothing: the splice path it tunes is Linux's.
func setLowWater(*net.TCPConn, int) {}
