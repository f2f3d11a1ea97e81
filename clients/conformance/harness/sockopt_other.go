//go:build !unix

package main

import "syscall"

func smallReceiveBuffer(_, _ string, _ syscall.RawConn) error { return nil }
