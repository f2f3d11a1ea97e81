package fleetstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/musterhq/muster"
)

// TestConformance runs the one conformance suite against every backend. Each
// case gets fresh storage; the cases speak only the Fleet API, so a backend
// passes by behaving, not by its layout.
func TestConformance(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "postgres" {
				PostgresURL(t) // fail (or skip) once, not in every case
			}
			testConformance(t, b.new)
		})
	}
}

func testConformance(t *testing.T, newStorage func(testing.TB) storage) {
	tests := []struct {
		name string
		fn   func(*testing.T, storage)
	}{
		{"RoundTrip", testRoundTrip},
		{"Numbering", testNumbering},
		{"NamesNeverReused", testNamesNeverReused},
		{"Ordering", testOrdering},
		{"Pagination", testPagination},
		{"Forget", testForget},
		{"Get", testGet},
		{"RefusedRequestsWriteNothing", testRefused},
		{"Sweep", testSweep},
		{"SweepManyPages", testSweepManyPages},
		{"SweepInvalidStored", testSweepInvalidStored},
		{"KeptRows", testKeptRows},
		{"SweepSkipsUnjudged", testSweepSkipsUnjudged},
		{"SweepRacesRegister", testSweepRacesRegister},
		{"Drop", testDrop},
		{"SweepTornRead", testSweepTornRead},
		{"SweepStoreFails", testSweepStoreFails},
		{"SweepForgottenMeanwhile", testSweepForgottenMeanwhile},
		{"ConcurrentRegister64", testConcurrentRegister64},
		{"SpecsPerRoot", testSpecsPerRoot},
		{"Closed", testClosed},
		{"Restore", testRestore},
		{"RestoreCounter", testRestoreCounter},
		{"RestoreRefused", testRestoreRefused},
		{"Roots", testRoots},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStorage(t)) })
	}
}

const (
	fam  = "default"
	root = "monitors"
)

var ctx = context.Background()

func mustRegister(tb testing.TB, f *Fleet, family, root, kind, spec string) string {
	tb.Helper()
	name, err := f.Register(ctx, family, root, kind, []byte(spec))
	if err != nil {
		tb.Fatalf("Register(%s, %s, %s): %v", family, root, kind, err)
	}
	return name
}

// listAll pages through root with the given page size.
func listAll(tb testing.TB, f *Fleet, family, root string, limit int) []Row {
	tb.Helper()
	var all []Row
	after := ""
	for {
		rows, more, err := f.Desired(ctx, family, root, after, limit)
		if err != nil {
			tb.Fatalf("Desired(after %q): %v", after, err)
		}
		all = append(all, rows...)
		if !more {
			return all
		}
		if len(rows) == 0 {
			tb.Fatalf("Desired(after %q) returned no rows but more", after)
		}
		after = rows[len(rows)-1].Name
	}
}

func names(rows []Row) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

func testRoundTrip(t *testing.T, st storage) {
	f := New(st.open())
	specs := []string{
		`{"topic":"golang/go","schedule":"@daily"}`,
		" {\"a\" : [1, 2.50, 1e3, 12345678901234567890123456789] }\n",
		`"h\u00e9llo wörld"`,
		`null`, `true`, `[]`, `0`, `-0.0`,
		`{"z":1,"a":2}`,
		`{"dup":1,"dup":2}`,
		`"` + strings.Repeat("x", MaxSpecBytes-2) + `"`,
	}
	var want []Row
	for _, spec := range specs {
		name := mustRegister(t, f, fam, root, "repo", spec)
		got, err := f.Get(ctx, fam, root, name)
		must(t, err)
		if got.Name != name || !bytes.Equal(got.Spec, []byte(spec)) {
			t.Errorf("Get(%s) = %s %.40q, want the spec as registered %.40q", name, got.Name, got.Spec, spec)
		}
		want = append(want, Row{Name: name, Spec: []byte(spec)})
	}
	slices.SortFunc(want, func(a, b Row) int { return strings.Compare(a.Name, b.Name) })
	got := listAll(t, f, fam, root, 0)
	if len(got) != len(want) {
		t.Fatalf("Desired lists %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Spec, want[i].Spec) {
			t.Errorf("row %d = %s %.40q, want %s %.40q", i, got[i].Name, got[i].Spec, want[i].Name, want[i].Spec)
		}
	}
}

func testNumbering(t *testing.T, st storage) {
	f := New(st.open())
	steps := []struct {
		family, root, kind string
		want               string
	}{
		{fam, root, "repo", "repo-1"},
		{fam, root, "reminder", "reminder-2"}, // one counter per root, shared by kinds
		{fam, root, "repo", "repo-3"},
		{fam, "monitors/inst-7", "repo", "repo-1"}, // a nested root is another root
		{fam, "monitors/specs", "repo", "repo-1"},  // even one named like the specs bucket
		{fam, "monitors/next_id", "repo", "repo-1"},
		{"acme", root, "repo", "repo-1"}, // another family never meets this one
		{"acme", root, "repo", "repo-2"},
		{fam, root, "reminder", "reminder-4"},
		{fam, "monitors/inst-7", "repo", "repo-2"},
	}
	for _, s := range steps {
		if got := mustRegister(t, f, s.family, s.root, s.kind, `{}`); got != s.want {
			t.Errorf("Register(%s, %s, %s) = %s, want %s", s.family, s.root, s.kind, got, s.want)
		}
	}
	lists := []struct {
		family, root string
		want         []string
	}{
		{fam, root, []string{"reminder-2", "reminder-4", "repo-1", "repo-3"}},
		{fam, "monitors/inst-7", []string{"repo-1", "repo-2"}},
		{fam, "monitors/specs", []string{"repo-1"}},
		{fam, "monitors/next_id", []string{"repo-1"}},
		{"acme", root, []string{"repo-1", "repo-2"}},
		{"acme", "monitors/inst-7", []string{}},
		{fam, "other", []string{}},
	}
	for _, l := range lists {
		if got := names(listAll(t, f, l.family, l.root, 0)); !slices.Equal(got, l.want) {
			t.Errorf("Desired(%s, %s) = %v, want %v", l.family, l.root, got, l.want)
		}
	}
}

func testNamesNeverReused(t *testing.T, st storage) {
	s := st.open()
	f := New(s)
	for _, want := range []string{"repo-1", "repo-2", "repo-3"} {
		if got := mustRegister(t, f, fam, root, "repo", `1`); got != want {
			t.Fatalf("Register = %s, want %s", got, want)
		}
	}
	must(t, f.Forget(ctx, fam, root, "repo-3"))
	if got := mustRegister(t, f, fam, root, "repo", `2`); got != "repo-4" {
		t.Fatalf("Register after forgetting the last name = %s, want repo-4", got)
	}
	for _, n := range []string{"repo-1", "repo-2", "repo-4"} {
		must(t, f.Forget(ctx, fam, root, n))
	}
	if got := mustRegister(t, f, fam, root, "repo", `3`); got != "repo-5" {
		t.Fatalf("Register after forgetting every name = %s, want repo-5", got)
	}
	must(t, s.Close())

	f = New(st.open()) // a restart
	if got := mustRegister(t, f, fam, root, "repo", `4`); got != "repo-6" {
		t.Fatalf("Register after a restart = %s, want repo-6", got)
	}
	row, err := f.Get(ctx, fam, root, "repo-5")
	must(t, err)
	if string(row.Spec) != `3` {
		t.Fatalf("repo-5 after a restart = %s, want 3", row.Spec)
	}
}

func testOrdering(t *testing.T, st storage) {
	f := New(st.open())
	var want []string
	for i := range 14 {
		kind := []string{"repo", "a", "z_z", "repo-x"}[i%4]
		want = append(want, mustRegister(t, f, fam, root, kind, `{}`))
	}
	slices.Sort(want) // byte order: repo-10 before repo-2, "repo-x-…" after "repo-…"
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, want) {
		t.Fatalf("Desired order = %v, want byte order %v", got, want)
	}
	if !slices.Contains(want, "repo-13") || slices.Index(want, "repo-13") > slices.Index(want, "repo-5") {
		t.Fatalf("expected repo-13 before repo-5 in %v", want)
	}
}

func testPagination(t *testing.T, st storage) {
	f := New(st.open())
	var all []string
	for range 25 {
		all = append(all, mustRegister(t, f, fam, root, "repo", `{}`))
	}
	slices.Sort(all)

	t.Run("Pages", func(t *testing.T) {
		after := ""
		for i, want := range []struct {
			n    int
			more bool
		}{{10, true}, {10, true}, {5, false}} {
			rows, more, err := f.Desired(ctx, fam, root, after, 10)
			must(t, err)
			if len(rows) != want.n || more != want.more {
				t.Fatalf("page %d: %d rows, more %v; want %d, %v", i, len(rows), more, want.n, want.more)
			}
			if got := names(rows); !slices.Equal(got, all[i*10:i*10+want.n]) {
				t.Fatalf("page %d = %v, want %v", i, got, all[i*10:i*10+want.n])
			}
			after = rows[len(rows)-1].Name
		}
	})
	t.Run("OneByOne", func(t *testing.T) {
		if got := names(listAll(t, f, fam, root, 1)); !slices.Equal(got, all) {
			t.Fatalf("pages of one = %v, want %v", got, all)
		}
	})
	t.Run("ExactlyFull", func(t *testing.T) {
		rows, more, err := f.Desired(ctx, fam, root, "", 25)
		must(t, err)
		if len(rows) != 25 || more {
			t.Fatalf("limit 25 of 25: %d rows, more %v; want 25, false", len(rows), more)
		}
	})
	t.Run("AfterAbsentName", func(t *testing.T) {
		rows, _, err := f.Desired(ctx, fam, root, "repo-15a", 100) // between repo-15 and repo-16
		must(t, err)
		want := all[slices.Index(all, "repo-16"):]
		if got := names(rows); !slices.Equal(got, want) {
			t.Fatalf("after repo-15a = %v, want %v", got, want)
		}
	})
	t.Run("AfterLast", func(t *testing.T) {
		rows, more, err := f.Desired(ctx, fam, root, all[len(all)-1], 10)
		must(t, err)
		if rows == nil || len(rows) != 0 || more {
			t.Fatalf("after the last name: %v, more %v; want an empty non-nil page", rows, more)
		}
	})
	t.Run("DefaultLimit", func(t *testing.T) {
		rows, more, err := f.Desired(ctx, fam, root, "", 0)
		must(t, err)
		if len(rows) != 25 || more {
			t.Fatalf("limit 0: %d rows, more %v; want 25, false", len(rows), more)
		}
	})
	t.Run("EmptyRoot", func(t *testing.T) {
		rows, more, err := f.Desired(ctx, fam, "never/written", "", 10)
		must(t, err)
		if rows == nil || len(rows) != 0 || more {
			t.Fatalf("empty root: %v, more %v; want an empty non-nil page", rows, more)
		}
	})
	t.Run("NegativeLimit", func(t *testing.T) {
		_, _, err := f.Desired(ctx, fam, root, "", -1)
		wantCode(t, err, muster.CodeInvalidRequest)
	})
	t.Run("IllegalAfter", func(t *testing.T) {
		_, _, err := f.Desired(ctx, fam, root, "Repo-1", 10)
		wantCode(t, err, muster.CodeInvalidCursor)
	})
}

// illegalNames are refused by Forget and Get, and never folded.
var illegalNames = []string{
	"Repo-1", "REPO-1", "", "repo 1", "repo/1", "../repo-1", "repo-1\x00", "repo-1\n",
	"répo-1", "repo.1", "*", strings.Repeat("a", MaxNameBytes+1),
}

func testForget(t *testing.T, st storage) {
	f := New(st.open())
	mustRegister(t, f, fam, root, "repo", `1`)
	mustRegister(t, f, fam, root, "repo", `2`)
	for _, name := range illegalNames {
		wantCode(t, f.Forget(ctx, fam, root, name), muster.CodeInvalidName)
	}
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, []string{"repo-1", "repo-2"}) {
		t.Fatalf("after refused forgets: %v, want nothing deleted (repo-1 not folded from Repo-1)", got)
	}

	must(t, f.Forget(ctx, fam, root, "repo-1"))
	_, err := f.Get(ctx, fam, root, "repo-1")
	wantCode(t, err, muster.CodeSpecNotFound)
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, []string{"repo-2"}) {
		t.Fatalf("after forget repo-1: %v, want [repo-2]", got)
	}
	for _, c := range []struct{ family, root, name string }{
		{fam, root, "repo-1"},    // again
		{fam, root, "never-9"},   // never existed
		{fam, "other", "repo-2"}, // root never written
		{"acme", root, "repo-2"}, // family never written
		{fam, root, maxLengthName()},
	} {
		if err := f.Forget(ctx, c.family, c.root, c.name); err != nil {
			t.Errorf("Forget(%s, %s, %s) = %v, want success", c.family, c.root, c.name, err)
		}
	}
	if _, err := f.Get(ctx, fam, root, "repo-2"); err != nil {
		t.Fatalf("repo-2 after unrelated forgets: %v", err)
	}
}

// maxLengthName is a legal name of exactly MaxNameBytes.
func maxLengthName() string { return strings.Repeat("k", MaxNameBytes) }

func testGet(t *testing.T, st storage) {
	f := New(st.open())
	name := mustRegister(t, f, fam, root, "repo", `{"a":1}`)
	if _, err := f.Get(ctx, fam, root, name); err != nil {
		t.Fatal(err)
	}
	_, err := f.Get(ctx, fam, root, "repo-99")
	wantCode(t, err, muster.CodeSpecNotFound)
	_, err = f.Get(ctx, "acme", root, name)
	wantCode(t, err, muster.CodeSpecNotFound)
	_, err = f.Get(ctx, fam, "monitors/x", name)
	wantCode(t, err, muster.CodeSpecNotFound)
	for _, n := range illegalNames {
		_, err := f.Get(ctx, fam, root, n)
		wantCode(t, err, muster.CodeInvalidName)
	}
}

func testRefused(t *testing.T, st storage) {
	f := New(st.open())
	cases := []struct {
		name               string
		family, root, kind string
		spec               string
		want               muster.Code
	}{
		{"EmptyRoot", fam, "", "repo", `{}`, muster.CodeInvalidRequest},
		{"UpperRoot", fam, "Monitors", "repo", `{}`, muster.CodeInvalidRequest},
		{"EmptySegment", fam, "a//b", "repo", `{}`, muster.CodeInvalidRequest},
		{"LeadingSlash", fam, "/a", "repo", `{}`, muster.CodeInvalidRequest},
		{"TrailingSlash", fam, "a/", "repo", `{}`, muster.CodeInvalidRequest},
		{"EscapedSlash", fam, "a%2Fb", "repo", `{}`, muster.CodeInvalidRequest},
		{"LongRoot", fam, strings.Repeat("a", muster.MaxFleetRootLen+1), "repo", `{}`, muster.CodeInvalidRequest},
		{"DeepRoot", fam, strings.Repeat("a/", muster.MaxFleetDepth) + "a", "repo", `{}`, muster.CodeInvalidRequest},
		{"EmptyKind", fam, root, "", `{}`, muster.CodeInvalidRequest},
		{"UpperKind", fam, root, "Repo", `{}`, muster.CodeInvalidRequest},
		{"SlashKind", fam, root, "re/po", `{}`, muster.CodeInvalidRequest},
		{"LongKind", fam, root, strings.Repeat("k", MaxKindBytes+1), `{}`, muster.CodeInvalidRequest},
		{"EmptyFamily", "", root, "repo", `{}`, muster.CodeInvalidRequest},
		{"EmptySpec", fam, root, "repo", ``, muster.CodeInvalidRequest},
		{"BrokenSpec", fam, root, "repo", `{"a":`, muster.CodeInvalidRequest},
		{"TwoValues", fam, root, "repo", `1 2`, muster.CodeInvalidRequest},
		{"TooLarge", fam, root, "repo", `"` + strings.Repeat("x", MaxSpecBytes-1) + `"`, muster.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.Register(ctx, c.family, c.root, c.kind, []byte(c.spec))
			wantCode(t, err, c.want)
		})
	}
	// Nothing was written and no number was spent.
	if got := names(listAll(t, f, fam, root, 0)); len(got) != 0 {
		t.Fatalf("refused registers stored %v", got)
	}
	if got := mustRegister(t, f, fam, root, "repo", `{}`); got != "repo-1" {
		t.Fatalf("first accepted Register = %s, want repo-1", got)
	}
	deepest := strings.Repeat("a/", muster.MaxFleetDepth-1) + "a"
	if got := mustRegister(t, f, fam, deepest, strings.Repeat("k", MaxKindBytes), `{}`); got != strings.Repeat("k", MaxKindBytes)+"-1" {
		t.Fatalf("Register at the limits = %s", got)
	}
}

func testConcurrentRegister64(t *testing.T, st storage) {
	f := New(st.open())
	const n = 64
	got := make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			name, err := f.Register(ctx, fam, root, "w", fmt.Appendf(nil, `{"i":%d}`, i))
			if err != nil {
				t.Error(err)
			}
			got[i] = name
		})
	}
	close(start)
	wg.Wait()
	want := make([]string, n)
	for i := range n {
		want[i] = fmt.Sprintf("w-%d", i+1)
	}
	slices.Sort(want)
	if s := slices.Sorted(slices.Values(got)); !slices.Equal(s, want) {
		t.Fatalf("64 concurrent registers minted %v, want each of w-1 … w-64 once", s)
	}
	rows := listAll(t, f, fam, root, 0)
	if !slices.Equal(names(rows), want) {
		t.Fatalf("Desired after 64 concurrent registers = %v", names(rows))
	}
	for i, name := range got {
		row, err := f.Get(ctx, fam, root, name)
		must(t, err)
		if w := fmt.Sprintf(`{"i":%d}`, i); string(row.Spec) != w {
			t.Errorf("%s = %s, want %s", name, row.Spec, w)
		}
	}
}

func testClosed(t *testing.T, st storage) {
	s := st.open()
	f := New(s)
	mustRegister(t, f, fam, root, "repo", `{}`)
	must(t, f.Close())
	_, err := f.Register(ctx, fam, root, "repo", []byte(`{}`))
	wantCode(t, err, muster.CodeUnavailable)
	_, _, err = f.Desired(ctx, fam, root, "", 0)
	wantCode(t, err, muster.CodeUnavailable)
	_, err = f.Get(ctx, fam, root, "repo-1")
	wantCode(t, err, muster.CodeUnavailable)
	wantCode(t, f.Forget(ctx, fam, root, "repo-1"), muster.CodeUnavailable)
}
