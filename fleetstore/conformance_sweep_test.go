package fleetstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/musterhq/muster"
)

// The sweep cases of the conformance suite (see TestConformance).

const topicSchema = `{
	"type": "object",
	"required": ["topic"],
	"properties": {"topic": {"type": "string"}}
}`

func testSweep(t *testing.T, st storage) {
	f := New(st.open())
	specs := []struct{ spec, want string }{
		{`{"topic":"a"}`, "kept"},
		{`{"topic":1}`, "dropped"},
		{`"just a string"`, "dropped"},
		{` {"topic" : "b", "extra": [1,2]} `, "kept"},
		{`{}`, "dropped"},
	}
	var wantKept []Row
	wantDropped := []string{}
	for _, s := range specs {
		name := mustRegister(t, f, fam, root, "repo", s.spec)
		if s.want == "kept" {
			wantKept = append(wantKept, Row{Name: name, Spec: []byte(s.spec)})
		} else {
			wantDropped = append(wantDropped, name)
		}
	}
	other := mustRegister(t, f, fam, "monitors/other", "repo", `{}`) // fails, but another root
	acme := mustRegister(t, f, "acme", root, "repo", `{}`)           // fails, but another family

	for _, bad := range []struct {
		name, schema string
		want         muster.Code
	}{
		{"NotJSON", `{`, muster.CodeInvalidRequest},
		{"NotASchema", `{"type": 12}`, muster.CodeInvalidRequest},
		{"FileRef", `{"$ref": "file:///etc/passwd"}`, muster.CodeInvalidRequest},
		{"RemoteRef", `{"$ref": "https://example.com/schema.json"}`, muster.CodeInvalidRequest},
		{"TooLarge", `{"description": "` + strings.Repeat("x", MaxSchemaBytes) + `"}`, muster.CodePayloadTooLarge},
	} {
		t.Run(bad.name, func(t *testing.T) {
			_, err := f.Sweep(ctx, fam, root, []byte(bad.schema))
			wantCode(t, err, bad.want)
		})
	}
	if got := listAll(t, f, fam, root, 0); len(got) != len(specs) {
		t.Fatalf("refused sweeps deleted rows: %d left of %d", len(got), len(specs))
	}

	res, err := f.Sweep(ctx, fam, root, []byte(topicSchema))
	must(t, err)
	if !slices.Equal(res.Dropped, wantDropped) {
		t.Errorf("dropped = %v, want %v", res.Dropped, wantDropped)
	}
	if !slices.EqualFunc(res.Kept, wantKept, rowEqual) {
		t.Errorf("kept = %v, want %v", names(res.Kept), names(wantKept))
	}
	if got := listAll(t, f, fam, root, 0); !slices.EqualFunc(got, wantKept, rowEqual) {
		t.Errorf("after sweep Desired = %v, want %v", names(got), names(wantKept))
	}
	for _, c := range []struct{ family, root, name string }{{fam, "monitors/other", other}, {"acme", root, acme}} {
		if _, err := f.Get(ctx, c.family, c.root, c.name); err != nil {
			t.Errorf("sweep reached %s/%s: %v", c.family, c.root, err)
		}
	}

	again, err := f.Sweep(ctx, fam, root, []byte(topicSchema))
	must(t, err)
	if again.Dropped == nil || len(again.Dropped) != 0 || !slices.EqualFunc(again.Kept, wantKept, rowEqual) {
		t.Errorf("second sweep = %v / %v, want the same kept and nothing dropped", names(again.Kept), again.Dropped)
	}
	empty, err := f.Sweep(ctx, fam, "never/written", []byte(`false`))
	must(t, err)
	if empty.Kept == nil || empty.Dropped == nil || len(empty.Kept)+len(empty.Dropped) != 0 {
		t.Errorf("sweep of an empty root = %#v, want two empty non-nil lists", empty)
	}
}

func rowEqual(a, b Row) bool { return a.Name == b.Name && bytes.Equal(a.Spec, b.Spec) }

// withListPage lowers the page size Fleet uses internally, so that a few rows
// span several pages.
func withListPage(t *testing.T, n int) {
	oldList, oldSweep := listPage, sweepPage
	listPage, sweepPage = n, n
	t.Cleanup(func() { listPage, sweepPage = oldList, oldSweep })
}

func testSweepManyPages(t *testing.T, st storage) {
	withListPage(t, 3)
	f := New(st.open())
	var wantKept, wantDropped []string
	for i := range 20 {
		spec := `{"topic":"t"}`
		if i%3 == 0 {
			spec = `{"topic":null}`
		}
		name := mustRegister(t, f, fam, root, "m", spec)
		if i%3 == 0 {
			wantDropped = append(wantDropped, name)
		} else {
			wantKept = append(wantKept, name)
		}
	}
	slices.Sort(wantKept)
	slices.Sort(wantDropped)
	res, err := f.Sweep(ctx, fam, root, []byte(topicSchema))
	must(t, err)
	if got := names(res.Kept); !slices.Equal(got, wantKept) {
		t.Errorf("kept = %v, want %v", got, wantKept)
	}
	if !slices.Equal(res.Dropped, wantDropped) {
		t.Errorf("dropped = %v, want %v", res.Dropped, wantDropped)
	}
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, wantKept) {
		t.Errorf("after sweep = %v, want %v", got, wantKept)
	}
}

// testSweepSkipsUnjudged registers failing specs while a sweep is judging its
// first page: those that sort before the sweep's position are never judged and
// must survive; those after it are judged and dropped like any other.
func testSweepSkipsUnjudged(t *testing.T, st storage) {
	withListPage(t, 2)
	f := New(st.open())
	const bad = `{"topic":false}`
	for range 4 {
		mustRegister(t, f, fam, root, "m", bad) // m-1 … m-4
	}
	schema, err := CompileSchema([]byte(topicSchema))
	must(t, err)

	var (
		once          sync.Once
		judged        = map[string]bool{}
		before, after []string
	)
	res, err := f.SweepFunc(ctx, fam, root, func(r Row) (bool, error) {
		judged[r.Name] = true
		once.Do(func() {
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range 6 {
				wg.Go(func() {
					kind := "a" // sorts before every m-: never judged by this sweep
					if i%2 == 1 {
						kind = "z" // sorts after: judged on a later page
					}
					name := mustRegister(t, f, fam, root, kind, bad)
					mu.Lock()
					defer mu.Unlock()
					if kind == "a" {
						before = append(before, name)
					} else {
						after = append(after, name)
					}
				})
			}
			wg.Wait()
		})
		return schema.Judge(ctx, r.Spec)
	})
	must(t, err)
	for _, n := range res.Dropped {
		if !judged[n] {
			t.Errorf("dropped %s, which the sweep never judged", n)
		}
	}
	for _, n := range before {
		if judged[n] {
			t.Errorf("judged %s, registered behind the sweep's position", n)
		}
		if _, err := f.Get(ctx, fam, root, n); err != nil {
			t.Errorf("%s, registered during the sweep and never judged, is gone: %v", n, err)
		}
	}
	for _, n := range after {
		if !slices.Contains(res.Dropped, n) {
			t.Errorf("%s, registered ahead of the sweep, was not judged and dropped: %v", n, res.Dropped)
		}
	}
	if got := names(listAll(t, f, fam, root, 0)); !slices.Equal(got, slices.Sorted(slices.Values(before))) {
		t.Errorf("after sweep = %v, want exactly the unjudged %v", got, before)
	}
}

// testSweepRacesRegister runs a sweep while other goroutines register passing
// and failing specs, then checks every row against what the sweep reported.
func testSweepRacesRegister(t *testing.T, st storage) {
	withListPage(t, 7)
	f := New(st.open())
	const good, bad = `{"topic":"ok"}`, `{"topic":0}`
	specOf := map[string]string{}
	for i := range 30 {
		spec := []string{good, bad}[i%2]
		specOf[mustRegister(t, f, fam, root, "pre", spec)] = spec
	}
	preexisting := len(specOf)

	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				spec := []string{good, bad}[(w+i)%2]
				kind := []string{"a", "q", "z"}[i%3]
				name, err := f.Register(ctx, fam, root, kind, []byte(spec))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				specOf[name] = spec
				mu.Unlock()
			}
		})
	}
	res, err := f.Sweep(ctx, fam, root, []byte(topicSchema))
	close(stop)
	wg.Wait()
	must(t, err)

	dropped := map[string]bool{}
	for _, n := range res.Dropped {
		dropped[n] = true
		if specOf[n] != bad {
			t.Errorf("dropped %s whose spec %s passes", n, specOf[n])
		}
	}
	for _, r := range res.Kept {
		if specOf[r.Name] != good {
			t.Errorf("kept %s whose spec %s fails", r.Name, specOf[r.Name])
		}
	}
	judged := len(res.Kept) + len(res.Dropped)
	if judged < preexisting {
		t.Errorf("sweep judged %d specs, fewer than the %d present when it started", judged, preexisting)
	}
	left := map[string]bool{}
	for _, r := range listAll(t, f, fam, root, 0) {
		left[r.Name] = true
	}
	for name, spec := range specOf {
		if dropped[name] == left[name] {
			t.Errorf("%s (%s): dropped %v, still stored %v; want exactly one", name, spec, dropped[name], left[name])
		}
	}
	t.Logf("%d specs: %d judged, %d registered during the sweep", len(specOf), judged, len(specOf)-preexisting)
}

// A spec stored before register's shape limits existed (written here
// through the Store, under the Fleet's checks) is never shown to the
// schema: the sweep lists it as invalid with the limit it breaks, keeps it
// stored, and judges the others as usual. Register refuses the same spec.
func testSweepInvalidStored(t *testing.T, st storage) {
	store := st.open()
	f := New(store)
	deep := strings.Repeat("[", MaxSpecDepth+1) + strings.Repeat("]", MaxSpecDepth+1)
	for _, spec := range []string{deep, `{"n":[1e1000000]}`} {
		_, err := f.Register(ctx, fam, root, "old", []byte(spec))
		wantCode(t, err, muster.CodeInvalidRequest)
	}
	deepName, err := store.Register(ctx, fam, root, "old", []byte(deep), 0)
	must(t, err)
	bigName, err := store.Register(ctx, fam, root, "old", []byte(`{"n":[1e1000000]}`), 0)
	must(t, err)
	kept := mustRegister(t, f, fam, root, "new", `{"topic":"a"}`)
	dropped := mustRegister(t, f, fam, root, "new", `{}`)

	res, err := f.Sweep(ctx, fam, root, []byte(`{"required":["topic"]}`))
	must(t, err)
	if len(res.Kept) != 1 || res.Kept[0].Name != kept || len(res.Dropped) != 1 || res.Dropped[0] != dropped {
		t.Fatalf("kept %v dropped %v", res.Kept, res.Dropped)
	}
	want := map[string]string{deepName: "(limit: spec depth)", bigName: "(limit: spec number)"}
	if len(res.Invalid) != len(want) {
		t.Fatalf("invalid = %+v, want %v", res.Invalid, want)
	}
	for _, iv := range res.Invalid {
		if !strings.Contains(iv.Reason, want[iv.Name]) {
			t.Errorf("%s: reason %q, want it to name %s", iv.Name, iv.Reason, want[iv.Name])
		}
	}
	if n := len(listAll(t, f, fam, root, 0)); n != 3 {
		t.Fatalf("%d rows stored after the sweep, want 3 (the invalid two and the kept one)", n)
	}
}

// KeptRows reads back exactly the kept names still stored, in order, a page
// at a time: a name forgotten since it was judged is skipped, and the walk
// stops after the last kept name.
func testKeptRows(t *testing.T, st storage) {
	withListPage(t, 2)
	f := New(st.open())
	var names []string
	for i := range 7 {
		names = append(names, mustRegister(t, f, fam, root, "k", fmt.Sprintf(`{"i":%d}`, i)))
	}
	must(t, f.Forget(ctx, fam, root, names[3]))
	kept := []string{names[1], names[3], names[4], names[5]}
	var got []string
	must(t, f.KeptRows(ctx, fam, root, kept, func(r Row) error {
		got = append(got, r.Name)
		return nil
	}))
	if want := []string{names[1], names[4], names[5]}; !slices.Equal(got, want) {
		t.Fatalf("KeptRows = %v, want %v", got, want)
	}
	stop := errors.New("stop")
	if err := f.KeptRows(ctx, fam, root, kept, func(Row) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
}
