package muster

import (
	"context"
	"iter"
	"strings"
	"time"

	"github.com/musterhq/muster/clients/go/api"
)

// Item is one held lease as observed through LIST, a watch marker or a
// change event: a plain, read-only value. It carries no fencing token and no
// session id, and nothing in this package turns an Item into a *Lease; only
// Session.Acquire grants one.
type Item struct {
	Route             string // the concrete route, lease://realm/area/resource
	OwnerID           string // the holder session's logical owner
	HolderIncarnation string // opaque id of the holder session (new after reconnect or restart)
	AcquiredAt        time.Time
	ExpiresAt         time.Time
	Remaining         time.Duration // remaining TTL when the broker produced the item
	Renewals          int64
}

func itemFrom(i api.LeaseItem) Item {
	return Item{
		Route:             i.Route,
		OwnerID:           i.OwnerId,
		HolderIncarnation: i.HolderIncarnation,
		AcquiredAt:        i.AcquiredAt,
		ExpiresAt:         i.ExpiresAt,
		Remaining:         time.Duration(i.RemainingMs) * time.Millisecond,
		Renewals:          i.Renewals,
	}
}

func itemsFrom(in []api.LeaseItem) []Item {
	out := make([]Item, len(in))
	for i, it := range in {
		out[i] = itemFrom(it)
	}
	return out
}

// ListOptions tunes List and ListPage.
type ListOptions struct {
	// Limit is the page size, 1..500; 0 means the broker's default (100).
	Limit int
	// Cursor continues a snapshot: a Page's NextCursor, or the NextCursor of
	// a watch Marker. It is bound to the selector (and family, epoch and
	// snapshot): with another selector the broker answers ErrInvalidCursor.
	Cursor string
}

// Page is one page of held leases, read from the snapshot of the broker
// lifetime Epoch at Revision.
type Page struct {
	Items      []Item
	NextCursor string // "" on the last page
	Epoch      string
	Revision   int64
}

// ListPage reads one page of the held leases matching selector. An exact
// selector answers zero or one item and never a cursor.
func (c *Client) ListPage(ctx context.Context, selector string, opts ListOptions) (Page, error) {
	params := &api.ListLeasesParams{Selector: selector}
	if opts.Limit != 0 {
		params.Limit = &opts.Limit
	}
	if opts.Cursor != "" {
		params.Cursor = &opts.Cursor
	}
	var p api.LeasePage
	resp, err := c.raw.ListLeases(ctx, params)
	if err := c.call(resp, err, 200, &p); err != nil {
		return Page{}, err
	}
	out := Page{Items: itemsFrom(p.Items), Epoch: p.Snapshot.Epoch, Revision: p.Snapshot.Revision}
	if p.NextCursor != nil {
		out.NextCursor = *p.NextCursor
	}
	return out, nil
}

// List iterates over the held leases matching selector, one request per
// page, lazily: stopping the loop early sends no further request. Every item
// comes from one snapshot (no duplicate, no omission while leases change). On
// an error the iterator yields it once, with a zero Item, and stops;
// ErrCursorExpired and ErrEpochChanged mean "list again from the start".
//
//	for it, err := range client.List(ctx, "lease://acme/renderers/*", muster.ListOptions{}) {
//		if err != nil { return err }
//		fmt.Println(it.Route, it.OwnerID)
//	}
func (c *Client) List(ctx context.Context, selector string, opts ListOptions) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		for {
			p, err := c.ListPage(ctx, selector, opts)
			if err != nil {
				yield(Item{}, err)
				return
			}
			for _, it := range p.Items {
				if !yield(it, nil) {
					return
				}
			}
			if p.NextCursor == "" {
				return
			}
			opts.Cursor = p.NextCursor
		}
	}
}

// route is a parsed exact route.
type route struct {
	realm, area, resource string
}

// parseRoute splits lease://realm/area/resource. It checks only the shape
// needed to build a path; the broker checks the rest (a wildcard segment is
// its invalid_route).
func parseRoute(s string) (route, error) {
	rest, ok := strings.CutPrefix(s, "lease://")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return route{}, &Error{Code: ErrInvalidRoute.Code, Detail: "a route is lease://{realm}/{area}/{resource}"}
	}
	return route{parts[0], parts[1], parts[2]}, nil
}

func (r route) String() string { return "lease://" + r.realm + "/" + r.area + "/" + r.resource }

// LeaseStatus is the state of one route as answered by Get: read-only, like
// Item, with the number of waiters.
type LeaseStatus struct {
	Route   string
	Held    bool
	Item    Item // the holder, when Held
	Waiters int
}

// Get reads the current state of one exact route.
func (c *Client) Get(ctx context.Context, routeStr string) (LeaseStatus, error) {
	r, err := parseRoute(routeStr)
	if err != nil {
		return LeaseStatus{}, err
	}
	var s api.LeaseStatus
	resp, err := c.raw.GetLease(ctx, r.realm, r.area, r.resource)
	if err := c.call(resp, err, 200, &s); err != nil {
		return LeaseStatus{}, err
	}
	out := LeaseStatus{Route: s.Route, Held: s.Held, Waiters: s.Waiters}
	if s.Held {
		out.Item = Item{Route: s.Route}
		if s.OwnerId != nil {
			out.Item.OwnerID = *s.OwnerId
		}
		if s.HolderIncarnation != nil {
			out.Item.HolderIncarnation = *s.HolderIncarnation
		}
		if s.AcquiredAt != nil {
			out.Item.AcquiredAt = *s.AcquiredAt
		}
		if s.ExpiresAt != nil {
			out.Item.ExpiresAt = *s.ExpiresAt
		}
		if s.RemainingMs != nil {
			out.Item.Remaining = time.Duration(*s.RemainingMs) * time.Millisecond
		}
		if s.Renewals != nil {
			out.Item.Renewals = *s.Renewals
		}
	}
	return out, nil
}
