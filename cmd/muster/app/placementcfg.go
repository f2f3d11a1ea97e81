package app

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/musterhq/muster/fleetstore/claims"
)

// PlacementConfig is the `placement:` section of the configuration file: it
// turns multi-broker mode on (docs/placement.md). Every broker of one
// deployment reads the same tokens and shares one PostgreSQL store; each has
// its own broker id and advertised address.
//
//	placement:
//	  broker: broker-a                    # unique in the deployment
//	  advertise: http://10.0.0.1:7420     # where clients are sent for its families
//	  claim_ttl: 6s                       # 2s – 60s
//	  renew_every: 2s                     # at most claim_ttl / 3
//	  margin: 1s                          # 0 – 60s
//	  pinned: {acme: broker-a}            # families placed by hand
//	  cut_redirect: 9s                    # default claim_ttl + margin + renew_every
type PlacementConfig struct {
	Broker     string            `yaml:"broker" validate:"required,max=128,printascii,excludesall= /,ne=auto"`
	Advertise  string            `yaml:"advertise" validate:"required,max=1024"`
	ClaimTTL   time.Duration     `yaml:"claim_ttl" validate:"omitempty,min=2s,max=60s"`
	RenewEvery time.Duration     `yaml:"renew_every" validate:"omitempty,min=100ms,max=20s"`
	Margin     time.Duration     `yaml:"margin" validate:"omitempty,min=0s,max=60s"`
	Pinned     map[string]string `yaml:"pinned" validate:"max=10000,dive,keys,required,max=128,endkeys,required,max=128"`
	// CutRedirect: how long a broker that cannot read the claims answers
	// family_unavailable for a family it does not serve before it sends
	// the clients to a peer it last saw alive (docs/placement.md).
	CutRedirect time.Duration `yaml:"cut_redirect" validate:"omitempty,min=0s,max=1h"`
}

// placementSettings is a checked PlacementConfig with its defaults.
type placementSettings struct {
	claims     claims.Config
	renewEvery time.Duration
	families   []string // every family of the configuration, sorted
	pinned     map[string]string
	// cutRedirect: see PlacementConfig.CutRedirect.
	cutRedirect time.Duration
}

// resolve checks what the tags cannot and fills in the defaults. families
// are the configuration's families (the tokens').
func (p *PlacementConfig) resolve(families []string, storeURL string) (*placementSettings, error) {
	if storeURL == "" {
		return nil, fmt.Errorf("placement: needs the PostgreSQL store (--store postgres://…) that every broker of the deployment shares")
	}
	u, err := url.Parse(p.Advertise)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("placement: advertise: must be the base URL clients reach this broker at (http://host:port)")
	}
	ttl := p.ClaimTTL
	if ttl == 0 {
		ttl = claims.DefaultTTL
	}
	every := p.RenewEvery
	if every == 0 {
		every = ttl / 3
	}
	if every > ttl/3 {
		return nil, fmt.Errorf("placement: renew_every: must be at most claim_ttl / 3 (%v), got %v", ttl/3, every)
	}
	margin := p.Margin
	if margin == 0 {
		margin = claims.DefaultMargin
	}
	cut := p.CutRedirect
	if cut == 0 {
		cut = ttl + margin + every // a peer took the family over by then
	}
	fams := slices.Clone(families)
	slices.Sort(fams)
	fams = slices.Compact(fams)
	for fam := range p.Pinned {
		if _, ok := slices.BinarySearch(fams, fam); !ok {
			return nil, fmt.Errorf("placement: pinned: family %q is not named by any token", fam)
		}
	}
	return &placementSettings{
		claims:      claims.Config{Broker: p.Broker, Addr: u.String(), TTL: ttl, Margin: margin},
		renewEvery:  every,
		families:    fams,
		pinned:      p.Pinned,
		cutRedirect: cut,
	}, nil
}

// openPlacer opens the claim store (the same PostgreSQL as the fleet store)
// and prepares the placement loop; Open starts it once the listener is bound.
func (m *Main) openPlacer(set *placementSettings) error {
	ctx, cancel := context.WithTimeout(context.Background(), StoreOpenTimeout)
	defer cancel()
	store, err := claims.Open(ctx, m.StoreURL, set.claims)
	if err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	m.placer = newPlacer(store, m.broker, set, m.Logger)
	m.Logger.Info("placement on", "broker", set.claims.Broker, "advertise", set.claims.Addr,
		"claim_ttl", set.claims.TTL.String(), "renew_every", set.renewEvery.String(), "margin", set.claims.Margin.String())
	return nil
}

// closePlacer gives every held family up and closes the claim store.
func (m *Main) closePlacer() {
	if m.placer != nil {
		m.placer.close()
		m.placer = nil
	}
}
