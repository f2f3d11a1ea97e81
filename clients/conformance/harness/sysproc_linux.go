package main

import "syscall"

// childAttr makes the kernel kill the broker when the harness dies, even
// by SIGKILL, so a crashed harness leaves no broker behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
