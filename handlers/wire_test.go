package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/musterhq/muster/api"
)

// TestChangeWireIsChangeEvent: changeWire is api.ChangeEvent without its
// subscription id, field for field (name, JSON name, type), so a change of
// the contract's ChangeEvent fails here until changeWire follows.
func TestChangeWireIsChangeEvent(t *testing.T) {
	fields := func(typ reflect.Type, skip string) []string {
		var out []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Name != skip {
				out = append(out, f.Name+" "+f.Type.String()+" "+f.Tag.Get("json"))
			}
		}
		slices.Sort(out)
		return out
	}
	got, want := fields(reflect.TypeFor[changeWire](), ""), fields(reflect.TypeFor[api.ChangeEvent](), "SubscriptionId")
	if !slices.Equal(got, want) {
		t.Fatalf("changeWire no longer matches api.ChangeEvent:\n changeWire:  %q\n ChangeEvent: %q", got, want)
	}
}

// decodeStrict decodes data into v refusing unknown members: the answer
// is exactly the generated type.
func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s is not a %T: %v", data, v, err)
	}
}

// sameJSON fails unless the answer holds exactly the JSON value that
// encoding/json writes for the generated value it decodes to, every member
// present (byte equality is not the contract: specs are sent as stored,
// white space and escapes included).
func sameJSON(t *testing.T, answer []byte, v any) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(answer, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("the answer is not the generated %T:\n answer:    %s\n generated: %s", v, answer, want)
	}
}

// TestFleetAnswersAreTheGeneratedTypes: the fleet answers written byte by
// byte (register, get, list with its cursor, sweep) are the generated
// SpecRow, SpecPage and SweepResult, as encoding/json would write them.
func TestFleetAnswersAreTheGeneratedTypes(t *testing.T) {
	s := benchServer(t)
	rng := rand.New(rand.NewPCG(18, 6))
	specs := []string{`1`, `"x<&>"`, `{"b": [1, 2.5e3, null], "a": {"\u00e9": true}}`, `[ ]`, `false`, `"\u2028"`}
	var rows []api.SpecRow
	for i := 0; i < 30; i++ {
		kind := []string{"repo", "cron", "a_b-1"}[rng.IntN(3)]
		spec := specs[rng.IntN(len(specs))]
		w := serve(s, "POST", "/v1/fleets/inst-7%2Fm/specs", fmt.Sprintf(`{"kind":%q,"spec":%s}`, kind, spec))
		if w.Code != 201 {
			t.Fatalf("register: %d %s", w.Code, w.Body)
		}
		var row api.SpecRow
		decodeStrict(t, w.Body.Bytes(), &row)
		sameJSON(t, w.Body.Bytes(), row)
		if !strings.HasPrefix(row.Name, kind+"-") || string(row.Spec) != spec {
			t.Fatalf("register answered %s for %s %s", w.Body, kind, spec)
		}
		rows = append(rows, row)

		w = serve(s, "GET", "/v1/fleets/inst-7%2Fm/specs/"+row.Name, "")
		var got api.SpecRow
		decodeStrict(t, w.Body.Bytes(), &got)
		sameJSON(t, w.Body.Bytes(), got)
	}
	var listed []api.SpecRow
	cursor := ""
	for pages := 0; ; pages++ {
		w := serve(s, "GET", "/v1/fleets/inst-7%2Fm/specs?limit=7"+cursor, "")
		var page api.SpecPage
		decodeStrict(t, w.Body.Bytes(), &page)
		sameJSON(t, w.Body.Bytes(), page)
		listed = append(listed, page.Items...)
		if page.NextCursor == nil {
			if pages == 0 {
				t.Fatal("one page: the cursor was not written")
			}
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	if len(listed) != len(rows) {
		t.Fatalf("listed %d of %d specs", len(listed), len(rows))
	}
	w := serve(s, "POST", "/v1/fleets/inst-7%2Fm/sweep", `{"schema":{"type":["object","number"]}}`)
	var res api.SweepResult
	decodeStrict(t, w.Body.Bytes(), &res)
	sameJSON(t, w.Body.Bytes(), res)
	if len(res.Kept) == 0 || len(res.Dropped) == 0 || len(res.Kept)+len(res.Dropped) != len(rows) {
		t.Fatalf("sweep kept %d and dropped %d of %d", len(res.Kept), len(res.Dropped), len(rows))
	}
}
