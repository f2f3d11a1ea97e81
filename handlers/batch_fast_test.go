package handlers

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// checkFastSame holds fastBatch to the general path: when it accepts a
// body, the body is one JSON value (what checkJSONBody checks), decodeBatch
// accepts it with the same request, and so does the contract (kin-openapi,
// then the generated decoder). It reports whether fastBatch accepted.
func checkFastSame(t *testing.T, data []byte) bool {
	t.Helper()
	batchRoute(t)
	rules := batchRouteOnce.rules
	got, ok := fastBatch(data, rules)
	if !ok {
		return false
	}
	if err := checkOneJSONValue(data); err != nil {
		t.Fatalf("body %q: fastBatch accepted what checkJSONBody refuses: %v", data, err)
	}
	want, err := decodeBatch(data, rules)
	if err != nil {
		t.Fatalf("body %q: fastBatch accepted what decodeBatch refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body %q: fastBatch read %+v, decodeBatch %+v", data, got, want)
	}
	if _, err := contractVerdict(t, data); err != nil {
		t.Fatalf("body %q: fastBatch accepted what the contract refuses: %v", data, err)
	}
	return true
}

// plainBatches are bodies as clients write them: fastBatch must take them
// (or the fast path would serve nobody).
var plainBatches = func() []string {
	sess := `"session_id":"0123456789abcdef0123456789abcdef"`
	out := []string{
		`{` + sess + `,"ops":[{"op":"acquire","route":"lease://a/b/c","ttl_ms":1000}]}`,
		`{"ops":[{"route":"lease://a/b/c","fencing_token":1,"op":"release"},{"op":"extend","route":"lease://x-1/b.2/c_3","fencing_token":9,"ttl_ms":100}],` + sess + `}`,
		"{\n  " + sess + ",\n  \"ops\": [\n    {\"op\": \"acquire\", \"route\": \"lease://a/b/c\", \"ttl_ms\": 600000}\n  ]\n}\n",
		"\t{ " + sess + " ,\r\n\"ops\" :[ { \"op\" : \"release\" , \"route\" : \"lease://a/b/c\" , \"fencing_token\" : 9223372036854775 } ] } ",
	}
	var acq, rel []string
	for i := range 64 {
		acq = append(acq, fmt.Sprintf(`{"op":"acquire","route":"lease://peers/w%d/b%d","ttl_ms":60000}`, i, i))
		rel = append(rel, fmt.Sprintf(`{"op":"release","route":"lease://peers/w%d/b%d","fencing_token":%d}`, i, i, 1000+i))
	}
	out = append(out, `{`+sess+`,"ops":[`+strings.Join(acq, ",")+`]}`, `{`+sess+`,"ops":[`+strings.Join(rel, ",")+`]}`)
	var many []string
	for i := range 256 {
		many = append(many, fmt.Sprintf(`{"op":"acquire","route":"lease://a/b/c%d","ttl_ms":1000}`, i))
	}
	return append(out, `{`+sess+`,"ops":[`+strings.Join(many, ",")+`]}`)
}()

func TestFastBatchTakesPlainBodies(t *testing.T) {
	for i, s := range plainBatches {
		if !checkFastSame(t, []byte(s)) {
			t.Errorf("plain body %d not taken by the fast path: %q", i, s)
		}
	}
}

// TestFastBatchMatchesDecodeBatch: the contract's own cases (batchSeeds,
// most of them refusals) and random mutations of plain bodies.
func TestFastBatchMatchesDecodeBatch(t *testing.T) {
	for _, s := range batchSeeds {
		checkFastSame(t, []byte(s))
	}
	rng := rand.New(rand.NewPCG(31, 64))
	alphabet := []byte(` {}[]:,"\-+.eE0123456789aoprstl/\u00e9` + "\t\n\x00\x7f\xff")
	taken := 0
	for range 20000 {
		b := []byte(plainBatches[rng.IntN(len(plainBatches)-1)]) // not the 256-op one: kin-openapi is slow on it
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		if checkFastSame(t, b) {
			taken++
		}
	}
	t.Logf("%d of 20000 mutated bodies took the fast path", taken)
}

// FuzzFastBatch: on any body fastBatch accepts, decodeBatch and the
// contract accept the same request.
func FuzzFastBatch(f *testing.F) {
	for _, s := range append(append([]string{}, plainBatches...), batchSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkFastSame(t, data) })
}

// TestBatchFastPathServesAsGeneral: the same batches through a server with
// the fast path and one without give the same answers (times aside: the
// two brokers' clocks differ), refusals included.
func TestBatchFastPathServesAsGeneral(t *testing.T) {
	fast, general := benchServer(t), benchServer(t)
	general.contract.generalOnly = true
	if op := findOp(fast.contract, "batchLeases"); op == nil || !op.batch || fast.contract.batch == nil {
		t.Fatal("the batch operation has no fast path")
	}
	sessions := map[*Server]string{fast: newSession(t, fast), general: newSession(t, general)}
	times := regexp.MustCompile(`"\d{4}-\d\d-\d\dT[0-9:.]+Z"`)
	left := regexp.MustCompile(`"expires_after_request_ms":\d+`)
	batch := func(op string, n int, tokens []int64, ttl bool) string {
		var ops []string
		for i := range n {
			o := fmt.Sprintf(`{"op":%q,"route":"lease://load/w/r%d"`, op, i)
			if tokens != nil {
				o += fmt.Sprintf(`,"fencing_token":%d`, tokens[i])
			}
			if ttl {
				o += `,"ttl_ms":60000`
			}
			ops = append(ops, o+"}")
		}
		return `{"session_id":"%s", "ops":[` + strings.Join(ops, ",\n") + `]}`
	}
	post := func(s *Server, body string) (int, string) {
		w := serve(s, "POST", "/v1/leases/batch", strings.ReplaceAll(body, "%s", sessions[s]))
		return w.Code, left.ReplaceAllString(times.ReplaceAllString(w.Body.String(), `"T"`), `"expires_after_request_ms":0`)
	}
	var tokens []int64
	step := func(body string) {
		t.Helper()
		fc, fa := post(fast, body)
		gc, ga := post(general, body)
		if fc != gc || fa != ga {
			t.Fatalf("body %q:\n fast:    %d %s\n general: %d %s", body, fc, fa, gc, ga)
		}
		var out struct {
			Results []struct {
				Lease struct {
					FencingToken int64 `json:"fencing_token"`
				} `json:"lease"`
			} `json:"results"`
		}
		if json.Unmarshal([]byte(fa), &out) == nil && len(out.Results) > 0 && out.Results[0].Lease.FencingToken > 0 {
			tokens = tokens[:0]
			for _, r := range out.Results {
				tokens = append(tokens, r.Lease.FencingToken)
			}
		}
	}
	step(batch("acquire", 64, nil, true))
	held := append([]int64{}, tokens...)
	if len(held) != 64 {
		c, a := post(fast, batch("acquire", 1, nil, true))
		t.Fatalf("the acquires gave %d tokens; one more: %d %s", len(held), c, a)
	}
	step(batch("acquire", 64, nil, true)) // already held
	step(batch("extend", 64, held, true))
	wrong := make([]int64, 64)
	for i := range wrong {
		wrong[i] = held[i] + 1000
	}
	step(batch("release", 64, wrong, false)) // fenced
	step(batch("release", 64, held, false))
	step(batch("release", 64, held, false)) // not held: a success
	step(batch("acquire", 3, nil, false))   // refused: ttl_ms missing
	step(`{"session_id":"%s","ops":[{"op":"acquire","route":"lease://load/w/*","ttl_ms":1000}]}`)
	step(`{"session_id":"%s","ops":[{"op":"acquire","route":"lease://load/w/r\u0031","ttl_ms":1000}]}`)
	step(`{"session_id":"0123456789abcdef0123456789abcdef","ops":[{"op":"acquire","route":"lease://load/w/r1","ttl_ms":1000}]}`)
}
