package dump

import (
	"bufio"
	"context"
	"io"

	"github.com/musterhq/muster/fleetstore"
)

// Filter narrows an export: an empty field matches everything.
type Filter struct {
	Family string // this family only
	Root   string // this root only (exactly: not the roots under it)
}

func (f Filter) match(rc fleetstore.RootCounter) bool {
	return (f.Family == "" || rc.Family == f.Family) && (f.Root == "" || rc.Root == f.Root)
}

// Counts is what an export wrote or an import did.
type Counts struct {
	Roots     int `json:"roots"`     // counter lines
	Added     int `json:"added"`     // specs stored (import) or written (export)
	Unchanged int `json:"unchanged"` // specs already stored with the same bytes (import)
	Refused   int `json:"refused"`   // lines refused (import)
}

// Export writes the desired set of every root the filter matches, in
// (family, root) order, each root's counter line before its specs in name
// order. Two stores holding the same desired set export the same bytes.
// It pages through the store, so against a store in use it is not a
// snapshot (each page is consistent; see fleetstore's doc).
func Export(ctx context.Context, f *fleetstore.Fleet, w io.Writer, filter Filter) (Counts, error) {
	var n Counts
	bw := bufio.NewWriterSize(w, 256<<10)
	var buf []byte
	af, ar := filter.Family, ""
	for {
		roots, more, err := f.Roots(ctx, af, ar, fleetstore.MaxPageSize)
		if err != nil {
			return n, err
		}
		for _, rc := range roots {
			if filter.Family != "" && rc.Family != filter.Family {
				return n, bw.Flush()
			}
			if !filter.match(rc) {
				continue
			}
			n.Roots++
			buf = AppendLine(buf[:0], Line{Family: rc.Family, Root: rc.Root, Counter: rc.Next})
			if _, err := bw.Write(buf); err != nil {
				return n, err
			}
			if err := exportRoot(ctx, f, bw, rc, &n); err != nil {
				return n, err
			}
		}
		if !more || len(roots) == 0 {
			return n, bw.Flush()
		}
		last := roots[len(roots)-1]
		af, ar = last.Family, last.Root
	}
}

func exportRoot(ctx context.Context, f *fleetstore.Fleet, w io.Writer, rc fleetstore.RootCounter, n *Counts) error {
	var buf []byte
	after := ""
	for {
		rows, more, err := f.Desired(ctx, rc.Family, rc.Root, after, fleetstore.MaxPageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			kind, _, err := fleetstore.ParseMintedName(r.Name)
			if err != nil {
				return err // the store holds a name Register could not have minted
			}
			buf = AppendLine(buf[:0], Line{Family: rc.Family, Root: rc.Root, Name: r.Name, Kind: kind, Spec: r.Spec})
			if _, err := w.Write(buf); err != nil {
				return err
			}
			n.Added++
		}
		if !more || len(rows) == 0 {
			return nil
		}
		after = rows[len(rows)-1].Name
	}
}
