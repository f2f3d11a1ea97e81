package dump

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/fleetstore"
	"github.com/musterhq/muster/tests/pgtest"
)

var ctx = context.Background()

func openBolt(tb testing.TB, path string) *fleetstore.Fleet {
	tb.Helper()
	s, err := fleetstore.OpenBolt(path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return fleetstore.New(s)
}

func openPostgres(tb testing.TB) *fleetstore.Fleet {
	tb.Helper()
	s, err := fleetstore.OpenPostgres(ctx, pgtest.Schema(tb, "dump"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return fleetstore.New(s)
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// fill registers a desired set with what a dump must carry: several
// families and roots, nested roots, kinds sharing a counter, forgotten
// names (gaps, and a root left empty), specs of every form.
func fill(tb testing.TB, f *fleetstore.Fleet) {
	tb.Helper()
	reg := func(family, root, kind, spec string) string {
		name, err := f.Register(ctx, family, root, kind, []byte(spec))
		must(tb, err)
		return name
	}
	for i, s := range specs {
		reg("default", "monitors", []string{"repo", "reminder", "repo-x"}[i%3], s.spec)
	}
	must(tb, f.Forget(ctx, "default", "monitors", "repo-1"))
	last := reg("default", "monitors", "repo", `{"last":true}`)
	must(tb, f.Forget(ctx, "default", "monitors", last)) // the counter is past every stored name
	reg("default", "monitors/inst-7", "repo", `1`)
	reg("acmé", "monitors", "repo", `{"tenant":"acmé"}`)
	gone := reg("acmé", "empty", "k", `1`)
	must(tb, f.Forget(ctx, "acmé", "empty", gone))
	for i := range 2*fleetstore.MaxPageSize + 3 { // more than a page of specs
		reg("big", "a/b/c", "w", fmt.Sprintf(`{"i":%d}`, i))
	}
}

func export(tb testing.TB, f *fleetstore.Fleet, filter Filter) []byte {
	tb.Helper()
	var b bytes.Buffer
	_, err := Export(ctx, f, &b, filter)
	must(tb, err)
	return b.Bytes()
}

func importAll(tb testing.TB, f *fleetstore.Fleet, dump []byte) (Counts, []Refusal) {
	tb.Helper()
	var refused []Refusal
	n, err := Import(ctx, f, bytes.NewReader(dump), func(r Refusal) { refused = append(refused, r) })
	must(tb, err)
	return n, refused
}

// listing is every root's counter and rows, read through the Fleet API.
func listing(tb testing.TB, f *fleetstore.Fleet) string {
	tb.Helper()
	var b strings.Builder
	af, ar := "", ""
	for {
		roots, more, err := f.Roots(ctx, af, ar, 0)
		must(tb, err)
		for _, rc := range roots {
			fmt.Fprintf(&b, "%q %q next %d\n", rc.Family, rc.Root, rc.Next)
			after := ""
			for {
				rows, more, err := f.Desired(ctx, rc.Family, rc.Root, after, 0)
				must(tb, err)
				for _, r := range rows {
					fmt.Fprintf(&b, "  %s %q\n", r.Name, r.Spec)
					after = r.Name
				}
				if !more {
					break
				}
			}
		}
		if !more {
			return b.String()
		}
		af, ar = roots[len(roots)-1].Family, roots[len(roots)-1].Root
	}
}

// TestBoltPostgresBolt exports a bbolt store, imports it into PostgreSQL,
// exports that and imports it into a second bbolt file: the listings
// (counters, names, spec bytes) and the dumps are identical at every step,
// and a register after the move continues each root's counter.
func TestBoltPostgresBolt(t *testing.T) {
	dir := t.TempDir()
	src := openBolt(t, filepath.Join(dir, "src", fleetstore.BoltFileName))
	fill(t, src)
	want := listing(t, src)
	d1 := export(t, src, Filter{})

	pg := openPostgres(t)
	n, refused := importAll(t, pg, d1)
	if len(refused) > 0 {
		t.Fatalf("import into PostgreSQL refused %v", refused)
	}
	if n.Roots != 5 || n.Added != len(specs)-1+1+1+2*fleetstore.MaxPageSize+3 || n.Unchanged != 0 {
		t.Errorf("import into PostgreSQL: %+v", n)
	}
	if got := listing(t, pg); got != want {
		t.Fatalf("PostgreSQL after import:\n%s\nwant (bbolt):\n%s", got, want)
	}
	d2 := export(t, pg, Filter{})
	if !bytes.Equal(d1, d2) {
		t.Fatalf("the PostgreSQL export differs from the bbolt export")
	}

	dst := openBolt(t, filepath.Join(dir, "dst", fleetstore.BoltFileName))
	if _, refused := importAll(t, dst, d2); len(refused) > 0 {
		t.Fatalf("import into bbolt refused %v", refused)
	}
	if got := listing(t, dst); got != want {
		t.Fatalf("bbolt after the round trip:\n%s\nwant:\n%s", got, want)
	}
	if d3 := export(t, dst, Filter{}); !bytes.Equal(d1, d3) {
		t.Fatalf("the round-trip export differs from the first")
	}

	// Importing again changes nothing, on either backend.
	for name, f := range map[string]*fleetstore.Fleet{"postgres": pg, "bolt": dst} {
		n, refused := importAll(t, f, d1)
		if len(refused) > 0 || n.Added != 0 || n.Unchanged == 0 {
			t.Errorf("%s: second import %+v, refused %v; want nothing added", name, n, refused)
		}
		if got := listing(t, f); got != want {
			t.Errorf("%s: a second import changed the listing", name)
		}
	}
	// The counters came along: no name is minted twice, not even a
	// forgotten one.
	for name, f := range map[string]*fleetstore.Fleet{"bolt-src": src, "postgres": pg, "bolt": dst} {
		got, err := f.Register(ctx, "default", "monitors", "repo", []byte(`{}`))
		must(t, err)
		if want := fmt.Sprintf("repo-%d", len(specs)+2); got != want {
			t.Errorf("%s: Register after the move = %s, want %s", name, got, want)
		}
		got, err = f.Register(ctx, "acmé", "empty", "k", []byte(`{}`))
		must(t, err)
		if got != "k-2" {
			t.Errorf("%s: Register on the emptied root = %s, want k-2", name, got)
		}
	}
}

func TestExportFilter(t *testing.T) {
	f := openBolt(t, filepath.Join(t.TempDir(), fleetstore.BoltFileName))
	fill(t, f)
	all := export(t, f, Filter{})
	for _, c := range []Filter{
		{Family: "default"}, {Root: "monitors"}, {Family: "acmé", Root: "monitors"},
		{Family: "nobody"}, {Family: "default", Root: "monitors/inst-7"},
	} {
		var want []byte
		for line := range bytes.Lines(all) {
			l, err := ParseLine(bytes.TrimSuffix(line, []byte("\n")))
			must(t, err)
			if (c.Family == "" || l.Family == c.Family) && (c.Root == "" || l.Root == c.Root) {
				want = append(want, line...)
			}
		}
		if got := export(t, f, c); !bytes.Equal(got, want) {
			t.Errorf("export %+v:\n%s\nwant:\n%s", c, got, want)
		}
	}
}

// TestImportRefusals: refused lines are reported by number, the others
// applied; a conflicting name keeps its stored spec.
func TestImportRefusals(t *testing.T) {
	f := openBolt(t, filepath.Join(t.TempDir(), fleetstore.BoltFileName))
	_, err := f.Register(ctx, "f", "r", "k", []byte(`"stored"`))
	must(t, err)
	dump := strings.Join([]string{
		`{"family":"f","root":"r","counter":5}`,                            // 1
		`{"family":"f","root":"r","name":"k-1","kind":"k","spec":"other"}`, // 2: conflict
		`{"family":"f","root":"r","name":"k-2","kind":"k","spec":2}`,       // 3
		`not json`, // 4
		``,         // 5: blank, skipped
		`{"family":"f","root":"r","name":"k-3","kind":"k","spec":{"a":}}`,                                      // 6
		`{"family":"f","root":"r","name":"k-3","kind":"k","spec":3}`,                                           // 7
		`{"family":"f","root":"r","name":"k-3","kind":"k","spec":3}`,                                           // 8: same again: unchanged
		`{"family":"f","root":"r","name":"k-3","kind":"k","spec":4}`,                                           // 9: conflict with line 7
		`{"family":"f","root":"r","name":"k-4","kind":"k","spec":"` + strings.Repeat("x", MaxLineBytes) + `"}`, // 10: too long
		"{\"family\":\"g\",\"root\":\"r\",\"name\":\"j-9\",\"kind\":\"j\",\"spec\":9}\r",                       // 11: CRLF
	}, "\n")
	n, refused := importAll(t, f, []byte(dump))
	var lines []int
	for _, r := range refused {
		lines = append(lines, r.Line)
	}
	slices.Sort(lines)
	if !slices.Equal(lines, []int{2, 4, 6, 9, 10}) {
		t.Fatalf("refused lines %v (%v), want 2 4 6 9 10", lines, refused)
	}
	if n.Added != 3 || n.Unchanged != 1 || n.Refused != 5 || n.Roots != 1 {
		t.Errorf("counts %+v", n)
	}
	for name, want := range map[string]string{"k-1": `"stored"`, "k-2": `2`, "k-3": `3`} {
		r, err := f.Get(ctx, "f", "r", name)
		must(t, err)
		if string(r.Spec) != want {
			t.Errorf("%s = %s, want %s", name, r.Spec, want)
		}
	}
	if name, _ := f.Register(ctx, "f", "r", "k", []byte(`0`)); name != "k-5" {
		t.Errorf("Register after import = %s, want k-5 (the dump's counter)", name)
	}
	if name, _ := f.Register(ctx, "g", "r", "j", []byte(`0`)); name != "j-10" {
		t.Errorf("Register on a root restored without a counter line = %s, want j-10", name)
	}
}
