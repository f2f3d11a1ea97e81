//go:build unix

package app

import "syscall"

// openFileLimit is the process's limit on open file descriptors (the soft
// RLIMIT_NOFILE, which Go raises to the hard limit at start); 0 when it is
// unknown or unlimited.
func openFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if n := uint64(r.Cur); n < 1<<40 { // RLIM_INFINITY is all ones
		return n
	}
	return 0
}
