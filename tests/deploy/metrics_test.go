// Package deploy checks the operations kit under deploy/: that the alert
// rules (deploy/prometheus) and the Grafana dashboard (deploy/grafana) read
// only metrics, and labels, that the real broker exports, and that the files
// keep their conventions. promtool's own checks run in alerts.sh.
package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/musterhq/muster/tests/musterbin"
	"github.com/musterhq/muster/tests/pgtest"
)

const (
	rulesPath     = "../../deploy/prometheus/muster-alerts.yaml"
	testsPath     = "../../deploy/prometheus/muster-alerts.test.yaml"
	dashboardPath = "../../deploy/grafana/muster-dashboard.json"
	secret        = "deploy-test-token"
	family        = "acme"
)

// scrapeLabels are the labels Prometheus adds to every series it scrapes.
var scrapeLabels = []string{"job", "instance"}

// synthesized are the series Prometheus records itself for each scrape,
// which no broker exports.
var synthesized = []string{"up"}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("no rules")
	}
	return out
}

type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

type dashboard struct {
	Inputs []struct {
		Name, Type, PluginID string
	} `json:"__inputs"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Datasource json.RawMessage `json:"datasource"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func allPanels(ps []dashPanel) []dashPanel {
	var out []dashPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// query is one PromQL expression and where it comes from.
type query struct{ where, expr string }

// queries are every PromQL expression of the rules and the dashboard, the
// dashboard's variable queries (label_values(SELECTOR, label)) as their
// selector.
func queries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, r := range loadRules(t) {
		out = append(out, query{"rule " + r.Alert, r.Expr})
	}
	d := loadDashboard(t)
	for _, p := range allPanels(d.Panels) {
		for i, tg := range p.Targets {
			out = append(out, query{fmt.Sprintf("panel %q target %d", p.Title, i), tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(SELECTOR, label)", v.Name, v.Definition)
		}
		out = append(out, query{"variable " + v.Name, m[1]})
	}
	return out
}

// selector is a metric named in a query, with the label names its matchers
// use.
type selector struct {
	name   string
	labels []string
}

// PromQL's keywords and operators that read like identifiers, and the
// words that take a parenthesised list of label names after them.
var (
	// The aggregation operators are here too: `sum by (l) (…)` puts a label
	// list between the operator and its parenthesis.
	keywords = []string{"sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio",
		"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end"}
	labelLists = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*$`)
)

// selectors tokenizes expr: string literals, range and subquery brackets and
// the label lists of by/without/on/ignoring/group_* are skipped; an
// identifier followed by `(` is a function; any other identifier that is not
// a keyword is a metric name, and the `{…}` after it (or on its own) holds
// its matchers. It is not a PromQL parser, but it fails on what it does not
// understand rather than skipping it.
func selectors(expr string) ([]selector, error) {
	var out []selector
	s := expr
	i := 0
	skipSpace := func() {
		for i < len(s) && strings.ContainsRune(" \t\r\n", rune(s[i])) {
			i++
		}
	}
	// str skips the string literal at i (quote " ' or `).
	str := func() error {
		q := s[i]
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\\' && q != '`' {
				j++
				continue
			}
			if s[j] == q {
				i = j + 1
				return nil
			}
		}
		return fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// matchers reads the {…} at i and returns its label names.
	matchers := func() ([]string, error) {
		i++ // {
		var names []string
		var cur strings.Builder
		for i < len(s) {
			switch c := s[i]; c {
			case '"', '\'', '`':
				m := matcherRE.FindStringSubmatch(cur.String())
				if m == nil {
					return nil, fmt.Errorf("matcher %q in %q", cur.String(), expr)
				}
				names = append(names, m[1])
				cur.Reset()
				if err := str(); err != nil {
					return nil, err
				}
			case ',':
				i++
			case '}':
				i++
				if strings.TrimSpace(cur.String()) != "" {
					return nil, fmt.Errorf("matcher %q without a value in %q", cur.String(), expr)
				}
				return names, nil
			default:
				cur.WriteByte(c)
				i++
			}
		}
		return nil, fmt.Errorf("unterminated {…} in %q", expr)
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if err := str(); err != nil {
				return nil, err
			}
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unterminated [ in %q", expr)
			}
			i += j + 1
		case c == '{':
			if _, err := matchers(); err != nil { // a selector without a name
				return nil, err
			}
			return nil, fmt.Errorf("a selector without a metric name in %q", expr)
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isWord(s[i]) || s[i] == '.' || (s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
		case isWord(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(s) && (isWord(s[j]) || s[j] == ':') {
				j++
			}
			word := s[i:j]
			i = j
			skipSpace()
			lower := strings.ToLower(word)
			switch {
			case slices.Contains(labelLists, lower):
				if i < len(s) && s[i] == '(' {
					k := strings.IndexByte(s[i:], ')')
					if k < 0 {
						return nil, fmt.Errorf("unterminated label list in %q", expr)
					}
					i += k + 1
				}
			case slices.Contains(keywords, lower):
			case i < len(s) && s[i] == '(':
				// a function call
			default:
				sel := selector{name: word}
				if i < len(s) && s[i] == '{' {
					names, err := matchers()
					if err != nil {
						return nil, err
					}
					sel.labels = names
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

func isWord(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func TestSelectorsTokenizer(t *testing.T) {
	got, err := selectors(`histogram_quantile(0.99, sum by (job, le) (rate(a_bucket{route!~"x|{y}",code="5.."}[5m]))) > 1e3
		unless on (instance) b or label_replace(c > 2, "limit", "s", "", "") / max_over_time(sum by (job) (d)[15m:1m]) and absent(up{job="m"}) + time()`)
	if err != nil {
		t.Fatal(err)
	}
	want := []selector{{"a_bucket", []string{"route", "code"}}, {"b", nil}, {"c", nil}, {"d", nil}, {"up", []string{"job"}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{`a{b=}`, `a{"x"}`, `rate(a[5m)`, `a{b="c"`, `{__name__="a"}`} {
		if _, err := selectors(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// exported reads a /metrics exposition: each sample's name (histograms'
// _bucket, _sum and _count as they are exposed) with the label names its
// samples carry.
func exported(t *testing.T, base string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			t.Fatalf("sample line %q", line)
		}
		name := line[:end]
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		if line[end] == '{' {
			for _, m := range labelName.FindAllStringSubmatch(line[end:strings.LastIndexByte(line, '}')], -1) {
				out[name][m[1]] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkQueries fails for each metric or label a query names that got does
// not export, for the metrics that want selects.
func checkQueries(t *testing.T, got map[string]map[string]bool, want func(name string) bool) (checked int) {
	t.Helper()
	for _, q := range queries(t) {
		sels, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: names no metric: %q", q.where, q.expr)
		}
		for _, s := range sels {
			if slices.Contains(synthesized, s.name) || !want(s.name) {
				continue
			}
			checked++
			labels, ok := got[s.name]
			if !ok {
				t.Errorf("%s: the broker does not export %s", q.where, s.name)
				continue
			}
			for _, l := range s.labels {
				if !labels[l] && !slices.Contains(scrapeLabels, l) {
					t.Errorf("%s: %s has no label %s (it has %v)", q.where, s.name, l, keys(labels))
				}
			}
		}
	}
	return checked
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// broker is a `muster serve` process.
type broker struct {
	base string
	log  *musterbin.LockedBuffer
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs `muster serve` with the configuration cfg (and args) and waits
// until /readyz answers 200.
func start(t *testing.T, cfg string, args ...string) *broker {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "muster.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	b := &broker{base: "http://" + addr, log: &musterbin.LockedBuffer{}}
	cmd := exec.Command(musterbin.Path(t), append([]string{"serve", "--addr", addr, "--data-dir", filepath.Join(dir, "data"), "--config", cfgPath}, args...)...)
	cmd.Stdout, cmd.Stderr = b.log, b.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("broker log:\n%s", b.log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("muster exited:\n%s", b.log)
		default:
		}
		if resp, err := http.Get(b.base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("muster not ready after 30 s:\n%s", b.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// do sends a request with the family's token and returns the status.
func (b *broker) do(t *testing.T, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// exercise makes the broker create the series that appear only once an
// event has labelled them: HTTP requests, a family's quota metrics, a
// refused cursor, a sweep, and connection refusals past the log budget.
func exercise(t *testing.T, b *broker, perAddress int) {
	t.Helper()
	expect := func(what string, got int, want ...int) {
		t.Helper()
		if !slices.Contains(want, got) {
			t.Fatalf("%s: status %d, want %v", what, got, want)
		}
	}
	expect("session", b.do(t, "POST", "/v1/sessions", `{"owner_id":"deploy-test","ttl_ms":60000}`), 201)
	expect("LIST with a bad cursor", b.do(t, "GET", "/v1/leases?selector=lease://acme/*/*&cursor=nonsense", ""), 400)
	expect("sweep", b.do(t, "POST", "/v1/fleets/monitors/sweep", `{"schema":{"type":"object"}}`), 200)
	// Hold the address's connections, then open more than the log budget
	// (10 lines a second) allows: each is reset and counted, the lines past
	// the budget in muster_log_lines_suppressed_total{source="connections"}.
	addr := strings.TrimPrefix(b.base, "http://")
	// admitted dials the broker and reports whether it kept the connection
	// (no reset within 300 ms; a refusal is a reset, which can come before
	// the dial returns).
	admitted := func() (net.Conn, bool) {
		c, err := net.Dial("tcp", addr)
		if err != nil { // reset before the dial returned
			return nil, false
		}
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = c.Read(make([]byte, 1))
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return c, true
		}
		c.Close()
		return nil, false
	}
	http.DefaultClient.CloseIdleConnections() // the broker counts them out when it sees them close
	var held []net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for len(held) < perAddress {
		if c, ok := admitted(); ok {
			held = append(held, c)
		} else if time.Now().After(deadline) {
			t.Fatalf("the broker admitted %d connections of %d", len(held), perAddress)
		}
	}
	for range 30 {
		if c, ok := admitted(); ok {
			c.Close()
			t.Fatalf("a connection past connections_per_address (%d) was admitted", perAddress)
		}
	}
	for _, c := range held {
		c.Close()
	}
	deadline = time.Now().Add(5 * time.Second)
	for musterbin.Metric(b.base, `muster_connections_refused_total{reason="address"}`) < 30 || musterbin.Metric(b.base, `muster_log_lines_suppressed_total{source="connections"}`) <= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("refusals not counted: refused %v, suppressed %v", musterbin.Metric(b.base, `muster_connections_refused_total{reason="address"}`),
				musterbin.Metric(b.base, `muster_log_lines_suppressed_total{source="connections"}`))
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect("metrics", b.do(t, "GET", "/metrics", ""), 200) // /metrics counted by the next scrape
}

func config(perAddress int) string {
	return musterbin.TokensConfig(musterbin.Token{Secret: secret, Family: family, Grants: []string{"lease://**#*", "fleet://**#*"}}) +
		fmt.Sprintf("limits:\n  connections_per_address: %d\n", perAddress)
}

// TestQueriesReadExportedMetrics starts a broker without placement, makes it
// create every series an event creates, and checks that every metric (and
// label) the rules and the dashboard read is in its /metrics, placement's
// aside: those only a broker with placement registers
// (TestPlacementQueriesReadExportedMetrics).
func TestQueriesReadExportedMetrics(t *testing.T) {
	const perAddress = 4
	b := start(t, config(perAddress))
	exercise(t, b, perAddress)
	got := exported(t, b.base)
	n := checkQueries(t, got, func(name string) bool { return !strings.HasPrefix(name, "muster_placement_") })
	t.Logf("%d metric references checked against %d exported names", n, len(got))
	for name := range got {
		if strings.HasPrefix(name, "muster_placement_") {
			t.Errorf("a broker without placement exports %s", name)
		}
	}
}

// TestPlacementQueriesReadExportedMetrics checks the placement metrics the
// rules and the dashboard read against a broker with placement (PostgreSQL).
func TestPlacementQueriesReadExportedMetrics(t *testing.T) {
	store := pgtest.Schema(t, "deploy")
	const perAddress = 4
	cfg := config(perAddress) + "placement:\n  broker: deploy-a\n  advertise: http://127.0.0.1:1\n  claim_ttl: 2s\n  renew_every: 500ms\n  margin: 500ms\n"
	b := start(t, cfg, "--store", store)
	// Served once the family's claim is taken.
	deadline := time.Now().Add(20 * time.Second)
	for musterbin.Metric(b.base, "muster_placement_claims") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the broker took no claim in 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := exported(t, b.base)
	n := checkQueries(t, got, func(name string) bool { return strings.HasPrefix(name, "muster_placement_") })
	if n == 0 {
		t.Fatal("no placement metric checked")
	}
	t.Logf("%d placement metric references checked", n)
}
