//go:build unix

package main

import (
	"syscall"
)

// smallReceiveBuffer shrinks the proxy's receive buffer towards the broker,
// so a stalled stream fills the broker's queue after a few events rather
// than after megabytes of kernel buffering.
func smallReceiveBuffer(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}
