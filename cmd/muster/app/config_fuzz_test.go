package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig: any file either loads or is refused with a message in
// the file's terms: never a panic, never a validator's or Go type's name.
func FuzzLoadConfig(f *testing.F) {
	h := strings.Repeat("a", 64)
	for _, s := range []string{
		"", "tokens: []\n", "tokenz: 1\n", "tokens:\n  - name: a\n    sha256: " + h + "\n    family: f\n    grants: [\"lease://**#read\"]\n",
		"tokens:\n  - name: a\n    sha256: abc\n", "tokens: {a: 1}\n", "tokens:\n  - [1, 2]\n", "tokens: [\n", "- 1\n",
		"tokens:\n  - name: 7\n    sha256: " + h + "\n    family: f\n    grants: \"x\"\n",
		"limits:\n  body_read_timeout: soon\n  broker: {sessions: x, sweeps: 99}\n  family: {streams: 1}\n  families: {a: 3}\n",
		"tokens:\n  - name: a\n    sha256: " + h + "\n    family: f\n    grants: [\"lease://**#read\"]\ncors:\n  allowed_origins: [\"https://a.example\", \"*\", 3]\n",
		"cors: {allowed_origins: \"http://a.example/\", origins: 1}\n",
	} {
		f.Add(s)
	}
	path := filepath.Join(f.TempDir(), "muster.yaml")
	f.Fuzz(func(t *testing.T, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err == nil {
			if len(cfg.Tokens) == 0 {
				t.Fatalf("loaded a configuration without tokens from %q", text)
			}
			return
		}
		for _, raw := range []string{"Key: '", "Error:Field", "FileConfig", "TokenConfig", "LimitsConfig", "BrokerLimits", "FamilyQuota", "CORSConfig", "time.Duration", "app.", "unmarshal errors"} {
			if strings.Contains(err.Error(), raw) {
				t.Fatalf("%q: message shows %q: %v", text, raw, err)
			}
		}
	})
}
