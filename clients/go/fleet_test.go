package muster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestFleet(t *testing.T) {
	b := mustStartBroker(t)
	c := newClient(t, b.url(), "a")
	ctx := ctxT(t, 20*time.Second)
	f := c.Fleet("monitors")

	type monitor struct {
		Topic string `json:"topic"`
	}
	var names []string
	for i, spec := range []any{
		monitor{Topic: "releases"},
		json.RawMessage(`{"topic":"issues","extra":[1,2]}`),
		map[string]any{"schedule": "@hourly"}, // no topic: dropped by the sweep
		monitor{Topic: "wiki"},
	} {
		s, err := f.Register(ctx, "repo", spec)
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != fmt.Sprintf("repo-%d", i+1) {
			t.Fatalf("minted %q", s.Name)
		}
		names = append(names, s.Name)
	}
	t.Run("ExactBytes", func(t *testing.T) {
		s, err := f.Get(ctx, "repo-2")
		if err != nil || string(s.Spec) != `{"topic":"issues","extra":[1,2]}` {
			t.Fatalf("%s %v", s.Spec, err)
		}
	})
	t.Run("Desired", func(t *testing.T) {
		var got []string
		for s, err := range f.Desired(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, s.Name)
		}
		if !slices.Equal(got, names) {
			t.Fatalf("got %v, want %v", got, names)
		}
	})
	t.Run("Sweep", func(t *testing.T) {
		res, err := Sweep(ctx, f, func(raw json.RawMessage) (monitor, error) {
			var m monitor
			if err := json.Unmarshal(raw, &m); err != nil {
				return m, err
			}
			if m.Topic == "" {
				return m, errors.New("no topic")
			}
			return m, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Dropped, []string{"repo-3"}) || len(res.Kept) != 3 || res.Kept[1].Spec.Topic != "issues" {
			t.Fatalf("%+v", res)
		}
		if _, err := f.Get(ctx, "repo-3"); !errors.Is(err, ErrSpecNotFound) {
			t.Fatalf("dropped spec still there: %v", err)
		}
	})
	t.Run("Forget", func(t *testing.T) {
		if err := f.Forget(ctx, "repo-4"); err != nil {
			t.Fatal(err)
		}
		if err := f.Forget(ctx, "repo-4"); err != nil {
			t.Fatalf("forgetting an absent name: %v", err)
		}
		if err := f.Forget(ctx, "Repo-1"); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("illegal name: %v", err)
		}
		if _, err := f.Get(ctx, "repo-1"); err != nil {
			t.Fatalf("an illegal name folded onto repo-1: %v", err)
		}
	})
	t.Run("PlanAndGap", func(t *testing.T) {
		p, err := f.Plan(ctx, []string{"repo-1", "repo-2"}, []string{"repo-2", "repo-9"})
		if err != nil || !slices.Equal(p.Missing, []string{"repo-1"}) || !slices.Equal(p.Orphans, []string{"repo-9"}) {
			t.Fatalf("%+v %v", p, err)
		}
		s := mustSession(t, c, "worker-1", 10*time.Second)
		for _, n := range []string{"repo-2", "repo-7"} {
			if _, err := s.Acquire(ctx, "lease://acme/monitors/"+n, 10*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		g, err := f.Gap(ctx, "lease://acme/monitors/*")
		if err != nil || !slices.Equal(g.Missing, []string{"repo-1"}) || !slices.Equal(g.Orphans, []string{"repo-7"}) || g.Revision == 0 {
			t.Fatalf("%+v %v", g, err)
		}
	})
	t.Run("NestedRoot", func(t *testing.T) {
		n := c.Fleet("inst-7/mon")
		s, err := n.Register(ctx, "job", map[string]int{"a": 1})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := n.Get(ctx, s.Name); err != nil || got.Name != s.Name {
			t.Fatalf("%+v %v", got, err)
		}
		for s, err := range c.Fleet("inst-7").Desired(ctx) {
			t.Fatalf("the parent root sees %v %v", s, err)
		}
	})
	t.Run("FamilyIsolation", func(t *testing.T) {
		other := newClient(t, b.url(), "b").Fleet("monitors")
		for s, err := range other.Desired(ctx) {
			t.Fatalf("family b sees %v %v", s, err)
		}
	})
}
