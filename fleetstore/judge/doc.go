// Package judge runs a sweep's validation in a worker process of its own,
// where its cost can be cut from outside: a sweep judges specs the caller's
// JSON Schema was never shown to be cheap for, with a library whose work and
// memory grow with both, so the broker bounds the worker, not the library.
//
// What a caller may rely on:
//
//   - One Worker serves one sweep request: it compiles the schema once and
//     judges the specs handed to it, one at a time, with the work budgets of
//     fleetstore.CompileSchema (per spec and per request).
//   - The worker's CPU time is at most Limits.CPU (the kernel ends it at the
//     limit), its heap and stacks at most Limits.Memory (allocation beyond
//     it ends the process), and its life at most Limits.Wall. Each of these
//     ends the sweep with a *muster.Error, CodeInvalidRequest naming the
//     limit, like the work budgets: the schema is too costly for the specs
//     it is applied to.
//   - When the Start context ends, the worker is killed at once; a Judge
//     blocked on it returns the context's error.
//   - The worker runs at a lower scheduling priority than the broker, so
//     the broker's own requests go first while it works.
//   - Nothing the worker does reaches the broker's memory: the broker holds
//     the frames it sends and the one-byte verdicts it reads.
//
// The worker is the broker's own executable started again with
// EnvWorker set: a program that starts Workers calls Main first thing in
// main (and test binaries in TestMain), which serves and exits when the
// variable is set and returns at once otherwise.
package judge
