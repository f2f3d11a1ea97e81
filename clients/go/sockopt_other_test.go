//go:build !unix

package muster

import "syscall"

func smallReceiveBuffer(_, _ string, _ syscall.RawConn) error { return nil }
