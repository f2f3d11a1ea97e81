package muster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

func ExampleSession_WithLease() {
	ctx := context.Background()
	c, _ := muster.New("http://127.0.0.1:7420")
	s, err := c.NewSession(ctx, "worker-1", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())
	err = s.WithLease(ctx, "lease://acme/renderers/doc-123", 15*time.Second,
		func(ctx context.Context, l *muster.Lease) error {
			// Pass the fencing token to whatever the lease guards; stop
			// when ctx ends (the lease was lost).
			fmt.Println("rendering with token", l.FencingToken())
			return nil
		})
	switch {
	case errors.Is(err, muster.ErrLeaseHeld):
		// Someone else renders it.
	case err != nil:
		log.Print(err, " advice: ", muster.Advice(err))
	}
}

func ExampleClient_Observe() {
	ctx := context.Background()
	c, _ := muster.New("http://127.0.0.1:7420")
	o, err := c.Observe(ctx, "lease://acme/renderers/*", muster.WithShortestTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer o.Close()
	for {
		changed := o.Changed()
		if v := o.View(); v.Ready {
			fmt.Println(len(v.Items), "renderers leases held at revision", v.Revision)
		}
		select {
		case <-changed:
		case <-o.Done():
			log.Print(o.Err())
			return
		}
	}
}

func ExampleClient_List() {
	ctx := context.Background()
	c, _ := muster.New("http://127.0.0.1:7420")
	for it, err := range c.List(ctx, "lease://acme/**", muster.ListOptions{Limit: 500}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(it.Route, it.OwnerID, it.Remaining)
	}
}

func ExampleSweep() {
	ctx := context.Background()
	c, _ := muster.New("http://127.0.0.1:7420")
	type monitor struct {
		Topic string `json:"topic"`
	}
	res, err := muster.Sweep(ctx, c.Fleet("monitors"), func(raw json.RawMessage) (monitor, error) {
		var m monitor
		if err := json.Unmarshal(raw, &m); err != nil || m.Topic == "" {
			return m, errors.New("a monitor needs a topic")
		}
		return m, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kept", len(res.Kept), "dropped", res.Dropped)
}

func ExampleSession_Batch() {
	ctx := context.Background()
	c, _ := muster.New("http://127.0.0.1:7420")
	s, err := c.NewSession(ctx, "worker-1", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())
	// Take a share of many routes in one request; each result is what
	// Session.Acquire would have answered.
	b := s.Batch()
	for i := range 64 {
		b.Acquire(fmt.Sprintf("lease://acme/renderers/doc-%d", i), 30*time.Second)
	}
	results, err := b.Do(ctx)
	if err != nil {
		log.Fatal(err) // nothing was applied
	}
	var held []*muster.Lease
	for _, r := range results {
		switch {
		case r.Err == nil:
			held = append(held, r.Lease)
		case errors.Is(r.Err, muster.ErrLeaseHeld):
			// Another worker has it.
		default:
			log.Print(r.Route, ": ", r.Err, " advice: ", muster.Advice(r.Err))
		}
	}
	// Renew them all with one request per interval.
	renew := s.Batch()
	for _, l := range held {
		renew.Extend(l, 30*time.Second)
	}
	if _, err := renew.Do(ctx); err != nil {
		log.Print(err)
	}
}
