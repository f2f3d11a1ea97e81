//go:build !linux

package main

import "syscall"

// childAttr is the default elsewhere: the harness kills the broker on its
// own exit paths only.
func childAttr() *syscall.SysProcAttr { return nil }
