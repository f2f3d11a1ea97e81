package fleetstore

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// boltCounter reads a root bucket's counter: 1 when it has none yet.
func boltCounter(rb *bolt.Bucket) (uint64, error) {
	v := rb.Get([]byte(CounterKey))
	if v == nil {
		return 1, nil
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("counter of a root is corrupt: %q", v)
	}
	return n, nil
}

// Roots walks fleets/<family>/<root> in key (byte) order, inside one read
// transaction.
func (s *boltStore) Roots(ctx context.Context, afterFamily, afterRoot string, limit int) ([]RootCounter, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, backendErr("list", err, true)
	}
	out, more := []RootCounter{}, false
	err := s.db.View(func(tx *bolt.Tx) error {
		fleets := tx.Bucket(bucketFleets)
		if fleets == nil {
			return fmt.Errorf("fleet store file lacks its fleets bucket")
		}
		fc := fleets.Cursor()
		for fk, _ := fc.Seek([]byte(afterFamily)); fk != nil; fk, _ = fc.Next() {
			fb := fleets.Bucket(fk)
			if fb == nil {
				continue
			}
			rc := fb.Cursor()
			rk, _ := rc.First()
			if string(fk) == afterFamily {
				rk, _ = rc.Seek([]byte(afterRoot))
				if rk != nil && string(rk) == afterRoot {
					rk, _ = rc.Next()
				}
			}
			for ; rk != nil; rk, _ = rc.Next() {
				rb := fb.Bucket(rk)
				if rb == nil {
					continue
				}
				if len(out) == limit {
					more = true
					return nil
				}
				n, err := boltCounter(rb)
				if err != nil {
					return err
				}
				out = append(out, RootCounter{Family: string(fk), Root: string(rk), Next: n})
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, boltErr("list", err)
	}
	return out, more, nil
}

// Restore adds, compares and raises the counter in one write transaction
// (bbolt has one writer at a time, so no Register interleaves).
func (s *boltStore) Restore(ctx context.Context, family, root string, rows []Row, next uint64) ([]Outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, backendErr("restore", err, true)
	}
	var out []Outcome
	err := s.db.Update(func(tx *bolt.Tx) error {
		out = make([]Outcome, len(rows))
		rb, err := rootBucket(tx, family, root, true)
		if err != nil {
			return err
		}
		specs, err := rb.CreateBucketIfNotExists([]byte(SpecsBucket))
		if err != nil {
			return err
		}
		for i, r := range rows {
			switch v := specs.Get([]byte(r.Name)); {
			case v == nil:
				if err := specs.Put([]byte(r.Name), bytes.Clone(r.Spec)); err != nil {
					return err
				}
				out[i] = Added
			case bytes.Equal(v, r.Spec):
				out[i] = Unchanged
			default:
				out[i] = Conflict
			}
		}
		have, err := boltCounter(rb)
		if err != nil {
			return err
		}
		if next > have || rb.Get([]byte(CounterKey)) == nil {
			return rb.Put([]byte(CounterKey), strconv.AppendUint(nil, max(next, have), 10))
		}
		return nil
	})
	if err != nil {
		return nil, boltErr("restore", err)
	}
	return out, nil
}
