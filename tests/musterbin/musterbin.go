// Package musterbin builds the real muster command once per test binary,
// for tests that run the broker as its own process.
package musterbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Path returns the path of a freshly built muster binary. The build runs
// `go build` on the module's ./cmd/muster, found from the test's working
// directory (a package directory inside the module).
func Path(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		var dir string
		if dir, err = os.MkdirTemp("", "muster-bin-"); err != nil {
			return
		}
		path = filepath.Join(dir, "muster")
		cmd := exec.Command("go", "build", "-o", path, "github.com/musterhq/muster/cmd/muster")
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("%w\n%s", e, out)
		}
	})
	if err != nil {
		tb.Fatalf("build muster: %v", err)
	}
	return path
}
