package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// placementSpec is a scenario's `placement`: the scenario runs on a placed
// deployment (docs/placement.md) of several brokers sharing one PostgreSQL
// instead of the single broker.
type placementSpec struct {
	Brokers int               `json:"brokers"` // 2..3: b1 (the proxy's broker), b2, b3
	Pinned  map[string]string `json:"pinned"`  // family → broker name
}

// The placement timing of the harness's deployments: the shortest the
// broker accepts, so a failover takes about three seconds.
const (
	claimTTL   = 2 * time.Second
	renewEvery = 500 * time.Millisecond
	claimSlack = 500 * time.Millisecond // the configuration's margin
)

// settleTime bounds the wait for a new deployment's families to be served
// by their pinned brokers.
const settleTime = 30 * time.Second

func (p *placementSpec) check(name string) error {
	if p.Brokers < 2 || p.Brokers > 3 {
		return fmt.Errorf("%s: placement.brokers must be 2 or 3, not %d", name, p.Brokers)
	}
	for fam, b := range p.Pinned {
		if !slices.Contains(families(), fam) {
			return fmt.Errorf("%s: placement.pinned: no token of family %q", name, fam)
		}
		if !slices.Contains(brokerNames(p.Brokers), b) {
			return fmt.Errorf("%s: placement.pinned: no broker %q (want b1..b%d)", name, b, p.Brokers)
		}
	}
	return nil
}

func brokerNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("b%d", i+1)
	}
	return out
}

// families are the families of the token table, sorted.
func families() []string {
	var out []string
	for _, t := range tokens {
		if !slices.Contains(out, t.Family) {
			out = append(out, t.Family)
		}
	}
	sort.Strings(out)
	return out
}

// familyToken is a token name of fam that may LIST everything.
func familyToken(fam string) string {
	for name, t := range tokens {
		if t.Family == fam && slices.Contains(t.Grants, "lease://**#*") {
			return name
		}
	}
	return ""
}

// placedConfig is broker name's config file in a placed deployment.
func placedConfig(name, advertise string, pinned map[string]string) string {
	var sb strings.Builder
	sb.WriteString(tokenConfig())
	// cut_redirect 1h: a broker cut off from PostgreSQL keeps answering
	// family_unavailable (it would send its clients to a peer after
	// claim_ttl + margin by default), so that unavailable-broker-moves-on
	// proves the clients' own rule of moving on.
	fmt.Fprintf(&sb, "placement:\n  broker: %s\n  advertise: %s\n  claim_ttl: %v\n  renew_every: %v\n  margin: %v\n  cut_redirect: 1h\n",
		name, advertise, claimTTL, renewEvery, claimSlack)
	if len(pinned) > 0 {
		sb.WriteString("  pinned:\n")
		for _, fam := range families() {
			if b, ok := pinned[fam]; ok {
				fmt.Fprintf(&sb, "    %s: %s\n", fam, b)
			}
		}
	}
	return sb.String()
}

// deployment is the state of a placed scenario: the brokers besides b1
// and the PostgreSQL schema they share.
type deployment struct {
	others []*broker             // b2, b3
	links  map[string]*storeLink // each broker's way to PostgreSQL, by name
	drop   func()                // drops the schema
}

// link is a new store link of broker name: the store URL it uses.
func (d *deployment) link(name, store string) (string, error) {
	l, via, err := newStoreLink(store)
	if err != nil {
		return "", err
	}
	d.links[name] = l
	return via, nil
}

// brokerByName is b1 (the harness's broker) or one of the deployment's.
func (h *harness) brokerByName(name string) (*broker, error) {
	if name == h.broker.name {
		return h.broker, nil
	}
	if d := h.deployment; d != nil {
		for _, b := range d.others {
			if b.name == name {
				return b, nil
			}
		}
	}
	return nil, fmt.Errorf("no broker %q in this scenario", name)
}

// endDeployment kills the deployment's other brokers and drops its schema.
func (h *harness) endDeployment() {
	d := h.deployment
	if d == nil {
		return
	}
	h.deployment = nil
	for _, b := range d.others {
		b.kill()
		_ = os.RemoveAll(b.dataDir())
		_ = os.Remove(b.config)
	}
	for _, l := range d.links {
		l.close()
	}
	d.drop()
}

// startDeployment starts a placed deployment on a new schema: b2 and b3
// first on free ports, then b1 on the harness's broker address (so the
// pinned brokers are live before b1 could claim their families), and
// waits until every family is served by its pinned broker (any broker
// when not pinned).
func (h *harness) startDeployment(ctx context.Context, spec *placementSpec) error {
	store, drop, err := h.pg.newSchema(ctx)
	if err != nil {
		return err
	}
	d := &deployment{drop: drop, links: map[string]*storeLink{}}
	h.deployment = d
	names := brokerNames(spec.Brokers)
	for _, name := range names[1:] {
		via, err := d.link(name, store)
		if err != nil {
			return err
		}
		b, err := h.startPlaced(name, via, spec.Pinned)
		if err != nil {
			return err
		}
		d.others = append(d.others, b)
	}
	b1 := h.broker
	cfg := filepath.Join(b1.dir, b1.name+"-placed.yaml")
	if err := os.WriteFile(cfg, []byte(placedConfig(b1.name, b1.url(), spec.Pinned)), 0o600); err != nil {
		return err
	}
	via, err := d.link(b1.name, store)
	if err != nil {
		return err
	}
	if err := b1.reset(cfg, via); err != nil {
		return err
	}
	for _, fam := range families() {
		want := ""
		if name, ok := spec.Pinned[fam]; ok {
			b, err := h.brokerByName(name)
			if err != nil {
				return err
			}
			want = b.url()
		}
		var got string
		if !waitFor(ctx, settleTime, func() bool {
			got = servedBy(ctx, b1.url(), familyToken(fam))
			return got != "" && (want == "" || got == want)
		}) {
			return fmt.Errorf("family %s: served by %q, want %q within %v", fam, got, want, settleTime)
		}
	}
	return nil
}

// startPlaced starts broker name of a placed deployment on a free port
// (another attempt on another port when one is taken meanwhile).
func (h *harness) startPlaced(name, store string, pinned map[string]string) (*broker, error) {
	b := &broker{bin: h.broker.bin, dir: h.broker.dir, name: name, store: store, logs: h.broker.logs,
		config: filepath.Join(h.broker.dir, name+"-placed.yaml"), runs: h.broker.runs}
	var err error
	for range 3 {
		var addr string
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
		if err = os.WriteFile(b.config, []byte(placedConfig(name, "http://"+addr, pinned)), 0o600); err != nil {
			return nil, err
		}
		_ = os.RemoveAll(b.dataDir())
		if err = b.start(addr); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("broker %s: %w", name, err)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

var probeClient = &http.Client{Timeout: 5 * time.Second}

// servedBy is the base URL of the broker that serves token's family, asked
// of the broker at base ("" when none does now): base itself when it
// answers a LIST, the owner it names on 421 when that one answers it.
func servedBy(ctx context.Context, base, token string) string {
	status, owner := probe(ctx, base, token)
	switch {
	case status == http.StatusOK:
		return base
	case status == http.StatusMisdirectedRequest && owner != "":
		if s, _ := probe(ctx, owner, token); s == http.StatusOK {
			return owner
		}
	}
	return ""
}

// probe sends one LIST of token's family to base: the status, and the
// owner a 421 names.
func probe(ctx context.Context, base, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/leases?selector=lease://**&limit=1", nil)
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+tokens[token].Secret)
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var p struct {
		Owner string `json:"owner"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&p)
	return resp.StatusCode, p.Owner
}

// placementStep runs kill_broker, wait_owner, cut_store and heal_store.
func (h *harness) placementStep(ctx context.Context, st step) error {
	if h.deployment == nil {
		return fmt.Errorf("%s needs a scenario with placement", st.Op)
	}
	b, err := h.brokerByName(st.Broker)
	if err != nil {
		return err
	}
	switch st.Op {
	case "kill_broker":
		b.kill()
		return nil
	case "cut_store", "heal_store":
		h.deployment.links[b.name].setCut(st.Op == "cut_store")
		return nil
	}
	if _, ok := tokens[st.Token]; !ok {
		return fmt.Errorf("no token %q", st.Token)
	}
	var got string
	if !waitFor(ctx, st.timeout(), func() bool {
		got = servedBy(ctx, h.brokerURL, st.Token)
		return got == b.url()
	}) {
		return fmt.Errorf("token %s's family is served by %q, want %s (%s) within %v", st.Token, got, st.Broker, b.url(), st.timeout())
	}
	return nil
}
