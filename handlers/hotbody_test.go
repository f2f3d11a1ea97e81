package handlers

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/oapi-codegen/runtime"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
	"github.com/musterhq/muster/core"
)

// hotRoutes are the operations with a fast path, by route.
var hotRoutes = []struct{ op, suffix string }{
	{"acquireLease", "acquire"},
	{"extendLease", "extend"},
	{"releaseLease", "release"},
}

// outcome is everything a request's answer depends on after the contract
// middleware: the answer it wrote (status and problem), or the caller and
// the body the handler receives.
type outcome struct {
	status int
	answer string
	caller string
	body   any
	fast   bool // the fast path decided
}

// contractRouter serves the hot routes behind a contract; the handler
// takes the body as the generated routes do (see hotpath.go): from the
// fast path, or else decoded by the generated strict handler's decoder,
// whose failure the server answers with RequestErrorHandlerFunc's problem.
func contractRouter(t testing.TB, generalOnly bool) http.Handler {
	t.Helper()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.ParseGrants([]string{"lease://**#*"})
	auth := NewAuthenticator([]Token{{Name: "tok", Hash: sha256.Sum256([]byte("secret")), Family: "acme", Grants: g}})
	c, err := newContract(spec, auth, slog.New(slog.NewTextHandler(io.Discard, nil)), DefaultBodyReadTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c.generalOnly = generalOnly
	r := chi.NewRouter()
	for _, h := range hotRoutes {
		typ := hotBodies[h.op]
		r.With(c.middleware).Post("/v1/leases/{realm}/{area}/{resource}/"+h.suffix, func(w http.ResponseWriter, r *http.Request) {
			o := outcomeOf(w)
			if c := callerFrom(r.Context()); c != nil {
				o.caller = c.Name
			}
			if b := r.Context().Value(hotBodyKey{}); b != nil {
				o.body, o.fast = b, true
				return
			}
			body := reflect.New(typ).Interface()
			if err := runtime.BindJSONBody(r, body); err != nil {
				writeProblem(w, muster.CodeInvalidRequest, "the request body does not match its schema")
				return
			}
			o.body = body
		})
	}
	return r
}

type outcomeWriter struct {
	*httptest.ResponseRecorder
	o outcome
}

func outcomeOf(w http.ResponseWriter) *outcome { return &w.(*outcomeWriter).o }

func do(h http.Handler, op int, realm, area, resource, contentType string, body []byte) outcome {
	target := "/v1/leases/" + realm + "/" + area + "/" + resource + "/" + hotRoutes[op].suffix
	req, err := http.NewRequest("POST", "http://x"+target, bytes.NewReader(body))
	if err != nil {
		return outcome{status: -1, answer: "unbuildable request"}
	}
	if contentType != "-" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer secret")
	w := &outcomeWriter{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, req)
	w.o.status, w.o.answer = w.Code, w.Body.String()
	return w.o
}

// same fails unless the fast path and the general path gave one answer.
func same(t testing.TB, fast, general http.Handler, op int, realm, area, resource, ct string, body []byte) outcome {
	t.Helper()
	f := do(fast, op, realm, area, resource, ct, body)
	g := do(general, op, realm, area, resource, ct, body)
	if g.fast {
		t.Fatal("the general router took the fast path")
	}
	tookFast := f.fast
	f.fast = false
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("%s %q/%q/%q %q %q:\n fast:    %+v\n general: %+v", hotRoutes[op].op, realm, area, resource, ct, body, f, g)
	}
	f.fast = tookFast
	return f
}

const sid = "0123456789abcdef0123456789abcdef"

var (
	segments = []string{"acme", "w1", "r-7", "document-123", "a%2Fb", "%2A", "*", "a%20b", "%C3%A9t%C3%A9", "%00", "%7F", "%C2%80",
		"%C2%9F", "%C2%A0", "%", "%zz", "%FF", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat("%C3%A9", 128),
		strings.Repeat("%C3%A9", 129), strings.Repeat("%F0%9F%98%80", 64), "a.b", "~", "%25", "%2541", "a:b", "%E2%80%A8"}
	names  = []string{"session_id", "ttl_ms", "wait_ms", "fencing_token", "Session_Id", "TTL_MS", "extra", "", "ses\\u0073ion_id", "wait_ms "}
	values = []string{`"` + sid + `"`, `"` + strings.ToUpper(sid) + `"`, `"` + sid[:31] + `"`, `"` + sid + `0"`, `"\u0030123456789abcdef0123456789abcdef"`,
		`""`, `"x"`, `0`, `1`, `-1`, `-0`, `99`, `100`, `101`, `15000`, `30000`, `30001`, `600000`, `600001`, `1.0`, `1e3`, `1E2`, `1.5`, `100.0`,
		`9007199254740992`, `9007199254740993`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775809`, `1e400`,
		`"100"`, `null`, `true`, `false`, `{}`, `[]`, `[100]`, `{"a":1}`, `0.0000001e9`, `42`}
	contentTypes = []string{"application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/json;charset=UTF-8",
		"text/plain", "-", "", "application/json;;", "application/*", "application/problem+json", "application/json ; x=y"}
	spaces = []string{"", " ", "\n", "\t ", "\r\n"}
)

// randomBody writes an object of random members from the pools above, in
// random order, with random white space.
func randomBody(rng *rand.Rand) []byte {
	var b strings.Builder
	sp := func() { b.WriteString(spaces[rng.IntN(len(spaces))]) }
	sp()
	b.WriteByte('{')
	n := rng.IntN(5)
	used := map[string]bool{}
	for i := 0; i < n; i++ {
		name := names[rng.IntN(len(names))]
		if rng.IntN(3) > 0 {
			name = names[rng.IntN(4)] // mostly real names
		}
		if used[name] && rng.IntN(4) > 0 { // now and then a duplicate
			continue
		}
		used[name] = true
		if b.Len() > 0 && !strings.HasSuffix(strings.TrimSpace(b.String()), "{") {
			b.WriteByte(',')
		}
		sp()
		fmt.Fprintf(&b, "%q", name)
		sp()
		b.WriteByte(':')
		sp()
		b.WriteString(values[rng.IntN(len(values))])
		sp()
	}
	b.WriteByte('}')
	sp()
	return []byte(strings.ReplaceAll(b.String(), `\\u`, `\u`))
}

// nearValid is a valid body of op with one or two members changed: a value
// from the pool, a member dropped, or one added.
func nearValid(op int, rng *rand.Rand) []byte {
	members := map[string]string{"session_id": `"` + sid + `"`}
	switch hotRoutes[op].op {
	case "acquireLease":
		members["ttl_ms"] = "60000"
		if rng.IntN(2) == 0 {
			members["wait_ms"] = "0"
		}
	case "extendLease":
		members["ttl_ms"], members["fencing_token"] = "60000", "42"
	default:
		members["fencing_token"] = "42"
	}
	for k := rng.IntN(2) + 1; k > 0; k-- {
		name := names[rng.IntN(len(names))]
		if rng.IntN(4) > 0 {
			name = names[rng.IntN(4)]
		}
		if rng.IntN(8) == 0 {
			delete(members, name)
			continue
		}
		members[name] = values[rng.IntN(len(values))]
	}
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for _, i := range rng.Perm(len(names)) {
		v, ok := members[names[i]]
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%s%q%s:%s%s", spaces[rng.IntN(len(spaces))], names[i], spaces[rng.IntN(len(spaces))], spaces[rng.IntN(len(spaces))], v)
	}
	if rng.IntN(8) == 0 { // a member twice, with the same valid value
		for _, name := range names[:4] {
			if v, ok := members[name]; ok {
				fmt.Fprintf(&b, ",%q:%s", name, v)
				break
			}
		}
	}
	b.WriteByte('}')
	return []byte(strings.ReplaceAll(b.String(), `\\u`, `\u`))
}

// validBody is a body the contract takes for op.
func validBody(op int, rng *rand.Rand) []byte {
	switch hotRoutes[op].op {
	case "acquireLease":
		if rng.IntN(2) == 0 {
			return []byte(`{"session_id":"` + sid + `","ttl_ms":60000}`)
		}
		return []byte(`{"ttl_ms": 100, "wait_ms": 30000, "session_id": "` + sid + `"}`)
	case "extendLease":
		return []byte(`{"session_id":"` + sid + `","fencing_token":42,"ttl_ms":600000}`)
	}
	return []byte(`{"fencing_token":9007199254740992,"session_id":"` + sid + `"}`)
}

// mutate changes a few bytes of body: a flip, a deletion, an insertion of
// a JSON-significant byte.
func mutate(body []byte, rng *rand.Rand) []byte {
	b := bytes.Clone(body)
	for k := rng.IntN(3) + 1; k > 0 && len(b) > 0; k-- {
		i := rng.IntN(len(b))
		switch rng.IntN(4) {
		case 0:
			b[i] ^= byte(1 << rng.IntN(8))
		case 1:
			b = append(b[:i], b[i+1:]...)
		case 2:
			b = append(b[:i], append([]byte{`{}[]",:0-.e \`[rng.IntN(13)]}, b[i:]...)...)
		default:
			b[i] = "0123456789abcdefABCDEF\"\\"[rng.IntN(24)]
		}
	}
	return b
}

// TestHotPathDifferential: on random and mutated requests to the lease
// mutations, the fast path and the general path (kin-openapi, then the
// generated decoder) give the same answer — status, problem code and
// detail — and hand the handler the same caller and the same decoded body.
// The plain valid requests take the fast path.
func TestHotPathDifferential(t *testing.T) {
	fast, general := contractRouter(t, false), contractRouter(t, true)
	rng := rand.New(rand.NewPCG(19, 6))
	tookFast := 0
	for i := 0; i < 30000; i++ {
		op := rng.IntN(len(hotRoutes))
		seg := func() string {
			if rng.IntN(4) == 0 {
				return segments[rng.IntN(len(segments))]
			}
			return segments[rng.IntN(4)]
		}
		ct := "application/json"
		if rng.IntN(4) == 0 {
			ct = contentTypes[rng.IntN(len(contentTypes))]
		}
		var body []byte
		switch rng.IntN(4) {
		case 0:
			body = randomBody(rng)
		case 3:
			body = nearValid(op, rng)
		case 1:
			body = mutate(validBody(op, rng), rng)
		default:
			body = validBody(op, rng)
		}
		if same(t, fast, general, op, seg(), seg(), seg(), ct, body).fast {
			tookFast++
		}
	}
	for op := range hotRoutes {
		rng := rand.New(rand.NewPCG(uint64(op), 1))
		for _, ct := range contentTypes[:2] {
			if o := same(t, fast, general, op, "acme", "renderers", "document-123", ct, validBody(op, rng)); !o.fast || o.body == nil {
				t.Fatalf("%s with %q did not take the fast path: %+v", hotRoutes[op].op, ct, o)
			}
		}
	}
	t.Logf("%d of 30000 random requests took the fast path", tookFast)
	if tookFast < 3000 {
		t.Fatalf("only %d random requests took the fast path: the comparison is too weak", tookFast)
	}
}

// FuzzHotPath is TestHotPathDifferential on fuzzed requests.
func FuzzHotPath(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for op := range hotRoutes {
		f.Add(uint8(op), "acme", "renderers", "document-123", uint8(0), validBody(op, rng))
		f.Add(uint8(op), "a%2Fb", "*", strings.Repeat("x", 129), uint8(1), randomBody(rng))
	}
	f.Add(uint8(0), "acme", "w", "r", uint8(3), []byte(`{"session_id":"`+sid+`","ttl_ms":1.0}`))
	fast, general := contractRouter(f, false), contractRouter(f, true)
	f.Fuzz(func(t *testing.T, op uint8, realm, area, resource string, ct uint8, body []byte) {
		seg := func(s string) string { return strings.NewReplacer("/", "%2F", "?", "%3F", "#", "%23").Replace(s) }
		same(t, fast, general, int(op)%len(hotRoutes), seg(realm), seg(area), seg(resource), contentTypes[int(ct)%len(contentTypes)], body)
	})
}
