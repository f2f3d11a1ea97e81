package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/clients/go/api"
)

// jsonArg reads a JSON argument: the text itself, or @FILE (@- is stdin).
func jsonArg(arg string) (json.RawMessage, error) {
	data := []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if name == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return nil, err
		}
	}
	if !json.Valid(data) {
		return nil, usageErr{fmt.Sprintf("%.40q is not JSON (give the JSON text, or @FILE)", arg)}
	}
	return json.RawMessage(data), nil
}

// names splits a comma-separated list ("" is none).
func names(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func printPlan(cf *clientFlags, out io.Writer, p muster.Plan, gap bool) error {
	if cf.json() {
		v := map[string]any{"missing": p.Missing, "orphans": p.Orphans}
		if gap {
			v["revision"] = p.Revision
		}
		return printJSON(out, v)
	}
	var rows [][]string
	for _, n := range p.Missing {
		rows = append(rows, []string{"missing", n})
	}
	for _, n := range p.Orphans {
		rows = append(rows, []string{"orphan", n})
	}
	if gap {
		fmt.Fprintf(out, "revision %d\n", p.Revision)
	}
	return printTable(out, []string{"STATE", "NAME"}, rows)
}

// fleetCommand is `muster fleet …`: the durable desired set of a root.
func fleetCommand() func([]string, io.Writer, io.Writer) int {
	var desired, live string
	return group("fleet", "Register, forget and list the desired set of a fleet root; plan it against\nlive names or the lease inventory (gap); sweep it with a JSON Schema.\nexport and import open the fleet store itself, not a broker (their --help).", []subcommand{
		{name: "register", args: "ROOT KIND SPEC", summary: "store SPEC (JSON text, or @FILE) under a new name KIND-N", nargs: [2]int{3, 3},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				spec, err := jsonArg(args[2])
				if err != nil {
					return err
				}
				s, err := c.Fleet(args[0]).Register(ctx, args[1], spec)
				if err != nil {
					return err
				}
				if cf.json() {
					return printJSON(out, map[string]any{"name": s.Name, "spec": s.Spec})
				}
				_, err = fmt.Fprintln(out, display(s.Name))
				return err
			}},
		{name: "forget", args: "ROOT NAME", summary: "forget a spec (succeeds when it is already gone)", nargs: [2]int{2, 2},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				return c.Fleet(args[0]).Forget(ctx, args[1])
			}},
		{name: "desired", args: "ROOT", summary: "list the desired set of ROOT in name order", nargs: [2]int{1, 1},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				rows := [][]string{}
				items := []map[string]any{}
				for s, err := range c.Fleet(args[0]).Desired(ctx) {
					if err != nil {
						return err
					}
					rows = append(rows, []string{s.Name, string(s.Spec)})
					items = append(items, map[string]any{"name": s.Name, "spec": s.Spec})
				}
				if cf.json() {
					return printJSON(out, items)
				}
				return printTable(out, []string{"NAME", "SPEC"}, rows)
			}},
		{name: "plan", args: "", summary: "the difference between --desired and --live names (changes nothing)", nargs: [2]int{0, 0},
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&desired, "desired", "", "desired `names`, comma-separated")
				fs.StringVar(&live, "live", "", "live `names`, comma-separated")
			},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				p, err := c.Fleet("").Plan(ctx, names(desired), names(live))
				if err != nil {
					return err
				}
				return printPlan(cf, out, p, false)
			}},
		{name: "gap", args: "ROOT LIVE_SELECTOR", summary: "plan ROOT's desired set against the leases held under LIVE_SELECTOR", nargs: [2]int{2, 2},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				p, err := c.Fleet(args[0]).Gap(ctx, leaseURI(args[1]))
				if err != nil {
					return err
				}
				return printPlan(cf, out, p, true)
			}},
		{name: "sweep", args: "ROOT SCHEMA", summary: "keep the specs valid under SCHEMA (JSON Schema text, or @FILE), forget the rest", nargs: [2]int{2, 2},
			run: func(ctx context.Context, cf *clientFlags, args []string, out io.Writer) error {
				c, err := cf.client()
				if err != nil {
					return err
				}
				schema, err := jsonArg(args[1])
				if err != nil {
					return err
				}
				var r api.SweepResult
				resp, err := c.Raw().SweepSpecs(ctx, args[0], api.SweepRequest{Schema: schema})
				if err := call(resp, err, 200, &r); err != nil {
					return err
				}
				if cf.json() {
					return printJSON(out, r)
				}
				rows := [][]string{}
				for _, k := range r.Kept {
					rows = append(rows, []string{"kept", k.Name})
				}
				for _, d := range r.Dropped {
					rows = append(rows, []string{"dropped", d})
				}
				fmt.Fprintf(out, "kept %s, dropped %s\n", strconv.Itoa(len(r.Kept)), strconv.Itoa(len(r.Dropped)))
				return printTable(out, []string{"STATE", "NAME"}, rows)
			}},
		{name: "export", summary: "write the desired set of the store as JSON Lines (the store, not a broker)", own: fleetExport},
		{name: "import", summary: "apply a JSON Lines dump to the store (the store, not a broker)", own: fleetImport},
	})
}
