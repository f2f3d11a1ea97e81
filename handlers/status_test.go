package handlers

import (
	"maps"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/api"
)

// contractCodes reads the code list of openapi.yaml (ErrorCode's
// x-extensible-enum), in its order.
func contractCodes(t *testing.T) []muster.Code {
	t.Helper()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ref := spec.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("no ErrorCode schema in openapi.yaml")
	}
	list, ok := ref.Value.Extensions["x-extensible-enum"].([]any)
	if !ok {
		t.Fatalf("ErrorCode x-extensible-enum is %T, want a list", ref.Value.Extensions["x-extensible-enum"])
	}
	var codes []muster.Code
	for _, v := range list {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("ErrorCode x-extensible-enum holds %T %v, want strings", v, v)
		}
		codes = append(codes, muster.Code(s))
	}
	if len(codes) < 20 {
		t.Fatalf("read only %d codes from openapi.yaml", len(codes))
	}
	return codes
}

// TestStatusTableIsTheContracts: the server knows exactly the contract's
// codes, in its order, and answers each with a status of its own row — the
// one docs/client-operations.md states.
func TestStatusTableIsTheContracts(t *testing.T) {
	want := contractCodes(t)
	if got := muster.Codes(); !slices.Equal(got, want) {
		t.Errorf("muster.Codes() = %v\ncontract codes   %v", got, want)
	}
	for _, c := range want {
		if _, ok := statuses[c]; !ok {
			t.Errorf("code %q of the contract has no HTTP status", c)
		}
	}
	for c := range statuses {
		if !slices.Contains(want, c) {
			t.Errorf("status table has %q, which the contract does not list", c)
		}
	}
	if got := httpStatus("brand_new"); got != 500 {
		t.Errorf("unknown code answers %d, want 500", got)
	}

	doc, err := os.ReadFile("../docs/client-operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllSubmatch(doc, -1)
	documented := map[muster.Code]int{}
	for _, r := range rows {
		n, _ := strconv.Atoi(string(r[2]))
		documented[muster.Code(r[1])] = n
	}
	for _, c := range want {
		if d, ok := documented[c]; !ok {
			t.Errorf("docs/client-operations.md has no row for %q", c)
		} else if d != statuses[c] {
			t.Errorf("docs/client-operations.md answers %q with %d, the server with %d", c, d, statuses[c])
		}
	}
}

// TestRetryAfterOnEvery429And503: every problem answered 429 or 503 says
// when to try again (a whole number of seconds, at least 1), whichever
// path writes it; no other problem does.
func TestRetryAfterOnEvery429And503(t *testing.T) {
	for _, code := range muster.Codes() {
		t.Run(string(code), func(t *testing.T) {
			w := httptest.NewRecorder()
			writeProblem(w, code, "detail")
			got := w.Header().Get("Retry-After")
			status := httpStatus(code)
			if status != 429 && status != 503 {
				if got != "" {
					t.Fatalf("%d answer with Retry-After %q", status, got)
				}
				return
			}
			if n, err := strconv.Atoi(got); err != nil || n < 1 {
				t.Fatalf("%d answer with Retry-After %q, want whole seconds >= 1", status, got)
			}
		})
	}
	// docs/operations.md states the same values.
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (429|503) \\| ([0-9]+) \\|").FindAllSubmatch(doc, -1)
	documented := map[muster.Code]int{}
	for _, r := range rows {
		documented[muster.Code(r[1])], _ = strconv.Atoi(string(r[3]))
	}
	if !maps.Equal(documented, retryAfter) {
		t.Errorf("docs/operations.md states Retry-After %v, the server %v", documented, retryAfter)
	}
	// The placement answer writes its own 503.
	s := &Server{}
	w := httptest.NewRecorder()
	s.writeMisdirected(w, httptest.NewRequest("GET", "/", nil), "acme")
	if w.Code != 503 || w.Header().Get("Retry-After") != strconv.Itoa(retryAfter[muster.CodeFamilyUnavailable]) {
		t.Fatalf("family_unavailable: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}
