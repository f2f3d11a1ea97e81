package load

import (
	"os"
	"testing"
)

// tokenConfig has one token "load-token" (family load, all grants).
const tokenConfig = `tokens:
  - name: load
    sha256: 1ccaaab79e6619e6421c80231ea5f64764aba59997a9c66ac9c4f0788a2ac2ae
    family: load
    grants: ["lease://**#*", "fleet://**#*"]
`

func writeFile(tb testing.TB, path, text string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
}
