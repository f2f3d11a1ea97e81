package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/pgtest"
)

// Every fleet test body runs once per fleet store backend: bbolt in the data
// directory and PostgreSQL. The PostgreSQL runs read the server from
// MUSTER_TEST_PG_URL (`export MUSTER_TEST_PG_URL="$(tests/pg/start.sh)"`) and
// fail without it, unless MUSTER_TEST_PG=off says to skip them.

// fleetBackends gives, per backend, the --store value of a fresh, empty
// desired set for one test.
var fleetBackends = []struct {
	name  string
	store func(tb testing.TB) string
}{
	{"bolt", func(testing.TB) string { return "" }},
	{"postgres", mustPostgresStore},
}

// eachBackend runs body as one subtest per fleet store backend.
func eachBackend(t *testing.T, body func(t *testing.T, store string)) {
	for _, be := range fleetBackends {
		t.Run(be.name, func(t *testing.T) { body(t, be.store(t)) })
	}
}

// mustPostgresStore gives the test a schema of its own on the test
// PostgreSQL server (see tests/pgtest).
func mustPostgresStore(tb testing.TB) string { tb.Helper(); return pgtest.Schema(tb, "e2e") }

// specRow is one row as the wire carries it.
type specRow struct {
	Name string          `json:"name"`
	Spec json.RawMessage `json:"spec"`
}

type specPage struct {
	Items      []specRow `json:"items"`
	NextCursor *string   `json:"next_cursor"`
}

type gapBody struct {
	Missing  []string `json:"missing"`
	Orphans  []string `json:"orphans"`
	Revision int64    `json:"revision"`
}

// fleetPath is /v1/fleets/<root><rest> with a nested root's "/" sent as %2F.
func fleetPath(root, rest string) string {
	return "/v1/fleets/" + url.PathEscape(root) + rest
}

// register posts a raw spec under kind; spec is sent exactly as written.
func (b *Broker) register(tb testing.TB, token, root, kind, spec string) *Response {
	tb.Helper()
	body := `{"kind":` + jsonString(kind) + `,"spec":` + spec + `}`
	return b.Do(tb, Request{Method: "POST", Path: fleetPath(root, "/specs"), Token: token, Body: body})
}

func (b *Broker) mustRegister(tb testing.TB, token, root, kind, spec string) string {
	tb.Helper()
	resp := b.register(tb, token, root, kind, spec)
	if resp.Status != 201 {
		tb.Fatalf("register %s under %s: %d %s", kind, root, resp.Status, resp.Body)
	}
	var row specRow
	resp.JSON(tb, &row)
	if want := `{"name":"` + row.Name + `","spec":` + spec + "}\n"; string(resp.Body) != want {
		tb.Fatalf("201 body\n got %q\nwant %q", resp.Body, want)
	}
	return row.Name
}

// specs lists a root to its end, limit rows a page.
func (b *Broker) specs(tb testing.TB, token, root string, limit int) []specRow {
	tb.Helper()
	var all []specRow
	cursor := ""
	for pages := 0; pages < 1000; pages++ {
		q := url.Values{}
		if limit > 0 {
			q.Set("limit", fmt.Sprint(limit))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		resp := b.Do(tb, Request{Method: "GET", Path: fleetPath(root, "/specs?"+q.Encode()), Token: token})
		if resp.Status != 200 {
			tb.Fatalf("list %s: %d %s", root, resp.Status, resp.Body)
		}
		var p specPage
		resp.JSON(tb, &p)
		all = append(all, p.Items...)
		if p.NextCursor == nil {
			return all
		}
		cursor = *p.NextCursor
	}
	tb.Fatal("listing does not end")
	return nil
}

func namesOf(rows []specRow) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

func (b *Broker) gap(tb testing.TB, token, root, live string) (*Response, gapBody) {
	tb.Helper()
	resp := b.Do(tb, Request{Method: "GET", Path: fleetPath(root, "/gap?"+url.Values{"live": {live}}.Encode()), Token: token})
	var g gapBody
	if resp.Status == 200 {
		resp.JSON(tb, &g)
	}
	return resp, g
}

// hold acquires route for sess with token and a 10 s TTL.
func (b *Broker) hold(tb testing.TB, token, sess, route string) {
	tb.Helper()
	resp := b.Do(tb, Request{Method: "POST", Path: leasePath(route) + "/acquire", Token: token, Body: map[string]any{"session_id": sess, "ttl_ms": 10000}})
	if resp.Status != 200 {
		tb.Fatalf("acquire %s: %d %s", route, resp.Status, resp.Body)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A spec as a person writes it: inner whitespace, a 1.0 that is not 1, HTML
// characters, escapes and raw UTF-8. It must come back byte for byte.
const trickySpec = `{ "topic" : "releases <b>&</b> \u00e9 é" ,"schedule":"@hourly"	}`

func TestFleetSpecs(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store)
		const root = "monitors"
		if n := b.mustRegister(t, "", root, "repo", trickySpec); n != "repo-1" {
			t.Fatalf("first name %q, want repo-1", n)
		}
		if n := b.mustRegister(t, "", root, "reminder", `{"moment":"2026-12-01T09:00:00Z","note":"standup"}`); n != "reminder-2" {
			t.Fatalf("second name %q: the kinds of one root share one counter", n)
		}
		if n := b.mustRegister(t, "", root, "repo", `[ 1.0, 2e3 ]`); n != "repo-3" {
			t.Fatalf("third name %q", n)
		}

		get := b.Do(t, Request{Method: "GET", Path: fleetPath(root, "/specs/repo-1")})
		if want := `{"name":"repo-1","spec":` + trickySpec + "}\n"; get.Status != 200 || string(get.Body) != want {
			t.Fatalf("get: %d\n got %q\nwant %q", get.Status, get.Body, want)
		}
		rows := b.specs(t, "", root, 0)
		if got := namesOf(rows); !slices.Equal(got, []string{"reminder-2", "repo-1", "repo-3"}) {
			t.Fatalf("listing %v, want byte order", got)
		}
		if string(rows[1].Spec) != trickySpec || string(rows[2].Spec) != `[ 1.0, 2e3 ]` {
			t.Fatalf("listing changed the specs: %s / %s", rows[1].Spec, rows[2].Spec)
		}

		wantProblem(t, b.Do(t, Request{Method: "GET", Path: fleetPath(root, "/specs/repo-9")}), 404, "spec_not_found")
		if r := b.Do(t, Request{Method: "DELETE", Path: fleetPath(root, "/specs/repo-1")}); r.Status != 204 {
			t.Fatalf("forget: %d %s", r.Status, r.Body)
		}
		wantProblem(t, b.Do(t, Request{Method: "GET", Path: fleetPath(root, "/specs/repo-1")}), 404, "spec_not_found")
		for _, name := range []string{"repo-1", "repo-99", "never-minted"} { // absent: still a success
			if r := b.Do(t, Request{Method: "DELETE", Path: fleetPath(root, "/specs/"+name)}); r.Status != 204 {
				t.Fatalf("forget absent %s: %d %s", name, r.Status, r.Body)
			}
		}
		// Names are never reused, not after forget, not after a restart.
		b = MustRestartBroker(t, b)
		if n := b.mustRegister(t, "", root, "repo", `{}`); n != "repo-4" {
			t.Fatalf("name after forget and restart %q, want repo-4", n)
		}
		if got := namesOf(b.specs(t, "", root, 0)); !slices.Equal(got, []string{"reminder-2", "repo-3", "repo-4"}) {
			t.Fatalf("after restart: %v", got)
		}
	})
}

// Bad input is refused with its code, its detail never quotes what was sent,
// and it leaves nothing behind: no row, no step of the counter.
func TestFleetBadInput(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store)
		const root = "monitors"
		b.mustRegister(t, "", root, "repo", `{"topic":"a"}`)
		big := `"` + strings.Repeat("x", 64<<10) + `"` // one byte over the 64 KiB spec limit
		huge := `"` + strings.Repeat("x", 100<<10) + `"`
		cases := []struct {
			name    string
			req     Request
			status  int
			code    string
			secrets []string // what the detail must not quote
		}{
			{"ForgetFolded", Request{Method: "DELETE", Path: fleetPath(root, "/specs/Repo-1")}, 400, "invalid_name", []string{"Repo-1", "repo-1"}},
			{"GetFolded", Request{Method: "GET", Path: fleetPath(root, "/specs/Repo-1")}, 400, "invalid_name", []string{"Repo-1"}},
			{"ForgetDotDot", Request{Method: "DELETE", Path: fleetPath(root, "/specs/..")}, 400, "invalid_name", nil},
			{"SpecTooLarge", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"repo","spec":` + big + `}`}, 413, "payload_too_large", nil},
			{"BodyTooLarge", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"repo","spec":` + huge + `}`}, 413, "payload_too_large", nil},
			{"KindUpper", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"Repo","spec":1}`}, 400, "invalid_request", []string{"Repo"}},
			{"KindSlash", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"re/po","spec":1}`}, 400, "invalid_request", []string{"re/po"}},
			{"KindEmpty", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"","spec":1}`}, 400, "invalid_request", nil},
			{"KindTooLong", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"` + strings.Repeat("k", 65) + `","spec":1}`}, 400, "invalid_request", nil},
			{"NoSpec", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"repo"}`}, 400, "invalid_request", nil},
			{"SpecNotJSON", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"repo","spec":{"a":}}`}, 400, "invalid_request", nil},
			{"SpecNotUTF8", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: []byte("{\"kind\":\"repo\",\"spec\":\"\xff\xfe\"}")}, 400, "invalid_request", nil},
			{"UnknownField", Request{Method: "POST", Path: fleetPath(root, "/specs"), Body: `{"kind":"repo","spec":1,"name":"repo-7"}`}, 400, "invalid_request", []string{"repo-7"}},
			{"RootUpper", Request{Method: "POST", Path: fleetPath("Monitors", "/specs"), Body: `{"kind":"repo","spec":1}`}, 400, "invalid_request", []string{"Monitors"}},
			{"RootEmptySegment", Request{Method: "POST", Path: fleetPath("inst-7//mon", "/specs"), Body: `{"kind":"repo","spec":1}`}, 400, "invalid_request", []string{"inst-7"}},
			{"RootTooDeep", Request{Method: "GET", Path: fleetPath(strings.Repeat("a/", 8)+"a", "/specs")}, 400, "invalid_request", nil},
			{"RootDotDot", Request{Method: "GET", Path: fleetPath("..", "/specs/repo-1")}, 400, "invalid_request", nil},
			{"LimitZero", Request{Method: "GET", Path: fleetPath(root, "/specs?limit=0")}, 400, "invalid_request", nil},
			{"LimitTooLarge", Request{Method: "GET", Path: fleetPath(root, "/specs?limit=1001")}, 400, "invalid_request", nil},
			{"CursorGarbage", Request{Method: "GET", Path: fleetPath(root, "/specs?cursor=not-a-cursor")}, 400, "invalid_cursor", []string{"not-a-cursor"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.Do(t, tc.req)
				wantProblem(t, resp, tc.status, tc.code)
				_, detail := resp.Problem(t)
				for _, s := range tc.secrets {
					if strings.Contains(detail, s) {
						t.Fatalf("detail %q quotes the submitted %q", detail, s)
					}
				}
			})
		}
		rows := b.specs(t, "", root, 0)
		if got := namesOf(rows); !slices.Equal(got, []string{"repo-1"}) || string(rows[0].Spec) != `{"topic":"a"}` {
			t.Fatalf("after bad input the root holds %v", got)
		}
		if got := b.specs(t, "", "inst-7", 0); len(got) != 0 {
			t.Fatalf("a refused root was written: %v", namesOf(got))
		}
		if n := b.mustRegister(t, "", root, "repo", `2`); n != "repo-2" {
			t.Fatalf("bad input advanced the counter: next name %q", n)
		}
	})
}

// A nested root travels as one path segment with %2F; it is its own desired
// set, untouched by its parent or by a root whose name looks like geometry.
func TestFleetNestedRoots(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store)
		if n := b.mustRegister(t, "", "inst-7/monitors", "repo", `{"deep":true}`); n != "repo-1" {
			t.Fatalf("nested root's first name %q", n)
		}
		if n := b.mustRegister(t, "", "inst-7", "repo", `{"deep":false}`); n != "repo-1" {
			t.Fatalf("parent root's first name %q: roots share no counter", n)
		}
		b.mustRegister(t, "", "inst-7/monitors/specs", "repo", `{"geometry":"no"}`)
		get := b.Do(t, Request{Method: "GET", Path: "/v1/fleets/inst-7%2Fmonitors/specs/repo-1"})
		if string(get.Body) != `{"name":"repo-1","spec":{"deep":true}}`+"\n" {
			t.Fatalf("nested get: %d %s", get.Status, get.Body)
		}
		for root, want := range map[string]string{"inst-7/monitors": `{"deep":true}`, "inst-7": `{"deep":false}`, "inst-7/monitors/specs": `{"geometry":"no"}`} {
			rows := b.specs(t, "", root, 0)
			if len(rows) != 1 || string(rows[0].Spec) != want {
				t.Fatalf("root %s lists %s", root, rows)
			}
		}
		if r := b.Do(t, Request{Method: "DELETE", Path: "/v1/fleets/inst-7%2Fmonitors/specs/repo-1"}); r.Status != 204 {
			t.Fatalf("nested forget: %d", r.Status)
		}
		if len(b.specs(t, "", "inst-7/monitors", 0)) != 0 || len(b.specs(t, "", "inst-7", 0)) != 1 {
			t.Fatal("forgetting under the nested root touched another root")
		}
	})
}

func TestFleetListPaging(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store, writerTok, otherTok)
		tok := writerTok.Secret
		var want []string
		for i := 0; i < 12; i++ {
			want = append(want, b.mustRegister(t, tok, "monitors", "repo", fmt.Sprintf(`{"i": %d}`, i)))
		}
		slices.Sort(want) // byte order: repo-10 before repo-2
		for _, limit := range []int{1, 5, 12, 1000} {
			if got := namesOf(b.specs(t, tok, "monitors", limit)); !slices.Equal(got, want) {
				t.Fatalf("limit %d pages %v, want %v", limit, got, want)
			}
		}
		first := b.Do(t, Request{Method: "GET", Path: fleetPath("monitors", "/specs?limit=5"), Token: tok})
		var p specPage
		first.JSON(t, &p)
		if p.NextCursor == nil || len(p.Items) != 5 {
			t.Fatalf("first page: %s", first.Body)
		}
		cursor := url.QueryEscape(*p.NextCursor)
		b.mustRegister(t, tok, "elsewhere", "repo", `1`)
		leaseCursor := func() string { // a LIST cursor of the same family
			s := createSession(t, b, tok, "w", 60000)
			for i := 0; i < 3; i++ {
				b.hold(t, tok, s, fmt.Sprintf("lease://acme/r/%d", i))
			}
			_, lp := b.list(t, tok, "lease://acme/r/*", 1, "")
			return url.QueryEscape(*lp.NextCursor)
		}()
		misuse := []struct {
			name string
			req  Request
		}{
			{"AnotherRoot", Request{Method: "GET", Path: fleetPath("elsewhere", "/specs?cursor="+cursor), Token: tok}},
			{"AnotherFamily", Request{Method: "GET", Path: fleetPath("monitors", "/specs?cursor="+cursor), Token: otherTok.Secret}},
			{"LeaseCursor", Request{Method: "GET", Path: fleetPath("monitors", "/specs?cursor="+leaseCursor), Token: tok}},
			{"Truncated", Request{Method: "GET", Path: fleetPath("monitors", "/specs?cursor="+cursor[:len(cursor)-3]), Token: tok}},
		}
		for _, tc := range misuse {
			t.Run(tc.name, func(t *testing.T) { wantProblem(t, b.Do(t, tc.req), 400, "invalid_cursor") })
		}
		// A page stops at ~1 MiB of specs whatever the limit, and resumes.
		fat := `"` + strings.Repeat("f", 60000) + `"`
		var fatNames []string
		for i := 0; i < 20; i++ {
			fatNames = append(fatNames, b.mustRegister(t, tok, "fat", "blob", fat))
		}
		slices.Sort(fatNames)
		resp := b.Do(t, Request{Method: "GET", Path: fleetPath("fat", "/specs?limit=1000"), Token: tok})
		var fp specPage
		resp.JSON(t, &fp)
		if len(fp.Items) == 0 || len(fp.Items) >= 20 || fp.NextCursor == nil || len(resp.Body) > 1<<20+4096 {
			t.Fatalf("a page of 20 specs of 60 KB: %d items, %d bytes, cursor %v", len(fp.Items), len(resp.Body), fp.NextCursor != nil)
		}
		if got := namesOf(b.specs(t, tok, "fat", 1000)); !slices.Equal(got, fatNames) {
			t.Fatalf("byte-bounded pages: %v", got)
		}
		// A cursor outlives neither the epoch nor lets another lifetime pretend.
		b = MustRestartBroker(t, b)
		wantProblem(t, b.Do(t, Request{Method: "GET", Path: fleetPath("monitors", "/specs?cursor="+cursor), Token: tok}), 410, "epoch_changed")
		if got := namesOf(b.specs(t, tok, "monitors", 5)); !slices.Equal(got, want) {
			t.Fatalf("after restart: %v", got)
		}
	})
}

// The seed's spec sum, as a JSON Schema: a repo watch or a reminder.
const monitorSchema = `{
  "oneOf": [
    {"type": "object", "required": ["topic", "schedule"], "additionalProperties": false,
     "properties": {"topic": {"type": "string"}, "schedule": {"type": "string"}}},
    {"type": "object", "required": ["moment", "note"], "additionalProperties": false,
     "properties": {"moment": {"type": "string"}, "note": {"type": "string"}}}
  ]
}`

func TestFleetSweep(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store)
		const root = "monitors"
		specs := []struct{ kind, spec string }{
			{"repo", trickySpec},
			{"repo", `{"topic": 5, "schedule": "@daily"}`},               // a field changed type across a deploy
			{"reminder", `{"moment":"2026-12-01T09:00:00Z","note":"x"}`}, // fine
			{"reminder", `"hand-edited"`},                                // not an object at all
			{"repo", `{"topic":"t","schedule":"s","retired":true}`},      // a field the shape no longer has
		}
		for _, s := range specs {
			b.mustRegister(t, "", root, s.kind, s.spec)
		}
		sweep := func(schema string) (*Response, []specRow, []string) {
			resp := b.Do(t, Request{Method: "POST", Path: fleetPath(root, "/sweep"), Body: `{"schema":` + schema + `}`})
			var res struct {
				Kept    []specRow `json:"kept"`
				Dropped []string  `json:"dropped"`
			}
			if resp.Status == 200 {
				resp.JSON(t, &res)
			}
			return resp, res.Kept, res.Dropped
		}
		// Bad schemas are refused before anything is judged or deleted.
		for name, schema := range map[string]string{
			"NotASchema":  `{"type": 12}`,
			"ExternalRef": `{"$ref": "https://example.com/schema.json"}`,
			"NotAnObject": `[1]`,
		} {
			t.Run(name, func(t *testing.T) {
				resp, _, _ := sweep(schema)
				wantProblem(t, resp, 400, "invalid_request")
			})
		}
		wantProblem(t, b.Do(t, Request{Method: "POST", Path: fleetPath(root, "/sweep"), Body: `{"schema":{"description":"` + strings.Repeat("x", 256<<10) + `"}}`}), 413, "payload_too_large")
		if n := len(b.specs(t, "", root, 0)); n != 5 {
			t.Fatalf("a refused sweep left %d of 5 specs", n)
		}

		resp, kept, dropped := sweep(monitorSchema)
		if resp.Status != 200 {
			t.Fatalf("sweep: %d %s", resp.Status, resp.Body)
		}
		if !slices.Equal(dropped, []string{"reminder-4", "repo-2", "repo-5"}) {
			t.Fatalf("dropped %v", dropped)
		}
		if got := namesOf(kept); !slices.Equal(got, []string{"reminder-3", "repo-1"}) {
			t.Fatalf("kept %v", got)
		}
		if !bytes.Contains(resp.Body, []byte(`{"name":"repo-1","spec":`+trickySpec+`}`)) {
			t.Fatalf("a kept spec did not come back byte for byte: %s", resp.Body)
		}
		if got := namesOf(b.specs(t, "", root, 0)); !slices.Equal(got, []string{"reminder-3", "repo-1"}) {
			t.Fatalf("after the sweep the root holds %v", got)
		}
		// A second boot finds nothing more to drop; an empty root sweeps to
		// empty arrays, never null.
		if _, kept, dropped := sweep(monitorSchema); len(kept) != 2 || len(dropped) != 0 {
			t.Fatalf("second sweep kept %v dropped %v", namesOf(kept), dropped)
		}
		resp = b.Do(t, Request{Method: "POST", Path: fleetPath("empty", "/sweep"), Body: `{"schema":{}}`})
		if string(resp.Body) != `{"kept":[],"dropped":[],"invalid":[]}`+"\n" {
			t.Fatalf("empty sweep: %s", resp.Body)
		}
	})
}

func TestFleetPlan(t *testing.T) {
	b := MustStartBroker(t, writerTok, TokenSpec{Secret: "no-grants", Family: "acme", Grants: []string{"lease://acme/x/y#read"}})
	// A token without any fleet grant (a lease worker's) is refused: the
	// abuse report's 120 parallel 4 MiB plans came from a read-only one.
	resp := b.Do(t, Request{Method: "POST", Path: "/v1/fleets/plan", Token: "no-grants", Body: map[string]any{"desired": []string{"a"}, "live": []string{}}})
	wantProblem(t, resp, 403, "forbidden")
	cases := []struct {
		name                   string
		desired, live          []string
		wantMissing, wantOrphs []string
	}{
		{"Both", []string{"repo-2", "repo-1", "reminder-3"}, []string{"repo-9", "repo-2"}, []string{"reminder-3", "repo-1"}, []string{"repo-9"}},
		{"Duplicates", []string{"a", "a", "b"}, []string{"b", "b", "c", "c"}, []string{"a"}, []string{"c"}},
		{"Empty", []string{}, []string{}, []string{}, []string{}},
		{"AnyStrings", []string{"Repo-1", "é"}, []string{"repo-1"}, []string{"Repo-1", "é"}, []string{"repo-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Plan is pure and names no root: a token with read on some
			// fleet root will do.
			resp := b.Do(t, Request{Method: "POST", Path: "/v1/fleets/plan", Token: writerTok.Secret, Body: map[string]any{"desired": tc.desired, "live": tc.live}})
			var p struct{ Missing, Orphans []string }
			resp.JSON(t, &p)
			if resp.Status != 200 || !slices.Equal(p.Missing, tc.wantMissing) || !slices.Equal(p.Orphans, tc.wantOrphs) {
				t.Fatalf("%d %s", resp.Status, resp.Body)
			}
		})
	}
	wantProblem(t, b.Do(t, Request{Method: "POST", Path: "/v1/fleets/plan", Body: map[string]any{"desired": []string{}, "live": []string{}}}), 401, "unauthenticated")
	wantProblem(t, b.Do(t, Request{Method: "POST", Path: "/v1/fleets/plan", Token: writerTok.Secret, Body: map[string]any{"desired": []string{}}}), 400, "invalid_request")
}

func TestFleetGap(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store, writerTok, readerTok)
		w, r := writerTok.Secret, readerTok.Secret
		const root, live = "monitors", "lease://acme/monitors/*"
		for _, kind := range []string{"repo", "reminder", "repo"} { // repo-1, reminder-2, repo-3
			b.mustRegister(t, w, root, kind, `{}`)
		}
		s := createSession(t, b, w, "fiber-host", 600000)
		b.hold(t, w, s, "lease://acme/monitors/repo-1")
		b.hold(t, w, s, "lease://acme/monitors/repo-9")  // live, never desired: an orphan
		b.hold(t, w, s, "lease://acme/elsewhere/repo-3") // outside the selector
		b.hold(t, w, s, "lease://acme/monitors/reminder-2")

		resp, g := b.gap(t, r, root, live)
		if resp.Status != 200 || !slices.Equal(g.Missing, []string{"repo-3"}) || !slices.Equal(g.Orphans, []string{"repo-9"}) {
			t.Fatalf("gap: %d %s", resp.Status, resp.Body)
		}
		if _, p := b.list(t, r, live, 0, ""); p.Snapshot.Revision != g.Revision {
			t.Fatalf("gap revision %d, LIST snapshot at %d with nothing in between", g.Revision, p.Snapshot.Revision)
		}
		// A wider selector takes the resource segment of every area.
		if _, g := b.gap(t, r, root, "lease://acme/**"); len(g.Missing) != 0 || !slices.Equal(g.Orphans, []string{"repo-9"}) {
			t.Fatalf("wide gap: %+v", g)
		}
		// Death does not edit the desired set: an expired lease makes its
		// spec missing, not gone.
		b.Clock.Advance(10*time.Second + time.Millisecond)
		_, g2 := b.gap(t, r, root, live)
		if !slices.Equal(g2.Missing, []string{"reminder-2", "repo-1", "repo-3"}) || len(g2.Orphans) != 0 || g2.Revision <= g.Revision {
			t.Fatalf("gap after expiry: %+v (before: %+v)", g2, g)
		}
		if len(b.specs(t, r, root, 0)) != 3 {
			t.Fatal("expiry edited the desired set")
		}
		// An empty root against an empty inventory: empty arrays.
		if resp, _ := b.gap(t, r, "nothing-here", "lease://acme/none/*"); !bytes.HasPrefix(resp.Body, []byte(`{"missing":[],"orphans":[]`)) {
			t.Fatalf("empty gap: %s", resp.Body)
		}

		wantProblem(t, b.Do(t, Request{Method: "GET", Path: fleetPath(root, "/gap"), Token: r}), 400, "invalid_selector")
		resp, _ = b.gap(t, r, root, "lease://acme/monitors")
		wantProblem(t, resp, 400, "invalid_selector")
		resp, _ = b.gap(t, r, root, "lease://beta/monitors/*") // the reader's lease grant is acme only
		wantProblem(t, resp, 403, "forbidden")
		resp, _ = b.gap(t, r, "Monitors", live)
		wantProblem(t, resp, 400, "invalid_request")
	})
}

// Roots of different families never meet: same root, same names, two
// desired sets; and a gap sees its own family's leases only.
func TestFleetFamilyIsolation(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store, writerTok, otherTok)
		a, o := writerTok.Secret, otherTok.Secret
		b.mustRegister(t, a, "monitors", "repo", `{"family":"acme"}`)
		if got := b.specs(t, o, "monitors", 0); len(got) != 0 {
			t.Fatalf("another family lists %v", namesOf(got))
		}
		wantProblem(t, b.Do(t, Request{Method: "GET", Path: fleetPath("monitors", "/specs/repo-1"), Token: o}), 404, "spec_not_found")
		if r := b.Do(t, Request{Method: "DELETE", Path: fleetPath("monitors", "/specs/repo-1"), Token: o}); r.Status != 204 {
			t.Fatalf("foreign forget: %d", r.Status)
		}
		if n := b.mustRegister(t, o, "monitors", "repo", `{"family":"other"}`); n != "repo-1" {
			t.Fatalf("the other family's first name %q: counters are per family", n)
		}
		b.Do(t, Request{Method: "POST", Path: fleetPath("monitors", "/sweep"), Token: o, Body: `{"schema":{"not":{}}}`})
		rows := b.specs(t, a, "monitors", 0)
		if len(rows) != 1 || string(rows[0].Spec) != `{"family":"acme"}` {
			t.Fatalf("acme's set after the other family's forget and sweep: %v", rows)
		}
		s := createSession(t, b, a, "acme-host", 60000)
		b.hold(t, a, s, "lease://acme/monitors/repo-1")
		if _, g := b.gap(t, o, "monitors", "lease://acme/monitors/*"); len(g.Orphans) != 0 {
			t.Fatalf("the other family's gap sees acme's leases: %+v", g)
		}
		if _, g := b.gap(t, a, "monitors", "lease://acme/monitors/*"); len(g.Missing)+len(g.Orphans) != 0 {
			t.Fatalf("acme's gap: %+v", g)
		}
	})
}

func TestFleetAuthorization(t *testing.T) {
	scoped := TokenSpec{Secret: "scoped-secret", Family: "acme", Grants: []string{"fleet://inst-7/**#*", "lease://acme/**#read"}}
	eachBackend(t, func(t *testing.T, store string) {
		b := MustStartBrokerOn(t, store, writerTok, readerTok, writeOnly, scoped)
		b.mustRegister(t, writerTok.Secret, "monitors", "repo", `{"keep":"me"}`)
		b.mustRegister(t, writerTok.Secret, "inst-7/monitors", "repo", `{}`)
		r, s, wo := readerTok.Secret, scoped.Secret, writeOnly.Secret
		cases := []struct {
			name   string
			req    Request
			status int
		}{
			{"ReaderRegisters", Request{Method: "POST", Path: fleetPath("monitors", "/specs"), Token: r, Body: `{"kind":"repo","spec":1}`}, 403},
			{"ReaderForgets", Request{Method: "DELETE", Path: fleetPath("monitors", "/specs/repo-1"), Token: r}, 403},
			{"ReaderSweeps", Request{Method: "POST", Path: fleetPath("monitors", "/sweep"), Token: r, Body: `{"schema":{"not":{}}}`}, 403},
			{"ReaderLists", Request{Method: "GET", Path: fleetPath("monitors", "/specs"), Token: r}, 200},
			{"ReaderGets", Request{Method: "GET", Path: fleetPath("monitors", "/specs/repo-1"), Token: r}, 200},
			{"ReaderGap", Request{Method: "GET", Path: fleetPath("monitors", "/gap?live=lease://acme/m/*"), Token: r}, 200},
			{"NoFleetGrant", Request{Method: "GET", Path: fleetPath("monitors", "/specs"), Token: wo}, 403},
			{"ScopedOutsideRoot", Request{Method: "GET", Path: fleetPath("monitors", "/specs"), Token: s}, 403},
			{"ScopedForgetOutsideRoot", Request{Method: "DELETE", Path: fleetPath("monitors", "/specs/repo-1"), Token: s}, 403},
			{"ScopedInsideRoot", Request{Method: "GET", Path: fleetPath("inst-7/monitors", "/specs"), Token: s}, 200},
			{"ScopedGapNeedsLeaseRead", Request{Method: "GET", Path: fleetPath("inst-7/monitors", "/gap?live=lease://beta/m/*"), Token: s}, 403},
			{"NoToken", Request{Method: "GET", Path: fleetPath("monitors", "/specs")}, 401},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.Do(t, tc.req)
				if resp.Status != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.Status, tc.status, resp.Body)
				}
			})
		}
		rows := b.specs(t, writerTok.Secret, "monitors", 0)
		if len(rows) != 1 || string(rows[0].Spec) != `{"keep":"me"}` {
			t.Fatalf("refused writes changed the set: %v", rows)
		}
	})
}

// tcpProxy forwards loopback connections to target until cut: then it drops
// every connection and refuses new ones, like a database gone away.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startProxy(tb testing.TB, target string) *tcpProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	tb.Cleanup(func() { _ = ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *tcpProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func (p *tcpProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.conns = nil
	}
}

// /readyz reports the store: 503 `unavailable` while PostgreSQL cannot be
// reached, ready again once it can, the cause in the log and not the body.
func TestFleetReadyz(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		b := MustStartBrokerOn(t, "")
		if resp := b.Do(t, Request{Method: "GET", Path: "/readyz"}); resp.Status != 200 {
			t.Fatalf("readyz: %d %s", resp.Status, resp.Body)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		u, err := url.Parse(mustPostgresStore(t))
		if err != nil {
			t.Fatal(err)
		}
		proxy := startProxy(t, u.Host)
		u.Host = proxy.ln.Addr().String()
		q := u.Query()
		q.Set("connect_timeout", "1")
		u.RawQuery = q.Encode()
		b := MustStartBrokerOn(t, u.String())
		b.mustRegister(t, "", "monitors", "repo", `1`)
		if resp := b.Do(t, Request{Method: "GET", Path: "/readyz"}); resp.Status != 200 {
			t.Fatalf("readyz: %d %s", resp.Status, resp.Body)
		}
		proxy.setCut(true)
		resp := b.Do(t, Request{Method: "GET", Path: "/readyz"})
		wantProblem(t, resp, 503, "unavailable")
		if bytes.Contains(resp.Body, []byte(u.Host)) || bytes.Contains(resp.Body, []byte("127.0.0.1")) {
			t.Fatalf("readyz shows the cause: %s", resp.Body)
		}
		if !strings.Contains(b.Logs.String(), "the fleet store does not answer") {
			t.Fatal("the cause was not logged")
		}
		// A fleet call meanwhile is unavailable too, with the cause logged only.
		resp = b.Do(t, Request{Method: "GET", Path: fleetPath("monitors", "/specs")})
		wantProblem(t, resp, 503, "unavailable")
		if bytes.Contains(resp.Body, []byte("127.0.0.1")) || !strings.Contains(b.Logs.String(), "fleet store failed") {
			t.Fatalf("backend failure: body %s", resp.Body)
		}
		proxy.setCut(false)
		waitFor(t, func() bool { return b.Do(t, Request{Method: "GET", Path: "/readyz"}).Status == 200 })
		if got := b.specs(t, "", "monitors", 0); len(got) != 1 {
			t.Fatalf("after reconnecting: %v", namesOf(got))
		}
	})
}

// A spec whose 201 was received survives kill -9 of the real binary right
// after: registrations run flat out, the process is killed in the middle of
// them, and every acknowledged name is back, byte for byte, after a restart.
func TestBinaryFleetSurvivesKill9(t *testing.T) {
	eachBackend(t, func(t *testing.T, store string) {
		dir := t.TempDir()
		args := []string{"--addr", "127.0.0.1:0", "--data-dir", dir}
		if store != "" {
			args = append(args, "--store", store)
		}
		p := startProcess(t, args...)
		base := "http://" + p.addr + "/v1/fleets/inst-1%2Fmonitors/specs"
		var (
			mu    sync.Mutex
			acked = map[string]string{}
			wg    sync.WaitGroup
			stop  = make(chan struct{})
		)
		for w := 0; w < 4; w++ {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					spec := fmt.Sprintf(`{"worker": %d, "i": %d,  "pad": "%s"}`, w, i, strings.Repeat("é", i%7))
					resp, err := http.Post(base, "application/json", strings.NewReader(`{"kind":"repo","spec":`+spec+`}`))
					if err != nil {
						return // killed
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 201 {
						return
					}
					var row specRow
					if json.Unmarshal(body, &row) != nil {
						return
					}
					mu.Lock()
					acked[row.Name] = spec
					mu.Unlock()
				}
			})
		}
		waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 50 })
		if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no close
			t.Fatal(err)
		}
		_ = p.cmd.Wait()
		close(stop)
		wg.Wait()

		p2 := startProcess(t, args...)
		mu.Lock()
		defer mu.Unlock()
		for name, spec := range acked {
			resp, err := http.Get("http://" + p2.addr + "/v1/fleets/inst-1%2Fmonitors/specs/" + name)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := `{"name":"` + name + `","spec":` + spec + "}\n"; resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("acknowledged %s after kill -9: %d %s, want %s", name, resp.StatusCode, body, want)
			}
		}
		t.Logf("%d acknowledged specs survived kill -9", len(acked))
	})
}
