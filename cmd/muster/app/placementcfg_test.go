package app

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

func TestDesiredOwners(t *testing.T) {
	live := []string{"a", "b", "c"}
	if got := desiredOwners([]string{"acme"}, nil, nil, nil); len(got) != 0 {
		t.Fatalf("no live broker: %v", got)
	}
	if got := desiredOwners([]string{"acme"}, live, map[string]string{"acme": "b"}, map[string]string{"acme": "a"}); got["acme"] != "b" {
		t.Fatalf("pinned to a live broker: %v", got)
	}
	if got, hash := desiredOwners([]string{"acme"}, live, map[string]string{"acme": "z"}, nil), desiredOwners([]string{"acme"}, live, nil, nil); got["acme"] != hash["acme"] {
		t.Fatalf("pinned to a dead broker falls back to the hash: %v", got)
	}
	// Few families spread evenly: 12 over 3 brokers, 4 each, for any names.
	for round := range 50 {
		fams := make([]string, 12)
		for i := range fams {
			fams[i] = fmt.Sprintf("fam-%d-%d", round, i)
		}
		slices.Sort(fams)
		load := map[string]int{}
		for _, b := range desiredOwners(fams, live, nil, nil) {
			load[b]++
		}
		if load["a"] != 4 || load["b"] != 4 || load["c"] != 4 {
			t.Fatalf("12 families over 3 brokers: %v", load)
		}
	}
	// Many families: a broker joining takes its share and moves few others;
	// one leaving moves its own and few others.
	fams := make([]string, 200)
	for i := range fams {
		fams[i] = fmt.Sprintf("fam-%03d", i)
	}
	before := desiredOwners(fams, live, nil, nil)
	joined := desiredOwners(fams, append(slices.Clone(live), "d"), nil, before)
	left := desiredOwners(fams, []string{"a", "c"}, nil, before)
	toD, others, moved := 0, 0, 0
	for _, f := range fams {
		switch {
		case joined[f] == "d":
			toD++
		case joined[f] != before[f]:
			others++
		}
		if before[f] != "b" && left[f] != before[f] {
			moved++
		}
	}
	if toD != 50 || others != 0 {
		t.Fatalf("d joined: %d families to d (want its 50), %d moved between the others", toD, others)
	}
	if moved > len(fams)/10 {
		t.Fatalf("b left: %d families not b's moved", moved)
	}
	if moved != 0 {
		t.Fatalf("b left: %d families not b's moved", moved)
	}
	// d comes back after b's families went to a and c: just enough move to
	// d to bring every broker within the bound, none between a and c.
	back := desiredOwners(fams, []string{"a", "c", "d"}, nil, left)
	load, shuffled := map[string]int{}, 0
	for _, f := range fams {
		load[back[f]]++
		if back[f] != "d" && back[f] != left[f] {
			shuffled++
		}
	}
	if load["d"] != 66 || load["a"] > 67 || load["c"] > 67 || shuffled != 0 {
		t.Fatalf("d back: loads %v, %d moved between a and c", load, shuffled)
	}
	// The current owner of a pinned family does not keep it.
	if got := desiredOwners([]string{"acme"}, live, map[string]string{"acme": "c"}, map[string]string{"acme": "a"}); got["acme"] != "c" {
		t.Fatalf("pin over current owner: %v", got)
	}
	t.Logf("200 families, d joins: 50 to d, %d others moved; b leaves: %d not b's moved; d back: %v", others, moved, load)
}
