package fleetstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

func rowsOf(kv ...string) []Row {
	var out []Row
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Row{Name: kv[i], Spec: []byte(kv[i+1])})
	}
	return out
}

func mustRestore(tb testing.TB, f *Fleet, family, root string, rows []Row, next uint64) []Outcome {
	tb.Helper()
	out, err := f.Restore(ctx, family, root, rows, next)
	if err != nil {
		tb.Fatalf("Restore(%s, %s): %v", family, root, err)
	}
	return out
}

// testRestore: rows keep their names and bytes; a second restore of the
// same rows changes nothing; a name stored with other bytes is kept and
// reported; the counter goes past every restored number.
func testRestore(t *testing.T, st storage) {
	f := New(st.open())
	rows := rowsOf("repo-3", ` {"a" : 1} `, "reminder-1", `"x"`, "repo-x-7", `[]`)
	got := mustRestore(t, f, fam, root, rows, 0)
	if !slices.Equal(got, []Outcome{Added, Added, Added}) {
		t.Fatalf("first restore = %v, want all added", got)
	}
	for _, r := range rows {
		row, err := f.Get(ctx, fam, root, r.Name)
		must(t, err)
		if string(row.Spec) != string(r.Spec) {
			t.Errorf("%s = %q, want the bytes restored %q", r.Name, row.Spec, r.Spec)
		}
	}
	if got := mustRestore(t, f, fam, root, rows, 0); !slices.Equal(got, []Outcome{Unchanged, Unchanged, Unchanged}) {
		t.Fatalf("same restore again = %v, want all unchanged", got)
	}
	mixed := rowsOf("repo-3", `{"a":1}`, "repo-9", `9`, "reminder-1", `"x"`)
	if got := mustRestore(t, f, fam, root, mixed, 0); !slices.Equal(got, []Outcome{Conflict, Added, Unchanged}) {
		t.Fatalf("mixed restore = %v, want conflict, added, unchanged", got)
	}
	if row, _ := f.Get(ctx, fam, root, "repo-3"); string(row.Spec) != ` {"a" : 1} ` {
		t.Fatalf("a conflicting restore overwrote repo-3 with %q", row.Spec)
	}
	// The counter is past repo-9: the next register mints 10.
	if name := mustRegister(t, f, fam, root, "repo", `{}`); name != "repo-10" {
		t.Fatalf("Register after restoring up to repo-9 = %s, want repo-10", name)
	}
	want := []string{"reminder-1", "repo-10", "repo-3", "repo-9", "repo-x-7"}
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, want) {
		t.Fatalf("Desired = %v, want %v", got, want)
	}
}

// testRestoreCounter: the counter given is kept when above the names (a
// forgotten name is not minted again), and a restore never lowers it.
func testRestoreCounter(t *testing.T, st storage) {
	s := st.open()
	f := New(s)
	mustRestore(t, f, fam, root, rowsOf("repo-2", `2`), 50)
	if name := mustRegister(t, f, fam, root, "repo", `{}`); name != "repo-50" {
		t.Fatalf("Register after a restore with counter 50 = %s, want repo-50", name)
	}
	mustRestore(t, f, fam, root, rowsOf("repo-2", `2`), 3) // lower: ignored
	mustRestore(t, f, fam, root, nil, 7)
	if name := mustRegister(t, f, fam, root, "repo", `{}`); name != "repo-51" {
		t.Fatalf("Register after lower counters = %s, want repo-51", name)
	}
	// A counter alone writes the root; nothing at all leaves it unwritten.
	mustRestore(t, f, fam, "empty/counted", nil, 12)
	mustRestore(t, f, fam, "never/written", nil, 0)
	must(t, s.Close())
	f = New(st.open()) // a restart
	if name := mustRegister(t, f, fam, "empty/counted", "k", `{}`); name != "k-12" {
		t.Fatalf("Register on a root restored with counter 12 = %s, want k-12", name)
	}
	roots := listRoots(t, f)
	for _, r := range roots {
		if r.Root == "never/written" {
			t.Fatalf("a restore of nothing wrote the root: %v", roots)
		}
	}
	// The largest counter.
	mustRestore(t, f, fam, "big", rowsOf(fmt.Sprintf("k-%d", uint64(MaxCounter-1)), `1`), MaxCounter)
	_, err := f.Register(ctx, fam, "big", "k", []byte(`{}`))
	if muster.ErrorCode(err) != muster.CodeInternal {
		t.Fatalf("Register past the largest counter = %v, want internal (exhausted)", err)
	}
}

// testRestoreRefused: a malformed restore writes nothing.
func testRestoreRefused(t *testing.T, st storage) {
	f := New(st.open())
	cases := []struct {
		name string
		rows []Row
		next uint64
		want muster.Code
	}{
		{"NotMinted", rowsOf("repo", `1`), 0, muster.CodeInvalidName},
		{"LeadingZero", rowsOf("repo-01", `1`), 0, muster.CodeInvalidName},
		{"Zero", rowsOf("repo-0", `1`), 0, muster.CodeInvalidName},
		{"Upper", rowsOf("Repo-1", `1`), 0, muster.CodeInvalidName},
		{"NoKind", rowsOf("-1", `1`), 0, muster.CodeInvalidName},
		{"TooBig", rowsOf(fmt.Sprintf("k-%d", uint64(MaxCounter)), `1`), 0, muster.CodeInvalidName},
		{"BadSpec", rowsOf("repo-1", `{"a":`), 0, muster.CodeInvalidRequest},
		{"Twice", rowsOf("repo-1", `1`, "repo-1", `1`), 0, muster.CodeInvalidRequest},
		{"BigCounter", nil, MaxCounter + 1, muster.CodeInvalidRequest},
		{"LargeSpec", rowsOf("repo-1", `"`+strings.Repeat("x", MaxSpecBytes)+`"`), 0, muster.CodePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.Restore(ctx, fam, root, append(rowsOf("ok-1", `1`), c.rows...), c.next)
			wantCode(t, err, c.want)
		})
	}
	_, err := f.Restore(ctx, fam, "Bad", nil, 2)
	wantCode(t, err, muster.CodeInvalidRequest)
	if got := listRoots(t, f); len(got) != 0 {
		t.Fatalf("refused restores wrote %v", got)
	}
}

func listRoots(tb testing.TB, f *Fleet) []RootCounter {
	tb.Helper()
	var all []RootCounter
	af, ar := "", ""
	for {
		page, more, err := f.Roots(ctx, af, ar, 2)
		must(tb, err)
		all = append(all, page...)
		if !more {
			return all
		}
		last := page[len(page)-1]
		af, ar = last.Family, last.Root
	}
}

// testRoots: every written root once, in (family, root) byte order, with
// its counter, across pages; forgotten specs do not hide a root.
func testRoots(t *testing.T, st storage) {
	f := New(st.open())
	if got := listRoots(t, f); len(got) != 0 {
		t.Fatalf("roots of an empty store: %v", got)
	}
	mustRegister(t, f, "b", "x", "k", `1`)
	mustRegister(t, f, "a", "z", "k", `1`)
	mustRegister(t, f, "a", "z", "k", `1`)
	mustRegister(t, f, "a", "y/specs", "k", `1`)
	mustRegister(t, f, "a", "y", "k", `1`)
	mustRegister(t, f, "ab", "a", "k", `1`)
	n := mustRegister(t, f, "a", "gone", "k", `1`)
	must(t, f.Forget(ctx, "a", "gone", n))
	_, _, _ = f.Desired(ctx, "a", "read/only", "", 1) // a read writes nothing
	want := []RootCounter{
		{"a", "gone", 2}, {"a", "y", 2}, {"a", "y/specs", 2}, {"a", "z", 3},
		{"ab", "a", 2}, {"b", "x", 2},
	}
	if got := listRoots(t, f); !slices.Equal(got, want) {
		t.Fatalf("Roots = %v, want %v", got, want)
	}
	page, more, err := f.Roots(ctx, "a", "y/specs", 0)
	must(t, err)
	if !slices.Equal(page, want[3:]) || more {
		t.Fatalf("Roots after a/y/specs = %v %v, want %v", page, more, want[3:])
	}
	page, _, err = f.Roots(ctx, "a", "zz", 10) // an absent position
	must(t, err)
	if !slices.Equal(page, want[4:]) {
		t.Fatalf("Roots after a/zz = %v, want %v", page, want[4:])
	}
}
