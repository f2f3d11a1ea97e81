package fleetstore

import (
	"bytes"
	"context"
	"errors"
	"math"

	"github.com/jackc/pgx/v5"
)

// pgRaiseCounter creates the root's counter at $3 or raises it to $3. It
// runs first in Restore's transaction, so the counter row's lock keeps the
// root's registers (which take it first too) out until the restore commits.
const pgRaiseCounter = `
INSERT INTO muster_fleet_counters AS t (family, root, next_id)
VALUES ($1::text, $2::text, $3::bigint)
ON CONFLICT (family, root) DO UPDATE SET next_id = GREATEST(t.next_id, EXCLUDED.next_id)`

// pgRestoreInsert adds the rows whose names are free and returns them.
const pgRestoreInsert = `
INSERT INTO muster_fleet_specs (family, root, name, spec)
SELECT $1::text, $2::text, j.name, j.spec FROM unnest($3::text[], $4::bytea[]) AS j(name, spec)
ON CONFLICT (family, root, name) DO NOTHING
RETURNING name`

func (s *pgStore) Roots(ctx context.Context, afterFamily, afterRoot string, limit int) ([]RootCounter, bool, error) {
	out := []RootCounter{}
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		out = out[:0]
		rows, err := c.Query(ctx, `SELECT family, root, next_id FROM muster_fleet_counters
			WHERE (family, root) > ($1, $2) ORDER BY family, root LIMIT $3`, afterFamily, afterRoot, limit+1)
		if err != nil {
			return err
		}
		var rc RootCounter
		var next int64
		_, err = pgx.ForEachRow(rows, []any{&rc.Family, &rc.Root, &next}, func() error {
			if next < 1 {
				return errors.New("counter of a root is corrupt")
			}
			rc.Next = uint64(next)
			out = append(out, rc)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, pgErr("list", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// Restore raises the counter, inserts the free names, then reads back the
// others to tell Unchanged from Conflict, in one transaction. A name that
// was taken at the insert and is gone at the read (forgotten meanwhile by
// another connection) is inserted again, up to a few rounds.
func (s *pgStore) Restore(ctx context.Context, family, root string, rows []Row, next uint64) ([]Outcome, error) {
	if next > math.MaxInt64 {
		return nil, pgErr("restore", errors.New("counter beyond bigint"))
	}
	var out []Outcome
	err := s.pool.inTx(ctx, func(tx pgx.Tx) error {
		out = make([]Outcome, len(rows))
		if _, err := tx.Exec(ctx, pgRaiseCounter, family, root, int64(next)); err != nil {
			return err
		}
		index := make(map[string]int, len(rows))
		todo := make([]int, len(rows))
		for i, r := range rows {
			index[r.Name], todo[i] = i, i
		}
		for round := 0; len(todo) > 0; round++ {
			if round == 3 {
				return errors.New("restored names keep being forgotten by another connection")
			}
			names, specs := make([]string, len(todo)), make([][]byte, len(todo))
			for j, i := range todo {
				names[j], specs[j] = rows[i].Name, rows[i].Spec
			}
			added, err := queryNames(ctx, tx, pgRestoreInsert, family, root, names, specs)
			if err != nil {
				return err
			}
			var taken []string
			for _, n := range names {
				if added[n] {
					out[index[n]] = Added
				} else {
					taken = append(taken, n)
				}
			}
			todo = todo[:0]
			if len(taken) == 0 {
				break
			}
			stored := map[string][]byte{}
			res, err := tx.Query(ctx, `SELECT name, spec FROM muster_fleet_specs
				WHERE family = $1 AND root = $2 AND name = ANY($3::text[])`, family, root, taken)
			if err != nil {
				return err
			}
			var name string
			var spec []byte
			if _, err := pgx.ForEachRow(res, []any{&name, &spec}, func() error {
				stored[name] = spec
				return nil
			}); err != nil {
				return err
			}
			for _, n := range taken {
				switch v, ok := stored[n]; {
				case !ok:
					todo = append(todo, index[n])
				case bytes.Equal(v, rows[index[n]].Spec):
					out[index[n]] = Unchanged
				default:
					out[index[n]] = Conflict
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, pgErr("restore", err)
	}
	return out, nil
}
