//go:build !unix

package main

import "syscall"

func smallReceiveBuffer(_, _ string, _ syscall.RawConn) error { return nil }

// deadAddr is a loopback port that refuses connections: here, one that was
// free a moment ago (another program could take it, unlike on unix).
func deadAddr() (string, error) { return freeAddr() }
