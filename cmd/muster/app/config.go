package app

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"gopkg.in/yaml.v3"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/handlers"
)

// FileConfig is the YAML configuration file (`--config FILE`).
//
//	tokens:
//	  - name: acme-workers            # shown in logs, never the secret
//	    sha256: 9f86d08188…           # hex SHA-256 of the token secret
//	    family: acme                  # the tenant boundary
//	    grants:
//	      - "lease://acme/**#*"
//	      - "fleet://acme/**#*"
//	cors:
//	  allowed_origins:                # pages that may call the API from a browser
//	    - "https://dash.example.com"  # exact origins; none = CORS off
//	tls:                              # HTTPS (HTTP/2 and HTTP/1.1); none = cleartext
//	  cert_file: /etc/muster/tls.crt
//	  key_file: /etc/muster/tls.key
//
// Unknown keys are refused, and so is a file without tokens unless it says
// `dev_mode: true` (and then it may hold no tokens and no placement): a
// file never falls back to dev mode by a mistake.
type FileConfig struct {
	Tokens []TokenConfig `yaml:"tokens" validate:"max=10000,dive"`
	Limits LimitsConfig  `yaml:"limits"`
	CORS   CORSConfig    `yaml:"cors"`
	// Placement, when present, turns multi-broker mode on (placementcfg.go).
	Placement *PlacementConfig `yaml:"placement"`
	Log       LogConfig        `yaml:"log"`
	// TLS, when present, serves HTTPS (tls.go).
	TLS *TLSConfig `yaml:"tls"`
	// DevMode: no tokens, every request family "default" with all grants
	// (docs/operations.md, "Dev mode"), with this file's CORS and limits.
	DevMode bool `yaml:"dev_mode"`
}

// CORSConfig is the `cors:` section: the exact origins (scheme://host[:port],
// lower case, no path and no wildcard) whose pages may call the API from a
// browser. Empty (the default) is CORS off. See handlers/cors.go.
type CORSConfig struct {
	AllowedOrigins []string `yaml:"allowed_origins" validate:"max=100,unique,dive,required,max=256,origin"`
}

// LogConfig is the `log:` section: the least level logged (default info)
// and an access log of one line per request (default off).
type LogConfig struct {
	Level  string `yaml:"level" validate:"omitempty,oneof=debug info warn error"`
	Access bool   `yaml:"access"`
}

// SlogLevel is the configured level (info when not set).
func (l LogConfig) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// TokenConfig is one token of the configuration file.
type TokenConfig struct {
	Name   string   `yaml:"name" validate:"required,max=128,printascii"`
	SHA256 string   `yaml:"sha256" validate:"required,len=64,hexadecimal,lowercase"`
	Family string   `yaml:"family" validate:"required,max=128,printascii,excludesall= /"`
	Grants []string `yaml:"grants" validate:"required,min=1,max=1000,dive,required,max=1024"`
}

// LoadConfig reads and validates a configuration file; "" is the empty
// configuration (dev mode).
func LoadConfig(path string) (*FileConfig, error) {
	cfg := &FileConfig{}
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// Strict: a misspelt key (say "tokenz:") must not silently leave the
	// broker without tokens, that is, in dev mode.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, describeDecode(err))
	}
	switch {
	case cfg.DevMode && len(cfg.Tokens) > 0:
		return nil, fmt.Errorf("config %s: dev_mode: true with tokens: dev mode has none (remove one or the other)", path)
	case cfg.DevMode && cfg.Placement != nil:
		return nil, fmt.Errorf("config %s: dev_mode: true with placement: a multi-broker deployment needs tokens", path)
	case !cfg.DevMode && len(cfg.Tokens) == 0:
		return nil, fmt.Errorf("config %s: no tokens: a configuration file turns authentication on and must list at least one token (or say dev_mode: true, or run without --config, for dev mode)", path)
	}
	if err := newConfigValidator().Struct(cfg); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, describeValidation(cfg, err))
	}
	return cfg, nil
}

// AuthTokens turns the configured tokens into the authenticator's form,
// parsing every grant with the one selector grammar.
func (c *FileConfig) AuthTokens() ([]handlers.Token, error) {
	out := make([]handlers.Token, 0, len(c.Tokens))
	seen := map[string]bool{}
	for i, t := range c.Tokens {
		if seen[t.SHA256] {
			return nil, fmt.Errorf("config: token %d (%q): sha256: the same hash as an earlier token; every token needs its own secret (muster token)", i+1, t.Name)
		}
		seen[t.SHA256] = true
		tok := handlers.Token{Name: t.Name, Family: core.Family(t.Family)}
		if _, err := hex.Decode(tok.Hash[:], []byte(t.SHA256)); err != nil {
			return nil, fmt.Errorf("config: token %d (%q): sha256: %w", i+1, t.Name, err)
		}
		for j, g := range t.Grants {
			grant, err := core.ParseGrant(g)
			if err != nil {
				var ce *muster.Error
				if errors.As(err, &ce) {
					err = errors.New(ce.Message)
				}
				return nil, fmt.Errorf("config: token %d (%q): grants: item %d (%q): %w", i+1, t.Name, j+1, g, err)
			}
			tok.Grants = append(tok.Grants, grant)
		}
		out = append(out, tok)
	}
	return out, nil
}
