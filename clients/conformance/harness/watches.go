package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

// maxSelectorsPerStream is the contract's limit of selectors on one stream.
const maxSelectorsPerStream = 32

// actorWatch opens watch streams owned by the actor's current session (the
// Go SDK's Session.Watch) and keeps them under st.Name. With count, the
// selector is a template ({i} from `from` to from+count-1) and the
// registrations are opened 32 per stream. Streams are opened one by one
// and the first failure stops the step: without expect_error every open
// must succeed; with it, an open must fail with that code.
func (r *run) actorWatch(st step) error {
	a, err := r.actor(st.Actor)
	if err != nil {
		return err
	}
	if st.Name == "" || st.Selector == "" {
		return errors.New("actor_watch needs name and selector")
	}
	sels := []string{st.Selector}
	if st.Count != nil {
		sels = sels[:0]
		for i := st.From; i < st.From+*st.Count; i++ {
			sels = append(sels, strings.ReplaceAll(st.Selector, "{i}", fmt.Sprint(i)))
		}
	}
	_, s := a.current()
	for len(sels) > 0 {
		n := min(len(sels), maxSelectorsPerStream)
		// The stream lives until the next reset, not until this request ends.
		sub, err := s.Watch(r.ctx, sels[:n]...)
		if err != nil {
			if st.ExpectError == "" {
				return fmt.Errorf("opening %d selectors (%s …): %w", n, sels[0], err)
			}
			return expectErr(err, st.ExpectError)
		}
		go func() {
			for range sub.Events() { // read, so the stream never overflows
			}
		}()
		r.watches[st.Name] = append(r.watches[st.Name], sub)
		sels = sels[n:]
	}
	if st.ExpectError != "" {
		return fmt.Errorf("every open succeeded, want error %s", st.ExpectError)
	}
	return nil
}

// expectWatch checks the streams kept under st.Name: expect_watch_end waits
// until every one ended with the terminal event st.Event; expect_watch_open
// checks that none has ended.
func (r *run) expectWatch(ctx context.Context, st step) error {
	subs := r.watches[st.Name]
	if len(subs) == 0 {
		return fmt.Errorf("no watch named %q", st.Name)
	}
	if st.Op == "expect_watch_open" {
		for i, sub := range subs {
			select {
			case <-sub.Done():
				return fmt.Errorf("stream %d of %s ended: %v", i+1, st.Name, sub.Err())
			default:
			}
		}
		return nil
	}
	if st.Event == "" {
		return errors.New("expect_watch_end needs event")
	}
	deadline := time.NewTimer(st.timeout())
	defer deadline.Stop()
	for i, sub := range subs {
		select {
		case <-sub.Done():
		case <-deadline.C:
			return fmt.Errorf("stream %d of %s still open after %v, want it ended with %s", i+1, st.Name, st.timeout(), st.Event)
		case <-ctx.Done():
			return ctx.Err()
		}
		var end *muster.StreamEndError
		if err := sub.Err(); !errors.As(err, &end) || end.Reason != st.Event {
			return fmt.Errorf("stream %d of %s ended with %v, want the terminal event %s", i+1, st.Name, err, st.Event)
		}
	}
	return nil
}
