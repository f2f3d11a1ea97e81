//go:build !unix

package judge

import "errors"

// confine cannot bound a process on this system: the worker refuses to run
// unbounded.
func confine(uint64, int64) error {
	return errors.New("the sweep worker's limits are not supported on this system")
}
