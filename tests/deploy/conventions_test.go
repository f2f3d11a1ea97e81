package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}

// Every rule has a for:, a severity, a summary, a description and a docs
// annotation naming a section that exists.
func TestRulesConventions(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if seen[r.Alert] {
			t.Errorf("%s: defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if _, err := time.ParseDuration(r.For); err != nil {
			t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "docs"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		file, anchor, ok := strings.Cut(r.Annotations["docs"], "#")
		if !ok || !strings.HasPrefix(file, "docs/") {
			t.Errorf("%s: docs %q is not docs/FILE.md#section", r.Alert, r.Annotations["docs"])
			continue
		}
		if !anchors(t, "../../"+file)[anchor] {
			t.Errorf("%s: %s has no section #%s", r.Alert, file, anchor)
		}
	}
}

// Every rule has a unit test where it fires and one where it does not.
func TestRulesTested(t *testing.T) {
	data, err := os.ReadFile(testsPath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if !fires[r.Alert] || !quiet[r.Alert] {
			t.Errorf("%s: a firing case %v, a quiet case %v", r.Alert, fires[r.Alert], quiet[r.Alert])
		}
	}
}

// The dashboard's data source is its DS_PROMETHEUS input everywhere, and
// its panel ids are unique.
func TestDashboardConventions(t *testing.T) {
	d := loadDashboard(t)
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("__inputs: %+v, want the one prometheus input DS_PROMETHEUS", d.Inputs)
	}
	ds := func(raw json.RawMessage) bool {
		var v struct{ Type, UID string }
		return json.Unmarshal(raw, &v) == nil && v.Type == "prometheus" && v.UID == "${DS_PROMETHEUS}"
	}
	hasVar := false
	for _, v := range d.Templating.List {
		switch {
		case v.Type == "datasource" && v.Name == "DS_PROMETHEUS":
			hasVar = true
		case v.Type == "query" && !ds(v.Datasource):
			t.Errorf("variable %s: data source %s", v.Name, v.Datasource)
		}
	}
	if !hasVar {
		t.Error("no DS_PROMETHEUS data source variable")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range allPanels(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if !ds(p.Datasource) {
			t.Errorf("panel %q: data source %s", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if !ds(tg.Datasource) {
				t.Errorf("panel %q: a target's data source %s", p.Title, tg.Datasource)
			}
		}
	}
	t.Logf("%d panels, %d queries", len(ids), queries)
}
