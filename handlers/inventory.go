package handlers

import (
	"context"
	"time"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// itemBody is the public form of one held lease: never a fencing token,
// never a session id.
func itemBody(it *core.Item, now time.Time) api.LeaseItem {
	return api.LeaseItem{
		Route:             it.Route().String(),
		OwnerId:           it.OwnerID(),
		HolderIncarnation: it.HolderIncarnation(),
		AcquiredAt:        it.AcquiredAt(),
		ExpiresAt:         it.ExpiresAt(),
		RemainingMs:       it.RemainingMs(now),
		Renewals:          int64(it.Renewals()),
	}
}

// snapshotOwner identifies a caller for the per-caller snapshot cap.
func snapshotOwner(c *Caller) string { return string(c.Family) + "\x00" + c.Name }

// page reads one page of sel. The first page takes a snapshot; later pages
// resume it from a signed cursor, after re-authorizing the selector.
func (s *Server) page(ctx context.Context, sel core.Selector, cursor *string, limit int) (api.LeasePage, error) {
	c := callerFrom(ctx)
	now := s.now()
	out := api.LeasePage{Items: []api.LeaseItem{}}
	if sel.IsExact() {
		if cursor != nil {
			s.metrics.cursorMismatch("exact_selector")
			return out, muster.Errorf(muster.CodeInvalidCursor, "an exact selector has a single page and no cursor")
		}
		r, _ := sel.Route()
		res, err := s.broker.Lookup(ctx, c.Family, r)
		if err != nil {
			return out, err
		}
		if res.Item != nil {
			out.Items = append(out.Items, itemBody(res.Item, now))
		}
		out.Snapshot = api.Snapshot{Epoch: s.broker.Epoch(), Revision: int64(res.Revision)}
		s.metrics.listPage(1, len(out.Items), false)
		return out, nil
	}
	var sn *core.Snapshot
	after := ""
	if cursor == nil {
		var err error
		if sn, err = s.broker.OpenSnapshot(ctx, c.Family, snapshotOwner(c)); err != nil {
			return out, snapshotErr(err)
		}
	} else {
		cur, err := s.cursors.Decode(*cursor, c.Family, sel.String())
		if err == nil {
			sn, err = s.broker.ResumeSnapshot(ctx, c.Family, cur.Snapshot)
		}
		if err != nil {
			s.metrics.cursorMismatch(string(muster.ErrorCode(err)))
			return out, err
		}
		after = cur.After
		s.metrics.cursorResumes.Inc()
	}
	res := sn.Page(sel, after, core.Budget{Limit: limit, Bytes: core.DefaultPageBytes, Examined: core.DefaultExaminedBudget})
	out.Items = make([]api.LeaseItem, len(res.Items))
	for i, it := range res.Items {
		out.Items[i] = itemBody(it, now)
	}
	if !res.Done {
		next := s.cursors.Encode(core.Cursor{Epoch: s.broker.Epoch(), Family: c.Family, Selector: sel.String(), Snapshot: sn.ID, After: res.After})
		out.NextCursor = &next
	}
	out.Snapshot = api.Snapshot{Epoch: s.broker.Epoch(), Revision: int64(sn.Revision)}
	s.metrics.listPage(res.Examined, len(res.Items), res.Exhausted)
	return out, nil
}

// ListLeases lists the held leases matching a selector, page by page.
func (s *Server) ListLeases(ctx context.Context, req api.ListLeasesRequestObject) (api.ListLeasesResponseObject, error) {
	sel, err := authorizeSelector(ctx, req.Params.Selector, core.Read)
	if err != nil {
		return nil, err
	}
	limit, err := pageLimit(req.Params.Limit, core.DefaultPageLimit, core.MaxPageLimit)
	if err != nil {
		return nil, err
	}
	out, err := s.page(ctx, sel, req.Params.Cursor, limit)
	if err != nil {
		return nil, err
	}
	return api.ListLeases200JSONResponse(out), nil
}

// pageLimit is the `limit` parameter of a paged operation: def when absent,
// else a value in 1..max (the contract states both; a request outside them
// fails with CodeInvalidRequest).
func pageLimit(p *int, def, max int) (int, error) {
	if p == nil {
		return def, nil
	}
	if *p < 1 || *p > max {
		return 0, muster.Errorf(muster.CodeInvalidRequest, "limit must be 1..%d", max)
	}
	return *p, nil
}
