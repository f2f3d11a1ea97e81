package app

import (
	"fmt"
	"slices"
	"time"

	"github.com/musterhq/muster/core"
	"github.com/musterhq/muster/handlers"
)

// LimitsConfig is the `limits:` section of the configuration file: the
// broker-wide caps, the quota every family gets, and quotas for named
// families. Every field is optional; a missing one takes its default.
//
//	limits:
//	  body_read_timeout: 5s     # a request body must arrive within this
//	  broker:                   # caps shared by all families
//	    sessions: 100000
//	    watch_streams: 10000
//	    registrations: 1000000
//	    snapshots: 1024
//	    waiters: 100000
//	    sweeps: 2               # validating at once (one per family in any case)
//	  family:                   # each family's quota; default: 1/4 of each cap
//	    sessions: 25000
//	    fleet_specs_per_root: 100000
//	  families:                 # quotas of named families (unset fields: `family`)
//	    acme: {sessions: 50000}
//	  connections: 10000        # open connections (fewer if the descriptors allow fewer)
//	  connections_per_address: 2500   # from one client address; default: 1/4 of connections
type LimitsConfig struct {
	BodyReadTimeout time.Duration          `yaml:"body_read_timeout" validate:"omitempty,min=100ms,max=10m"`
	Broker          BrokerLimits           `yaml:"broker"`
	Family          FamilyQuota            `yaml:"family"`
	Families        map[string]FamilyQuota `yaml:"families" validate:"max=10000,dive,keys,required,max=128,printascii,excludesall= /,endkeys"`

	// Open connections, and open connections from one client address
	// (conns.go).
	Connections           int `yaml:"connections" validate:"omitempty,min=1,max=1000000"`
	ConnectionsPerAddress int `yaml:"connections_per_address" validate:"omitempty,min=1,max=1000000"`
}

// BrokerLimits are the broker-wide caps.
type BrokerLimits struct {
	Sessions      int `yaml:"sessions" validate:"omitempty,min=1,max=10000000"`
	WatchStreams  int `yaml:"watch_streams" validate:"omitempty,min=1,max=1000000"`
	Registrations int `yaml:"registrations" validate:"omitempty,min=1,max=100000000"`
	Snapshots     int `yaml:"snapshots" validate:"omitempty,min=1,max=1000000"`
	Waiters       int `yaml:"waiters" validate:"omitempty,min=1,max=10000000"`
	// Sweeps validating at once, all families together (one per family in
	// any case).
	Sweeps int `yaml:"sweeps" validate:"omitempty,min=1,max=64"`
}

// FamilyQuota is what one family may hold at once.
type FamilyQuota struct {
	Sessions          int `yaml:"sessions" validate:"omitempty,min=1,max=10000000"`
	WatchStreams      int `yaml:"watch_streams" validate:"omitempty,min=1,max=1000000"`
	Registrations     int `yaml:"registrations" validate:"omitempty,min=1,max=100000000"`
	Snapshots         int `yaml:"snapshots" validate:"omitempty,min=1,max=1000000"`
	Waiters           int `yaml:"waiters" validate:"omitempty,min=1,max=10000000"`
	FleetSpecsPerRoot int `yaml:"fleet_specs_per_root" validate:"omitempty,min=1,max=100000000"`
}

// Defaults of the limits section.
const (
	// DefaultFamilyShare is the share of each broker-wide cap a family's
	// default quota is: no family can take more than a quarter of a cap.
	DefaultFamilyShare = 4
	// DefaultFleetSpecsPerRoot bounds the desired set of one root.
	DefaultFleetSpecsPerRoot = 100_000
	// DefaultConnections bounds the open connections: half of a 20,000
	// descriptor limit, some 200 MB of idle keep-alive connections (about
	// 20 KB each), and as many as the default watch streams (each one
	// connection over HTTP/1.1).
	DefaultConnections = 10_000
	// DefaultAddressShare is the share of the connections one client address
	// may hold by default, as a family's quotas are a share of each cap.
	DefaultAddressShare = 4
)

// Limits are the resolved limits: defaults applied, checked.
type Limits struct {
	BodyReadTimeout   time.Duration
	Core              core.Config // only the limit fields are set
	FleetSpecsPerRoot map[string]int
	DefaultSpecsRoot  int
	SweepsRunning     int

	// Connections and ConnectionsPerAddress are the configured caps; the
	// file descriptor limit may lower them when serving (connectionCaps).
	Connections, ConnectionsPerAddress int
}

// resolve applies the defaults and checks that no quota exceeds its cap.
// families are the families the tokens name: a quota for any other family
// is a typo and refused.
func (l *LimitsConfig) resolve(families []string) (Limits, error) {
	out := Limits{BodyReadTimeout: l.BodyReadTimeout, SweepsRunning: l.Broker.Sweeps}
	if out.SweepsRunning == 0 {
		out.SweepsRunning = handlers.DefaultSweepsRunning
	}
	if out.BodyReadTimeout == 0 {
		out.BodyReadTimeout = handlers.DefaultBodyReadTimeout
	}
	out.Connections, out.ConnectionsPerAddress = l.Connections, l.ConnectionsPerAddress
	if out.Connections == 0 {
		out.Connections = DefaultConnections
	}
	if out.ConnectionsPerAddress == 0 {
		out.ConnectionsPerAddress = max(1, out.Connections/DefaultAddressShare)
	}
	if out.ConnectionsPerAddress > out.Connections {
		return Limits{}, fmt.Errorf("limits.connections_per_address: %d is more than limits.connections (%d)", out.ConnectionsPerAddress, out.Connections)
	}
	caps := [5]int{l.Broker.Sessions, l.Broker.WatchStreams, l.Broker.Registrations, l.Broker.Snapshots, l.Broker.Waiters}
	for i, d := range [5]int{core.DefaultMaxSessions, core.DefaultMaxStreams, core.DefaultMaxRegistrations, core.DefaultMaxSnapshots, core.DefaultMaxWaiters} {
		if caps[i] == 0 {
			caps[i] = d
		}
	}
	c := &out.Core
	c.MaxSessions, c.MaxStreams, c.MaxRegistrations, c.MaxSnapshots, c.MaxWaiters = caps[0], caps[1], caps[2], caps[3], caps[4]
	def := FamilyQuota{}
	for i, v := range l.Family.counts() {
		if v == 0 {
			v = max(1, caps[i]/DefaultFamilyShare)
		}
		def.set(i, v)
	}
	def.FleetSpecsPerRoot = l.Family.FleetSpecsPerRoot
	if def.FleetSpecsPerRoot == 0 {
		def.FleetSpecsPerRoot = DefaultFleetSpecsPerRoot
	}
	if err := def.within(caps, "limits.family"); err != nil {
		return Limits{}, err
	}
	c.FamilyQuota = def.core()
	out.DefaultSpecsRoot = def.FleetSpecsPerRoot
	names := make([]string, 0, len(l.Families))
	for f := range l.Families {
		names = append(names, f)
	}
	slices.Sort(names)
	for _, f := range names {
		if !slices.Contains(families, f) {
			return Limits{}, fmt.Errorf("limits.families.%s: no token has this family", f)
		}
		q := l.Families[f]
		for i, v := range q.counts() {
			if v == 0 {
				q.set(i, def.counts()[i])
			}
		}
		if q.FleetSpecsPerRoot == 0 {
			q.FleetSpecsPerRoot = def.FleetSpecsPerRoot
		}
		if err := q.within(caps, "limits.families."+f); err != nil {
			return Limits{}, err
		}
		if c.FamilyQuotas == nil {
			c.FamilyQuotas = map[core.Family]core.Quota{}
			out.FleetSpecsPerRoot = map[string]int{}
		}
		c.FamilyQuotas[core.Family(f)] = q.core()
		out.FleetSpecsPerRoot[f] = q.FleetSpecsPerRoot
	}
	return out, nil
}

// specsPerRoot is a family's bound on the specs of one root.
func (l *Limits) specsPerRoot(family string) int {
	if n, ok := l.FleetSpecsPerRoot[family]; ok {
		return n
	}
	return l.DefaultSpecsRoot
}

var quotaNames = [5]string{"sessions", "watch_streams", "registrations", "snapshots", "waiters"}

func (q *FamilyQuota) counts() [5]int {
	return [5]int{q.Sessions, q.WatchStreams, q.Registrations, q.Snapshots, q.Waiters}
}

func (q *FamilyQuota) set(i, v int) {
	fields := [5]*int{&q.Sessions, &q.WatchStreams, &q.Registrations, &q.Snapshots, &q.Waiters}
	*fields[i] = v
}

func (q *FamilyQuota) within(caps [5]int, where string) error {
	for i, v := range q.counts() {
		if v > caps[i] {
			return fmt.Errorf("%s.%s: %d is more than the broker-wide limits.broker.%s (%d)", where, quotaNames[i], v, quotaNames[i], caps[i])
		}
	}
	return nil
}

func (q *FamilyQuota) core() core.Quota {
	return core.Quota{Sessions: q.Sessions, Streams: q.WatchStreams, Registrations: q.Registrations, Snapshots: q.Snapshots, Waiters: q.Waiters}
}
