//go:build !unix

package app

// lockDataDir is a no-op where flock is not available: the bbolt file's own
// lock (with its timeout) still keeps a second broker out.
func lockDataDir(string) (func(), error) { return func() {}, nil }
