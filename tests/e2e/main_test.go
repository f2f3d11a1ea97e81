package e2e

import (
	"os"
	"testing"

	"github.com/musterhq/muster/fleetstore/judge"
)

// TestMain lets this test binary serve as the sweep worker of the brokers
// it starts (the server's default worker is its own executable).
func TestMain(m *testing.M) {
	judge.Main()
	os.Exit(m.Run())
}
