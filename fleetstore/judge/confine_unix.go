//go:build unix

package judge

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// confine applies the worker's limits to the calling process: CPU seconds
// (the kernel kills it at the limit: soft and hard are equal), data memory
// above what the process maps now (allocation beyond it fails, and the Go
// runtime ends the process), and a lower scheduling priority than the
// broker's.
func confine(cpuSeconds uint64, memory int64) error {
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpuSeconds, Max: cpuSeconds}); err != nil {
		return fmt.Errorf("limit CPU: %w", err)
	}
	limit := uint64(memory) + dataNow()
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("limit memory: %w", err)
	}
	return lowerPriority()
}

// lowerPriority sets the nice value of every thread of the process to
// workerNice. On Linux a priority is a thread's, and a new thread inherits
// its creator's: the runtime's threads are listed twice, so that one
// created during the first pass is caught by the second.
func lowerPriority() error {
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return syscall.Setpriority(syscall.PRIO_PROCESS, 0, workerNice)
		}
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, workerNice); err != nil && err != syscall.ESRCH {
					return fmt.Errorf("lower priority: %w", err)
				}
			}
		}
	}
	return nil
}

// workerNice is the worker's nice value: the broker's requests go first.
const workerNice = 10

// dataNow is the process's data mappings now (VmData: the Go runtime maps
// about 100 MiB of address space for its heap's bookkeeping at start, most
// of it never touched), or 0 where /proc does not tell.
func dataNow() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmData:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
