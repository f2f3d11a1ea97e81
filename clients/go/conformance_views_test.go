package muster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The observer ops of the Go conformance runner (conformance_test.go).

func (r *runner) observe(st obsStep) error {
	var opts []ObserveOption
	if st.PageSize > 0 {
		opts = append(opts, WithPageSize(st.PageSize))
	}
	if st.ReconcileMs > 0 {
		opts = append(opts, WithReconcileInterval(time.Duration(st.ReconcileMs)*time.Millisecond))
	}
	if st.Jitter != nil {
		opts = append(opts, WithReconcileJitter(*st.Jitter))
	}
	if st.ShortestTTLMs > 0 {
		opts = append(opts, WithShortestTTL(time.Duration(st.ShortestTTLMs)*time.Millisecond))
	}
	c, err := r.client(context.Background(), st.Token, st.Brokers)
	if err != nil {
		return err
	}
	if r.broken != 0 {
		opts = append(opts, withBroken(r.broken))
	}
	o, err := c.Observe(context.Background(), st.Selector, opts...)
	if err != nil {
		return err
	}
	r.observers[st.Observer] = o
	r.tokens[st.Observer] = st.Token
	return nil
}

// closeObserver closes the observer in the background and fails when it
// takes longer than max_ms (default 1000); a Close that hangs is freed by
// the scenario's reset.
func (r *runner) closeObserver(st obsStep) error {
	o, err := r.observer(st.Observer)
	if err != nil {
		return err
	}
	maxD := time.Second
	if st.MaxMs > 0 {
		maxD = time.Duration(st.MaxMs) * time.Millisecond
	}
	done := make(chan struct{})
	start := time.Now()
	go func() { o.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(maxD):
		return fmt.Errorf("Close did not return within %v", maxD)
	}
	if !errors.Is(o.Err(), ErrClosed) {
		return fmt.Errorf("err after Close (%v): %v", time.Since(start), o.Err())
	}
	return nil
}

// viewProblem says why v does not satisfy st, "" when it does.
func (r *runner) viewProblem(ctx context.Context, st obsStep, o *Observer, v View) string {
	if !v.Ready {
		return fmt.Sprintf("not ready (%v)", o.Err())
	}
	byRoute := map[string]Item{}
	for _, it := range v.Items {
		byRoute[it.Route] = it
	}
	if st.Count != nil && len(v.Items) != *st.Count {
		return fmt.Sprintf("%d items, want %d", len(v.Items), *st.Count)
	}
	for _, c := range st.Contains {
		it, ok := byRoute[c.Route]
		if !ok {
			return "missing " + c.Route
		}
		if c.OwnerID != "" && it.OwnerID != c.OwnerID {
			return fmt.Sprintf("%s held by %s, want %s", c.Route, it.OwnerID, c.OwnerID)
		}
		if c.Holder != "" {
			h, err := r.h.holder(ctx, c.Holder)
			if err != nil {
				return err.Error()
			}
			if it.HolderIncarnation != h {
				return fmt.Sprintf("%s not held by %s's current session", c.Route, c.Holder)
			}
		}
	}
	for _, route := range st.Excludes {
		if _, ok := byRoute[route]; ok {
			return "still has " + route
		}
	}
	if st.EpochNotMark && v.Epoch == r.marks[st.Observer] {
		return "still in the marked epoch " + v.Epoch
	}
	if st.MatchesList {
		listed, epoch, err := r.h.list(ctx, o.Selector(), r.tokens[st.Observer])
		if err != nil {
			return "list: " + err.Error()
		}
		if v.Epoch != epoch {
			return fmt.Sprintf("view of epoch %s, LIST answered in epoch %s", v.Epoch, epoch)
		}
		viewed := make([]string, 0, len(v.Items))
		for _, it := range v.Items {
			viewed = append(viewed, it.Route+"@"+it.HolderIncarnation)
		}
		slices.Sort(listed)
		slices.Sort(viewed)
		if !slices.Equal(listed, viewed) {
			return fmt.Sprintf("view (%d items) differs from LIST (%d items)", len(viewed), len(listed))
		}
	}
	return ""
}

func (r *runner) expectView(ctx context.Context, st obsStep) error {
	o, err := r.observer(st.Observer)
	if err != nil {
		return err
	}
	deadline := time.After(st.timeout())
	for {
		ch := o.Changed()
		problem := r.viewProblem(ctx, st, o, o.View())
		if problem == "" {
			return nil
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond): // LIST may lag the view
		case <-deadline:
			return errors.New(problem)
		}
	}
}

func (r *runner) expectSameView(st obsStep) error {
	if len(st.Observers) != 2 {
		return errors.New("expect_same_view compares two observers")
	}
	views := make([][]string, 2)
	ok := waitFor(st.timeout(), func() bool {
		for i, name := range st.Observers {
			o, err := r.observer(name)
			if err != nil {
				return false
			}
			v := o.View()
			if !v.Ready {
				return false
			}
			views[i] = nil
			for _, it := range v.Items {
				if matchSelector(st.Within, it.Route) {
					views[i] = append(views[i], it.Route+"@"+it.HolderIncarnation)
				}
			}
		}
		return slices.Equal(views[0], views[1])
	})
	if !ok {
		return fmt.Errorf("views differ:\n%v\n%v", views[0], views[1])
	}
	return nil
}

// matchSelector is the selector grammar's matching, for the runner only.
func matchSelector(sel, route string) bool {
	s := strings.Split(strings.TrimPrefix(sel, "lease://"), "/")
	r := strings.Split(strings.TrimPrefix(route, "lease://"), "/")
	var match func(s, r []string) bool
	match = func(s, r []string) bool {
		if len(s) == 0 {
			return len(r) == 0
		}
		if s[0] == "**" {
			for i := 0; i <= len(r); i++ {
				if match(s[1:], r[i:]) {
					return true
				}
			}
			return false
		}
		return len(r) > 0 && (s[0] == "*" || s[0] == r[0]) && match(s[1:], r[1:])
	}
	return match(s, r)
}
