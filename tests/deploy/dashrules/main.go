// Command dashrules prints the queries of deploy/grafana/muster-dashboard.json
// as a Prometheus rules file of recording rules, with Grafana's variables
// replaced by values PromQL takes ($__rate_interval by 5m, $job and
// $instance by .+), so `promtool check rules` can parse every query
// (tests/deploy/alerts.sh).
//
//	go run ./tests/deploy/dashrules deploy/grafana/muster-dashboard.json > rules.yaml
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dashrules DASHBOARD.json")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var d struct{ Panels []panel }
	if err := json.Unmarshal(data, &d); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$job", ".+", "$instance", ".+")
	fmt.Println("groups:\n  - name: dashboard\n    rules:")
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				expr, _ := json.Marshal(vars.Replace(t.Expr)) // a JSON string is a YAML string
				fmt.Printf("      - record: dashboard:panel_%d_%s\n        expr: %s\n", p.ID, t.RefID, expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}
