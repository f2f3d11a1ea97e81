package judge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/musterhq/muster"
)

// Limits bound one worker. The zero value of a field means its default.
type Limits struct {
	// CPU is the worker's CPU time, user and system together, rounded up
	// to whole seconds (the kernel's granularity). Default DefaultCPU.
	CPU time.Duration
	// Memory bounds the worker's heap and stacks (RLIMIT_DATA), in bytes;
	// its code is shared with the broker's executable and not counted.
	// Default DefaultMemory.
	Memory int64
	// Wall is the worker's whole life, waiting for CPU included. Default
	// DefaultWall.
	Wall time.Duration
}

// The default limits of one sweep request.
const (
	DefaultCPU    = 2 * time.Second
	DefaultMemory = 64 << 20
	DefaultWall   = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.CPU <= 0 {
		l.CPU = DefaultCPU
	}
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	if l.Wall <= 0 {
		l.Wall = DefaultWall
	}
	return l
}

// cpuSeconds is CPU rounded up to whole seconds, at least 1.
func (l Limits) cpuSeconds() uint64 {
	return uint64(max(1, (l.CPU+time.Second-1)/time.Second))
}

// Usage is what a worker cost, read when it ended.
type Usage struct {
	CPU    time.Duration // user and system time
	MaxRSS int64         // peak resident set, bytes
}

// Worker is one running worker process. Its methods are not safe for
// concurrent use: one sweep drives it.
type Worker struct {
	ctx    context.Context // Start's, for telling cancellation apart
	wctx   context.Context // ctx with the wall limit: the worker's life
	cancel context.CancelFunc
	lim    Limits
	cmd    *exec.Cmd
	in     io.WriteCloser
	inBuf  *bufio.Writer
	out    *bufio.Reader
	stderr *headBuffer
	err    error // the first failure; every later call returns it
	usage  Usage
	waited bool
	killed atomic.Bool // wait killed it (it did not end on EOF)
}

// Start starts the worker from executable exe, hands it schema and waits
// for its verdict on the schema: an error carrying a *muster.Error when the
// schema is refused (see fleetstore.CompileSchema) or a limit was hit,
// ctx's error when ctx ended, another error when the worker could not be
// started. On success the caller must Close the Worker.
func Start(ctx context.Context, exe string, schema []byte, lim Limits) (*Worker, error) {
	lim = lim.withDefaults()
	wctx, cancel := context.WithTimeout(ctx, lim.Wall)
	cmd := exec.CommandContext(wctx, exe)
	// Its limits and nothing else: the broker's environment may hold the
	// store's URL (MUSTER_STORE), which a worker has no use for.
	cmd.Env = []string{fmt.Sprintf("%s=%d,%d", EnvWorker, lim.cpuSeconds(), lim.Memory)}
	cmd.WaitDelay = time.Second
	w := &Worker{ctx: ctx, wctx: wctx, cancel: cancel, lim: lim, cmd: cmd, stderr: &headBuffer{max: 4 << 10}}
	cmd.Stderr = w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start the sweep worker: %w", err)
	}
	w.in, w.inBuf, w.out = in, bufio.NewWriter(in), bufio.NewReader(out)
	if _, err := w.ask(schema, statusOK); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Judge reports whether spec satisfies the schema, as
// fleetstore.Schema.Judge does; a budget or a limit that runs out is an
// error carrying a *muster.Error (CodeInvalidRequest naming it), and so is
// every call after a failure.
func (w *Worker) Judge(spec []byte) (bool, error) {
	st, err := w.ask(spec, statusValid, statusInvalid)
	return st == statusValid, err
}

// ask sends one frame and reads the status it answers, one of want.
func (w *Worker) ask(frame []byte, want ...byte) (byte, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := writeFrame(w.inBuf, frame); err != nil {
		return 0, w.fail(err)
	}
	if err := w.inBuf.Flush(); err != nil {
		return 0, w.fail(err)
	}
	st, err := w.out.ReadByte()
	if err != nil {
		return 0, w.fail(err)
	}
	if st == statusRefused {
		b, err := readFrame(w.out, nil)
		if err != nil {
			return 0, w.fail(err)
		}
		w.err = parseRefusal(b)
		return 0, w.err
	}
	for _, ok := range want {
		if st == ok {
			return st, nil
		}
	}
	return 0, w.fail(fmt.Errorf("judge: unexpected status %q", st))
}

// fail records why the wire broke, read off how the worker ended: the
// caller's context, the wall limit (both the broker's own doing), the
// memory limit (the runtime says so on stderr), the CPU limit (the kernel
// kills the process: SIGKILL at the hard limit, SIGXCPU at the soft one;
// nothing else here sends the worker a signal, and the CPU time rusage
// reports of a process killed at a 1 s limit is 0.85–0.95 s, so it cannot
// be compared with the limit itself), or else a failure of the worker.
func (w *Worker) fail(cause error) error {
	w.wait()
	switch {
	case w.ctx.Err() != nil:
		w.err = w.ctx.Err()
	case errors.Is(w.wctx.Err(), context.DeadlineExceeded):
		w.err = muster.Errorf(muster.CodeInvalidRequest,
			"the sweep exceeds its time limit of %v (limit: sweep time)", w.lim.Wall)
	case outOfMemory(w.stderr.String()):
		w.err = muster.Errorf(muster.CodeInvalidRequest,
			"the sweep exceeds its memory limit of %d MiB (limit: sweep memory)", w.lim.Memory>>20)
	case !w.killed.Load() && (killedBy(w.cmd, syscall.SIGKILL) || killedBy(w.cmd, syscall.SIGXCPU)):
		w.err = muster.Errorf(muster.CodeInvalidRequest,
			"the sweep exceeds its CPU limit of %v (limit: sweep CPU)", time.Duration(w.lim.cpuSeconds())*time.Second)
	default:
		w.err = &Failure{Public: muster.Errorf(muster.CodeInternal, "the sweep worker failed"), Cause: cause, Stderr: w.stderr.String()}
	}
	return w.err
}

// Close ends the worker (closing its input; killing it if it does not end
// promptly) and returns what it cost.
func (w *Worker) Close() Usage {
	w.in.Close()
	w.wait()
	return w.usage
}

func (w *Worker) wait() {
	if w.waited {
		return
	}
	w.waited = true
	timer := time.AfterFunc(time.Second, func() { // a worker that ignores EOF
		w.killed.Store(true)
		w.cancel()
	})
	w.cmd.Wait()
	timer.Stop()
	w.cancel()
	if ps := w.cmd.ProcessState; ps != nil {
		w.usage.CPU = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			w.usage.MaxRSS = ru.Maxrss << 10
		}
	}
}

// killedBy reports whether the worker ended on signal sig.
func killedBy(cmd *exec.Cmd, sig syscall.Signal) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Failure is a worker that ended without an answer and without hitting a
// limit: Public (CodeInternal) is what a client may see, Cause and Stderr
// (the head of what the worker wrote there) are for logs.
type Failure struct {
	Public *muster.Error
	Cause  error
	Stderr string
}

func (f *Failure) Error() string { return f.Public.Error() + ": " + f.Cause.Error() }

// Unwrap exposes the public error, for muster.ErrorCode.
func (f *Failure) Unwrap() error { return f.Public }

// headBuffer keeps the first max bytes written to it and drops the rest.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (h *headBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.b)
}

// outOfMemory reports whether a worker's stderr says it ran out of memory:
// the runtime's heap could not grow, or a thread's stack could not be
// mapped (cgo's pthread_create, counted in the same limit).
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "pthread_create failed", "cannot allocate memory"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}
