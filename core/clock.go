package core

import "time"

// Clock is the only way the core learns the time. The synchronous state
// machine never reads a clock itself: every input carries `now`. The actor
// reads its Clock once per command and once per tick.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
