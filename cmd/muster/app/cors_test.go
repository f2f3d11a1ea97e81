package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadCORS(t *testing.T, yaml string) (*FileConfig, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "muster.yaml")
	if err := os.WriteFile(p, []byte(limitsToken+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return LoadConfig(p)
}

func TestCORSConfig(t *testing.T) {
	t.Run("OffByDefault", func(t *testing.T) {
		cfg, err := loadCORS(t, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.CORS.AllowedOrigins) != 0 {
			t.Errorf("allowed origins without a cors section: %q", cfg.CORS.AllowedOrigins)
		}
	})
	t.Run("Exact", func(t *testing.T) {
		cfg, err := loadCORS(t, "cors:\n  allowed_origins: [\"https://dash.example.com\", \"http://127.0.0.1:8080\"]\n")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"https://dash.example.com", "http://127.0.0.1:8080"}
		if !slices.Equal(cfg.CORS.AllowedOrigins, want) {
			t.Errorf("allowed origins %q, want %q", cfg.CORS.AllowedOrigins, want)
		}
	})
	// want: the message names the key as the file spells it and the rule.
	for _, tt := range []struct{ name, yaml, want string }{
		{"Wildcard", `cors: {allowed_origins: ["*"]}`, `cors: allowed_origins: item 1: origin "*": wildcards are not allowed`},
		{"WildcardHost", `cors: {allowed_origins: ["https://*.example.com"]}`, "wildcards are not allowed"},
		{"Path", `cors: {allowed_origins: ["https://dash.example.com/"]}`, "an origin has no path"},
		{"NoScheme", `cors: {allowed_origins: ["dash.example.com"]}`, "want http://host[:port]"},
		{"Null", `cors: {allowed_origins: ["null"]}`, "want http://host[:port]"},
		{"Upper", `cors: {allowed_origins: ["https://Dash.example.com"]}`, "must be lower case"},
		{"Port", `cors: {allowed_origins: ["http://a.example:99999"]}`, "port must be 1..65535"},
		{"Empty", `cors: {allowed_origins: [""]}`, "cors: allowed_origins: item 1: is required"},
		{"Twice", `cors: {allowed_origins: ["http://a.example", "http://a.example"]}`, "cors: allowed_origins: must not list the same value twice"},
		{"UnknownKey", "cors:\n  origins: [\"http://a.example\"]\n", `unknown key "origins" in cors (known keys: allowed_origins)`},
		{"NotAList", `cors: {allowed_origins: "http://a.example"}`, "expected a list, found a string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCORS(t, tt.yaml+"\n")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// The cors block of docs/operations.md loads (with the doc's tokens block).
func TestCORSDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\ncors:\n")
	if !ok {
		t.Fatal("docs/operations.md has no cors yaml block")
	}
	block, _, _ := strings.Cut(rest, "```")
	cfg, err := loadCORS(t, "cors:\n"+block)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.CORS.AllowedOrigins) == 0 {
		t.Error("the documented block allows no origin")
	}
}
