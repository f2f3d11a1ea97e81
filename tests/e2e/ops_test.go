package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/musterhq/muster/api"
)

func TestSpecServedIsTheFile(t *testing.T) {
	b := MustStartBroker(t)
	resp := b.Do(t, Request{Method: "GET", Path: "/openapi.yaml"})
	if resp.Status != 200 {
		t.Fatalf("status %d", resp.Status)
	}
	file, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp.Body, file) {
		t.Fatal("GET /openapi.yaml differs from openapi.yaml")
	}
	// The spec embedded for validation is the same document.
	embedded, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(file)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(embedded)
	c, _ := json.Marshal(loaded)
	if !bytes.Equal(a, c) {
		t.Fatal("the embedded spec differs from openapi.yaml: run make generate")
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI 3.0.3 document: %v", err)
	}
	if loaded.OpenAPI != "3.0.3" {
		t.Fatalf("openapi = %q, want 3.0.3", loaded.OpenAPI)
	}
}

// Every operation has an operationId and examples for its parameters and
// bodies, so Swagger UI "Try it out" starts from working input.
func TestSpecHasExamples(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			for _, p := range op.Parameters {
				v := p.Value
				if v.Required && v.Example == nil && len(v.Examples) == 0 && (v.Schema == nil || v.Schema.Value.Example == nil) {
					t.Errorf("%s: required parameter %s has no example", op.OperationID, v.Name)
				}
			}
			if rb := op.RequestBody; rb != nil {
				mt := rb.Value.Content.Get("application/json")
				if mt == nil || (mt.Example == nil && len(mt.Examples) == 0) {
					t.Errorf("%s: request body has no example", op.OperationID)
				}
			}
		}
	}
}

func TestOperationsEndpoints(t *testing.T) {
	b := MustStartBroker(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp := b.Do(t, Request{Method: "GET", Path: path})
		var h struct {
			Status  string `json:"status"`
			Epoch   string `json:"epoch"`
			DevMode bool   `json:"dev_mode"`
		}
		resp.JSON(t, &h)
		if resp.Status != 200 || h.Epoch != b.Epoch() || !h.DevMode {
			t.Errorf("%s: %d %+v", path, resp.Status, h)
		}
	}
	docs := b.Do(t, Request{Method: "GET", Path: "/docs/"})
	if docs.Status != 200 || !strings.Contains(string(docs.Body), "swagger") {
		t.Errorf("/docs/: %d", docs.Status)
	}
	// Metrics: private registry, route-pattern labels, no concrete path.
	b.Do(t, Request{Method: "POST", Path: "/v1/sessions/0123456789abcdef0123456789abcdef/keepalive"})
	m := b.Do(t, Request{Method: "GET", Path: "/metrics"})
	text := string(m.Body)
	for _, want := range []string{
		`muster_http_requests_total{code="404",method="POST",route="/v1/sessions/{session_id}/keepalive"} 1`,
		"muster_sessions 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(text, "0123456789abcdef0123456789abcdef") {
		t.Error("a session id reached a metric label")
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	b := MustStartBroker(t)
	tests := []struct {
		method, path, code string
		status             int
	}{
		{"GET", "/nope", "not_found", 404},
		{"GET", "/v1/leases/a/b", "not_found", 404},
		{"PUT", "/v1/sessions", "method_not_allowed", 405},
		{"DELETE", "/healthz", "method_not_allowed", 405},
	}
	for _, tc := range tests {
		resp := b.Do(t, Request{Method: tc.method, Path: tc.path})
		if resp.Status != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.path, resp.Status, tc.status)
			continue
		}
		if code, _ := resp.Problem(t); code != tc.code {
			t.Errorf("%s %s: code %q, want %q", tc.method, tc.path, code, tc.code)
		}
	}
}

// Every muster_ metric a broker exposes has a row in the metrics tables of
// docs/operations.md. (A labelled metric appears once it has a series: the
// broker's own at start, the rest when used.)
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	b := MustStartBroker(t)
	text := string(b.Do(t, Request{Method: "GET", Path: "/metrics"}).Body)
	n := 0
	for _, line := range strings.Split(text, "\n") {
		name, ok := strings.CutPrefix(line, "# HELP muster_")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut("muster_"+name, " ")
		n++
		if !strings.Contains(string(doc), "| `"+name+"`") && !strings.Contains(string(doc), "| `"+name+"{") {
			t.Errorf("docs/operations.md has no row for %s", name)
		}
	}
	if n < 30 {
		t.Errorf("only %d muster_ metrics exposed", n)
	}
}
