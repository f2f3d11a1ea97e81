package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pgURL = "postgres://u@127.0.0.1:5432/db"

func loadPlacement(t *testing.T, yaml, store string) (*placementSettings, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "muster.yaml")
	if err := os.WriteFile(p, []byte(limitsToken+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		return nil, err
	}
	if cfg.Placement == nil {
		return nil, nil
	}
	return cfg.Placement.resolve([]string{"acme"}, store)
}

func TestPlacementDefaults(t *testing.T) {
	set, err := loadPlacement(t, "placement:\n  broker: b1\n  advertise: http://10.0.0.1:7420\n", pgURL)
	if err != nil {
		t.Fatal(err)
	}
	if set.claims.TTL != 6*time.Second || set.renewEvery != 2*time.Second || set.claims.Margin != time.Second ||
		set.claims.Broker != "b1" || set.claims.Addr != "http://10.0.0.1:7420" || len(set.families) != 1 {
		t.Fatalf("defaults: %+v", set)
	}
	if set, err := loadPlacement(t, "", pgURL); err != nil || set != nil {
		t.Fatalf("no placement section: %+v %v (multi-broker mode is opt-in)", set, err)
	}
}

func TestPlacementRefused(t *testing.T) {
	const head = "placement:\n  broker: b1\n  advertise: http://10.0.0.1:7420\n"
	for _, tt := range []struct{ name, yaml, store, want string }{
		{"NoStore", head, "", "needs the PostgreSQL store"},
		{"NoBroker", "placement:\n  advertise: http://a:1\n", pgURL, "broker"},
		{"NoAdvertise", "placement:\n  broker: b1\n", pgURL, "advertise"},
		{"AdvertiseNotAURL", "placement:\n  broker: b1\n  advertise: 10.0.0.1:7420\n", pgURL, "advertise: must be the base URL"},
		{"AdvertiseWithQuery", "placement:\n  broker: b1\n  advertise: http://a:1/?x=1\n", pgURL, "advertise: must be the base URL"},
		{"BrokerWithSpace", "placement:\n  broker: b 1\n  advertise: http://a:1\n", pgURL, "broker"},
		{"TTLTooShort", head + "  claim_ttl: 1s\n", pgURL, "claim_ttl: must be at least 2s"},
		{"TTLTooLong", head + "  claim_ttl: 2m\n", pgURL, "claim_ttl: must be at most 60s"},
		{"RenewTooSlow", head + "  claim_ttl: 6s\n  renew_every: 3s\n", pgURL, "renew_every: must be at most claim_ttl / 3"},
		{"PinnedUnknownFamily", head + "  pinned: {acne: b1}\n", pgURL, `pinned: family "acne" is not named by any token`},
		{"UnknownKey", head + "  ttl: 6s\n", pgURL, `unknown key "ttl"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadPlacement(t, tt.yaml, tt.store)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestDesiredOwner(t *testing.T) {
	live := []string{"a", "b", "c"}
	if got := desiredOwner("acme", nil, ""); got != "" {
		t.Fatalf("no live broker: %q", got)
	}
	if got := desiredOwner("acme", live, "b"); got != "b" {
		t.Fatalf("pinned to a live broker: %q", got)
	}
	if got := desiredOwner("acme", live, "z"); got != desiredOwner("acme", live, "") {
		t.Fatalf("pinned to a dead broker falls back to the hash: %q", got)
	}
	// Adding a broker moves only families to it; removing one moves only its own.
	fams := make([]string, 200)
	for i := range fams {
		fams[i] = "fam-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	moved := 0
	for _, f := range fams {
		before, after := desiredOwner(f, live, ""), desiredOwner(f, append(live, "d"), "")
		if before != after {
			moved++
			if after != "d" {
				t.Fatalf("%s moved from %s to %s when d joined", f, before, after)
			}
		}
		if gone := desiredOwner(f, []string{"a", "c"}, ""); before != "b" && gone != before {
			t.Fatalf("%s moved from %s to %s when b left", f, before, gone)
		}
	}
	if moved < len(fams)/8 || moved > len(fams)/2 {
		t.Fatalf("%d of %d families moved to a fourth broker, want about a quarter", moved, len(fams))
	}
}
