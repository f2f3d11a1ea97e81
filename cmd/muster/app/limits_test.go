package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/musterhq/muster/core"
)

const limitsToken = `tokens:
  - name: a
    sha256: 746e2cebffe4b6380ad195b4cdf59f15a17bf906d0b7929a68aaf9953dc862d3
    family: acme
    grants: ["lease://acme/**#*"]
`

func loadLimits(t *testing.T, yaml string) (Limits, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "muster.yaml")
	if err := os.WriteFile(p, []byte(limitsToken+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		return Limits{}, err
	}
	return cfg.Limits.resolve([]string{"acme"})
}

func TestLimitsDefaults(t *testing.T) {
	l, err := loadLimits(t, "")
	if err != nil {
		t.Fatal(err)
	}
	c := l.Core
	if l.BodyReadTimeout != 5*time.Second || c.MaxSessions != 100_000 || c.MaxStreams != 10_000 ||
		c.MaxRegistrations != 1_000_000 || c.MaxSnapshots != 1024 || c.MaxWaiters != 100_000 || l.SweepsRunning != 2 {
		t.Errorf("broker defaults: %+v, body %v", c, l.BodyReadTimeout)
	}
	if l.Connections != 10_000 || l.ConnectionsPerAddress != 2_500 {
		t.Errorf("connections %d, per address %d", l.Connections, l.ConnectionsPerAddress)
	}
	// No family takes more than a quarter of any cap.
	want := core.Quota{Sessions: 25_000, Streams: 2_500, Registrations: 250_000, Snapshots: 256, Waiters: 25_000}
	if c.FamilyQuota != want || l.DefaultSpecsRoot != 100_000 {
		t.Errorf("family defaults: %+v, specs %d", c.FamilyQuota, l.DefaultSpecsRoot)
	}
}

func TestLimitsConfigured(t *testing.T) {
	l, err := loadLimits(t, `limits:
  body_read_timeout: 2s
  connections: 400
  broker: {sessions: 1000, watch_streams: 40, sweeps: 3}
  family: {watch_streams: 30, fleet_specs_per_root: 50}
  families:
    acme: {sessions: 600}
`)
	if err != nil {
		t.Fatal(err)
	}
	if l.BodyReadTimeout != 2*time.Second || l.Core.MaxSessions != 1000 || l.Core.MaxStreams != 40 || l.SweepsRunning != 3 {
		t.Errorf("broker: %+v", l.Core)
	}
	if l.Connections != 400 || l.ConnectionsPerAddress != 100 {
		t.Errorf("connections %d, per address %d (want a quarter)", l.Connections, l.ConnectionsPerAddress)
	}
	if l, err := loadLimits(t, "limits:\n  connections_per_address: 10000\n"); err != nil || l.Connections != 10_000 || l.ConnectionsPerAddress != 10_000 {
		t.Errorf("one address may hold every connection: %d of %d, %v", l.ConnectionsPerAddress, l.Connections, err)
	}
	if q := l.Core.FamilyQuota; q.Sessions != 250 || q.Streams != 30 || q.Snapshots != 256 || l.DefaultSpecsRoot != 50 {
		t.Errorf("family: %+v specs %d", q, l.DefaultSpecsRoot)
	}
	if q := l.Core.FamilyQuotas["acme"]; q.Sessions != 600 || q.Streams != 30 || l.FleetSpecsPerRoot["acme"] != 50 {
		t.Errorf("acme: %+v specs %d", q, l.FleetSpecsPerRoot["acme"])
	}
}

func TestLimitsRefused(t *testing.T) {
	// want: the message names the key as the file spells it, and the rule.
	for _, tt := range []struct{ name, yaml, want string }{
		{"UnknownKey", "limits:\n  session: 5\n", `unknown key "session" in limits (known keys: body_read_timeout, broker, family, families, connections, connections_per_address)`},
		{"UnknownBrokerKey", "limits:\n  broker: {session: 5}\n", `unknown key "session" in limits.broker (known keys: sessions, watch_streams, registrations, snapshots, waiters, sweeps)`},
		{"UnknownQuotaKey", "limits:\n  family: {streams: 5}\n", `unknown key "streams" in a family's quota (known keys: sessions, watch_streams, registrations, snapshots, waiters, fleet_specs_per_root)`},
		{"DurationWithoutUnit", "limits:\n  body_read_timeout: 5\n", "expected a duration such as 5s or 500ms, found a number (5)"},
		{"TimeoutTooShort", "limits:\n  body_read_timeout: 10ms\n", "limits: body_read_timeout: must be at least 100ms, got 10ms"},
		{"TimeoutNotADuration", "limits:\n  body_read_timeout: soon\n", "expected a duration such as 5s or 500ms, found a string (soon)"},
		{"Negative", "limits:\n  broker: {sessions: -1}\n", "limits: broker: sessions: must be at least 1, got -1"},
		{"NoConnections", "limits:\n  connections: -1\n", "limits: connections: must be at least 1, got -1"},
		{"TooManyConnections", "limits:\n  connections: 1000001\n", "limits: connections: must be at most 1000000, got 1000001"},
		{"PerAddressAboveTotal", "limits:\n  connections: 100\n  connections_per_address: 101\n", "limits.connections_per_address: 101 is more than limits.connections (100)"},
		{"PerAddressAboveDefault", "limits:\n  connections_per_address: 10001\n", "limits.connections_per_address: 10001 is more than limits.connections (10000)"},
		{"TooManySweeps", "limits:\n  broker: {sweeps: 65}\n", "limits: broker: sweeps: must be at most 64, got 65"},
		{"QuotaAboveCap", "limits:\n  broker: {sessions: 10}\n  family: {sessions: 11}\n", "limits.family.sessions: 11 is more than the broker-wide limits.broker.sessions (10)"},
		{"OverrideAboveCap", "limits:\n  families:\n    acme: {watch_streams: 10001}\n", "limits.families.acme.watch_streams"},
		{"UnknownFamily", "limits:\n  families:\n    acne: {sessions: 5}\n", "limits.families.acne: no token has this family"},
		{"BadFamilyName", "limits:\n  families:\n    \"a b\": {sessions: 5}\n", "limits: families[a b]: must not contain any of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadLimits(t, tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// FuzzLimits: any limits section either is refused or resolves to limits
// whose every quota is at most its cap and at least 1.
func FuzzLimits(f *testing.F) {
	for _, s := range []string{"", "limits:\n  broker: {sessions: 10}\n", "limits:\n  family: {sessions: 11}\n  broker: {sessions: 10}\n",
		"limits:\n  families:\n    acme: {watch_streams: 3}\n", "limits:\n  body_read_timeout: 2s\n",
		"limits:\n  connections: 3\n  connections_per_address: 2\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, yaml string) {
		p := filepath.Join(t.TempDir(), "muster.yaml")
		if err := os.WriteFile(p, []byte(limitsToken+yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(p)
		if err != nil {
			return
		}
		l, err := cfg.Limits.resolve([]string{"acme"})
		if err != nil {
			return
		}
		c := l.Core
		caps := [5]int{c.MaxSessions, c.MaxStreams, c.MaxRegistrations, c.MaxSnapshots, c.MaxWaiters}
		for _, q := range append([]core.Quota{c.FamilyQuota}, mapValues(c.FamilyQuotas)...) {
			for i, v := range [5]int{q.Sessions, q.Streams, q.Registrations, q.Snapshots, q.Waiters} {
				if v < 1 || v > caps[i] {
					t.Fatalf("quota %d of %+v outside 1..%d", i, q, caps[i])
				}
			}
		}
		if l.BodyReadTimeout < 100*time.Millisecond || l.SweepsRunning < 1 || l.DefaultSpecsRoot < 1 ||
			l.ConnectionsPerAddress < 1 || l.ConnectionsPerAddress > l.Connections {
			t.Fatalf("resolved limits out of range: %+v", l)
		}
	})
}

func mapValues(m map[core.Family]core.Quota) []core.Quota {
	var out []core.Quota
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// The limits block of docs/operations.md, after its tokens block, is a
// valid configuration whose values are the defaults the broker assumes
// (but for the families: example).
func TestLimitsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for rest := string(doc); ; {
		i := strings.Index(rest, "```yaml\n")
		if i < 0 {
			break
		}
		rest = rest[i+len("```yaml\n"):]
		j := strings.Index(rest, "```")
		blocks = append(blocks, rest[:j])
		rest = rest[j+3:]
	}
	if len(blocks) < 2 || !strings.HasPrefix(blocks[0], "tokens:") || !strings.HasPrefix(blocks[1], "limits:") {
		t.Fatalf("docs/operations.md: expected the tokens block, then the limits block; found %d yaml blocks", len(blocks))
	}
	p := filepath.Join(t.TempDir(), "muster.yaml")
	if err := os.WriteFile(p, []byte(blocks[0]+blocks[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	documented, err := cfg.Limits.resolve([]string{"acme"})
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := (&LimitsConfig{}).resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	documented.Core.FamilyQuotas, documented.FleetSpecsPerRoot = nil, nil
	if !reflect.DeepEqual(documented, defaults) {
		t.Errorf("docs/operations.md documents\n%+v\nthe broker assumes\n%+v", documented, defaults)
	}
}
