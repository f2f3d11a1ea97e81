package peers

import (
	"os"
	"testing"
)

// baseBin is a muster binary built from another commit (env
// MUSTER_PEERS_BASE_BIN): when set, the watch benchmarks measure it too, as
// muster-base, beside this checkout's broker in the same run, so that a
// change is judged by same-round ratios.
func baseBin() string { return os.Getenv("MUSTER_PEERS_BASE_BIN") }

// musterBaseURL is the base URL of a broker running bin.
func musterBaseURL(tb testing.TB, bin string) string {
	return once(tb, "muster-base", func(tb testing.TB) string { return startMuster(tb, "muster-base", bin) })
}
