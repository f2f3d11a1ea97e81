package fleetstore

import (
	"context"
	"errors"
	"github.com/musterhq/muster"
	"slices"
	"strings"
	"testing"
)

// The compare-and-delete cases of the conformance suite (see TestConformance):
// a sweep deletes a spec only while it is stored with exactly the bytes the
// sweep judged, and any failure stops it with nothing more deleted.

// testDrop exercises Store.Drop directly.
func testDrop(t *testing.T, st storage) {
	s := st.open()
	f := New(s)
	const spec = `{"topic":"t"}`
	a := mustRegister(t, f, fam, root, "a", spec)
	b := mustRegister(t, f, fam, root, "b", spec)
	c := mustRegister(t, f, fam, root, "c", spec)
	d := mustRegister(t, f, fam, root, "d", spec)
	other := mustRegister(t, f, fam, "monitors/other", "a", spec)
	row := func(name, spec string) Row { return Row{Name: name, Spec: []byte(spec)} }

	// One row read with other bytes than those stored: nothing is deleted.
	_, err := s.Drop(ctx, fam, root, []Row{row(a, spec), row(b, `{"topic":`), row(c, spec)})
	wantCode(t, err, muster.CodeInternal)
	if !errors.Is(err, ErrSpecChanged) {
		t.Fatalf("Drop of a changed row: %v, want ErrSpecChanged", err)
	}
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, []string{a, b, c, d}) {
		t.Fatalf("a refused Drop deleted rows: %v left", got)
	}
	// The same bytes with one byte more (a longer read) do not match either.
	_, err = s.Drop(ctx, fam, root, []Row{row(a, spec+" ")})
	if !errors.Is(err, ErrSpecChanged) {
		t.Fatalf("Drop with a trailing byte: %v, want ErrSpecChanged", err)
	}

	// Matching rows go; a name no longer stored is skipped, not reported.
	got, err := s.Drop(ctx, fam, root, []Row{row(c, spec), row("a-999", spec), row(a, spec)})
	must(t, err)
	if !slices.Equal(got, []string{c, a}) {
		t.Errorf("Drop returned %v, want [%s %s] (judged order, absent name skipped)", got, c, a)
	}
	if left := names(listAll(t, f, fam, root, 0)); !slices.Equal(left, []string{b, d}) {
		t.Errorf("after Drop: %v, want [%s %s]", left, b, d)
	}
	if _, err := f.Get(ctx, fam, "monitors/other", other); err != nil {
		t.Errorf("Drop reached another root: %v", err)
	}
	// Another family's or root's rows of the same name are never matched.
	got, err = s.Drop(ctx, "acme", root, []Row{row(b, spec)})
	must(t, err)
	got2, err := s.Drop(ctx, fam, "never/written", []Row{row(b, spec)})
	must(t, err)
	if len(got)+len(got2) != 0 {
		t.Errorf("Drop in another family/root deleted %v %v", got, got2)
	}
	if empty, err := s.Drop(ctx, fam, root, nil); err != nil || empty == nil || len(empty) != 0 {
		t.Errorf("Drop of nothing = %#v, %v; want an empty non-nil list", empty, err)
	}
}

// tornStore hands out, for one name, other bytes than those stored: what a
// wrong read (a torn or mixed-up response over a cut connection) would give
// a sweep. Everything else passes through.
type tornStore struct {
	Store
	name string
	read []byte
}

func (s *tornStore) Desired(ctx context.Context, family, root, after string, limit int) ([]Row, bool, error) {
	rows, more, err := s.Store.Desired(ctx, family, root, after, limit)
	for i := range rows {
		if rows[i].Name == s.name {
			rows[i].Spec = s.read
		}
	}
	return rows, more, err
}

// testSweepTornRead: a sweep handed other bytes than those stored for one
// spec that passes must not drop it, whatever the bytes it was handed; it
// deletes nothing of that page, stops with ErrSpecChanged, and leaves the
// pages after it alone. The pages before stay swept.
func testSweepTornRead(t *testing.T, st storage) {
	withListPage(t, 3)
	inner := st.open()
	f := New(inner)
	for _, tc := range []struct{ name, read string }{
		{"Truncated", `{"topic":`},
		{"Empty", ``},
		{"OtherJSON", `{"topic":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := "torn/" + strings.ToLower(tc.name)
			const good, bad = `{"topic":"t"}`, `{"topic":0}`
			// k1..k9 sort in kind order; pages of 3: [k1 k2 k3] [k4 k5 k6] [k7 k8 k9].
			var all []string
			for i, spec := range []string{good, bad, good, bad, good, good, bad, good, good} {
				all = append(all, mustRegister(t, f, fam, root, "k"+string(rune('1'+i)), spec))
			}
			torn := all[4] // k5: stored good, read as tc.read
			sf := New(&tornStore{Store: inner, name: torn, read: []byte(tc.read)})
			res, err := sf.Sweep(ctx, fam, root, []byte(topicSchema))
			wantCode(t, err, muster.CodeInternal)
			if !errors.Is(err, ErrSpecChanged) {
				t.Fatalf("sweep over a torn read: %v, want ErrSpecChanged", err)
			}
			if len(res.Kept)+len(res.Dropped) != 0 {
				t.Errorf("a failed sweep reported %v / %v", names(res.Kept), res.Dropped)
			}
			want := slices.Delete(slices.Clone(all), 1, 2) // k2 dropped with page 1; nothing after
			if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, want) {
				t.Errorf("after the sweep: %v, want %v (%s must survive)", got, want, torn)
			}
		})
	}
}

// failingStore fails Desired after ok calls, and Drop always when dropFails.
type failingStore struct {
	Store
	ok        int
	dropFails bool
}

var errInjected = errors.New("injected store failure")

func (s *failingStore) Desired(ctx context.Context, family, root, after string, limit int) ([]Row, bool, error) {
	if s.ok == 0 {
		return nil, false, backendErr("list", errInjected, true)
	}
	s.ok--
	return s.Store.Desired(ctx, family, root, after, limit)
}

func (s *failingStore) Drop(ctx context.Context, family, root string, judged []Row) ([]string, error) {
	if s.dropFails {
		return nil, backendErr("sweep", errInjected, true)
	}
	return s.Store.Drop(ctx, family, root, judged)
}

// testSweepStoreFails: a read or a delete that fails stops the sweep with a
// BackendError, an empty result and nothing more deleted; a cancelled
// context stops it as unavailable.
func testSweepStoreFails(t *testing.T, st storage) {
	withListPage(t, 2)
	inner := st.open()
	f := New(inner)
	const bad = `{"topic":0}`
	var all []string
	for i := range 6 {
		all = append(all, mustRegister(t, f, fam, root, "k"+string(rune('1'+i)), bad))
	}
	for _, tc := range []struct {
		name string
		s    *failingStore
		left []string
	}{
		{"ReadFailsOnPage2", &failingStore{Store: inner, ok: 1}, all[2:]},
		{"DropFails", &failingStore{Store: inner, ok: 100, dropFails: true}, all[2:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := New(tc.s).Sweep(ctx, fam, root, []byte(topicSchema))
			wantCode(t, err, muster.CodeUnavailable)
			var be *BackendError
			if !errors.As(err, &be) || !errors.Is(err, errInjected) {
				t.Fatalf("err = %v (%T), want a BackendError caused by the injected failure", err, err)
			}
			if len(res.Kept)+len(res.Dropped) != 0 {
				t.Errorf("a failed sweep reported %v / %v", names(res.Kept), res.Dropped)
			}
			if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, tc.left) {
				t.Errorf("after the failed sweep: %v, want %v", got, tc.left)
			}
		})
	}
	t.Run("Cancelled", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		n := 0
		_, err := f.SweepFunc(c, fam, root, func(Row) (bool, error) {
			if n++; n == 2 {
				cancel()
				return false, c.Err()
			}
			return false, nil
		})
		wantCode(t, err, muster.CodeUnavailable)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled underneath", err)
		}
		if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, all[2:]) {
			t.Errorf("a cancelled sweep deleted: %v left, want %v", got, all[2:])
		}
	})
}

// testSweepForgottenMeanwhile: a failing spec forgotten between its judgement
// and the delete is not reported dropped (this sweep did not delete it).
func testSweepForgottenMeanwhile(t *testing.T, st storage) {
	f := New(st.open())
	const bad = `{"topic":0}`
	a := mustRegister(t, f, fam, root, "a", bad)
	b := mustRegister(t, f, fam, root, "b", bad)
	res, err := f.SweepFunc(ctx, fam, root, func(r Row) (bool, error) {
		if r.Name == a {
			must(t, f.Forget(ctx, fam, root, a))
		}
		return false, nil
	})
	must(t, err)
	if !slices.Equal(res.Dropped, []string{b}) {
		t.Errorf("dropped = %v, want [%s]: %s was forgotten, not dropped", res.Dropped, b, a)
	}
}
