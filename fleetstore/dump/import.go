package dump

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/musterhq/muster/fleetstore"
)

// Refusal is one line Import did not apply, by its number (from 1).
type Refusal struct {
	Line int
	Err  error
}

func (r Refusal) Error() string { return fmt.Sprintf("line %d: %v", r.Line, r.Err) }

// ErrConflict is the refusal of a spec line whose name the store holds with
// other bytes: the stored spec is kept.
var ErrConflict = errors.New("the name is stored with a different spec; kept the stored one")

// batchRows bounds the rows of one Restore (one transaction).
const batchRows = 256

// Import applies a dump to f: each spec line's spec stored under its name,
// each counter line's counter raised to (never lowered), and every root's
// counter past the numbers of its names. Lines are applied in runs of one
// root (one transaction per run of up to batchRows lines), so importing the
// same dump twice changes nothing the second time. A malformed line, or a
// name stored with other bytes (ErrConflict), is refused and reported to
// refused, and the rest goes on. The error is a failure of the input or of
// the store, which stops the import; what was applied before stays.
func Import(ctx context.Context, f *fleetstore.Fleet, r io.Reader, refused func(Refusal)) (Counts, error) {
	var n Counts
	b := batch{f: f, n: &n, refused: func(rf Refusal) { n.Refused++; refused(rf) }}
	br := bufio.NewReaderSize(r, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, long, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return n, err
		}
		if long {
			b.refused(Refusal{lineNo, lineErr("line longer than %d bytes", MaxLineBytes)})
		} else if len(bytes.TrimSpace(line)) > 0 {
			l, perr := ParseLine(line)
			if perr != nil {
				b.refused(Refusal{lineNo, perr})
			} else if ferr := b.add(ctx, lineNo, l); ferr != nil {
				return n, ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return n, b.flush(ctx)
		}
	}
}

// readLine reads one line without its newline (nor a '\r' before it). A
// line longer than MaxLineBytes is skipped to its end and reported long;
// the last line comes with io.EOF.
func readLine(br *bufio.Reader) (line []byte, long bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			line = append(line, chunk...)
			if len(line) > MaxLineBytes+2 {
				long, line = true, nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, false, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		return line, long, err
	}
}

// batch gathers consecutive lines of one root for one Restore.
type batch struct {
	f            *fleetstore.Fleet
	n            *Counts
	refused      func(Refusal)
	family, root string
	next         uint64
	rows         []fleetstore.Row
	lines        []int
	names        map[string]bool
	counterLines int
}

func (b *batch) add(ctx context.Context, lineNo int, l Line) error {
	if l.Family != b.family || l.Root != b.root || len(b.rows) == batchRows || b.names[l.Name] {
		if err := b.flush(ctx); err != nil {
			return err
		}
		b.family, b.root = l.Family, l.Root
	}
	if l.Name == "" {
		b.next = max(b.next, l.Counter)
		b.counterLines++
		return nil
	}
	if b.names == nil {
		b.names = map[string]bool{}
	}
	b.names[l.Name] = true
	b.rows = append(b.rows, fleetstore.Row{Name: l.Name, Spec: l.Spec})
	b.lines = append(b.lines, lineNo)
	return nil
}

func (b *batch) flush(ctx context.Context) error {
	if len(b.rows) == 0 && b.counterLines == 0 {
		return nil
	}
	out, err := b.f.Restore(ctx, b.family, b.root, b.rows, b.next)
	if err != nil {
		return fmt.Errorf("line %d: %w", b.firstLine(), err)
	}
	b.n.Roots += b.counterLines
	for i, o := range out {
		switch o {
		case fleetstore.Added:
			b.n.Added++
		case fleetstore.Unchanged:
			b.n.Unchanged++
		case fleetstore.Conflict:
			b.refused(Refusal{b.lines[i], ErrConflict})
		}
	}
	b.rows, b.lines, b.next, b.counterLines = b.rows[:0], b.lines[:0], 0, 0
	clear(b.names)
	return nil
}

func (b *batch) firstLine() int {
	if len(b.lines) > 0 {
		return b.lines[0]
	}
	return 0
}
