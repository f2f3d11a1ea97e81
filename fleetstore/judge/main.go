package judge

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

// EnvWorker, set in a process's environment, makes Main serve as a worker.
// Its value is the limits: "<CPU seconds>,<memory bytes>".
const EnvWorker = "MUSTER_SWEEP_WORKER"

// Main serves as a worker and exits when the process was started as one
// (EnvWorker is set); otherwise it returns at once. Call it first thing in
// main, and in TestMain of test binaries that start Workers.
func Main() {
	v, ok := os.LookupEnv(EnvWorker)
	if !ok {
		return
	}
	var cpu uint64
	var mem int64
	if _, err := fmt.Sscanf(v, "%d,%d", &cpu, &mem); err != nil || cpu == 0 || mem <= 0 {
		fmt.Fprintf(os.Stderr, "muster sweep worker: %s=%q is not \"<cpu seconds>,<memory bytes>\"\n", EnvWorker, v)
		os.Exit(2)
	}
	if err := confine(cpu, mem); err != nil {
		fmt.Fprintf(os.Stderr, "muster sweep worker: %v\n", err)
		os.Exit(2)
	}
	// One thread of work: the worker takes at most one core, and maps
	// fewer thread stacks within its memory limit.
	runtime.GOMAXPROCS(1)
	// The collector works hard well before the hard limit, so a spec that
	// fits is not refused for garbage.
	debug.SetMemoryLimit(mem / 2)
	if err := Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "muster sweep worker: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}
