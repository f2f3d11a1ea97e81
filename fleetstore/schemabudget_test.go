package fleetstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/tests/hostile"
)

func TestSweepRefusesHostileSchemasFast(t *testing.T) {
	for _, levels := range []int{21, 25, 60} {
		t.Run(fmt.Sprintf("Levels%d", levels), func(t *testing.T) {
			start := time.Now()
			_, err := CompileSchema([]byte(hostile.Schema(levels)))
			took := time.Since(start)
			wantCode(t, err, muster.CodeInvalidRequest)
			if !strings.Contains(err.Error(), "$ref expansion") {
				t.Errorf("refusal does not name the limit: %v", err)
			}
			if took > 200*time.Millisecond {
				t.Errorf("refusal took %v", took)
			}
			t.Logf("%d levels (%d bytes) refused in %v", levels, len(hostile.Schema(levels)), took)
		})
	}
	// Below the expansion limit the same shape is an ordinary schema.
	s, err := CompileSchema([]byte(hostile.Schema(10)))
	must(t, err)
	if ok, err := s.Judge(ctx, []byte(`1`)); err != nil || ok {
		t.Errorf("10 levels: Judge(1) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.Judge(ctx, []byte(`"x"`)); err != nil || !ok {
		t.Errorf(`10 levels: Judge("x") = %v, %v; want true, nil`, ok, err)
	}
}

func TestSweepStructuralLimits(t *testing.T) {
	deep := strings.Repeat(`{"not":`, MaxSchemaDepth+1) + `true` + strings.Repeat(`}`, MaxSchemaDepth+1)
	var fan []string
	for i := 0; i <= MaxSchemaFanOut; i++ {
		fan = append(fan, fmt.Sprintf(`{"const":%d}`, i))
	}
	// Every level is its own $def, so nesting grows without expansion.
	var chain strings.Builder
	chain.WriteString(`{"$defs":{"d0":true`)
	for k := 1; k <= MaxSchemaNesting+1; k++ {
		fmt.Fprintf(&chain, `,"d%d":{"$ref":"#/$defs/d%d"}`, k, k-1)
	}
	fmt.Fprintf(&chain, `},"$ref":"#/$defs/d%d"}`, MaxSchemaNesting+1)
	for _, tt := range []struct{ name, schema, limit string }{
		{"Depth", deep, "schema depth"},
		{"Pattern", `{"pattern":"` + strings.Repeat("a", MaxSchemaPatternBytes+1) + `"}`, "pattern size"},
		{"PatternProperties", `{"patternProperties":{"` + strings.Repeat("a", MaxSchemaPatternBytes+1) + `":true}}`, "pattern size"},
		{"FanOut", `{"anyOf":[` + strings.Join(fan, ",") + `]}`, "combinator fan-out"},
		{"Nesting", chain.String(), "subschema nesting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileSchema([]byte(tt.schema))
			wantCode(t, err, muster.CodeInvalidRequest)
			if err != nil && !strings.Contains(err.Error(), "(limit: "+tt.limit+")") {
				t.Errorf("refusal does not name %q: %v", tt.limit, err)
			}
		})
	}
	// At the limits, accepted.
	for _, ok := range []string{
		strings.Repeat(`{"not":`, MaxSchemaDepth) + `true` + strings.Repeat(`}`, MaxSchemaDepth),
		`{"anyOf":[` + strings.Join(fan[:MaxSchemaFanOut], ",") + `]}`,
		`{"pattern":"` + strings.Repeat("a", MaxSchemaPatternBytes) + `"}`,
	} {
		if _, err := CompileSchema([]byte(ok)); err != nil {
			t.Errorf("schema at a limit refused: %v", err)
		}
	}
}

// A schema whose recursion doubles per level of the instance passes the
// static checks (recursion counts once) and is stopped by the per-spec
// budget, in about the time the budget's evaluations take.
func TestSweepSpecBudget(t *testing.T) {
	schema := hostile.DoublingSchema
	s, err := CompileSchema([]byte(schema))
	must(t, err)
	spec := hostile.DeepSpec(40)
	start := time.Now()
	_, err = s.Judge(ctx, []byte(spec))
	took := time.Since(start)
	wantCode(t, err, muster.CodeInvalidRequest)
	if !strings.Contains(err.Error(), "per spec") {
		t.Errorf("not the per-spec budget: %v", err)
	}
	if took > 2*time.Second {
		// 200,000 evaluations take about 0.1 s on one core.
		t.Errorf("budget ran out after %v", took)
	}
	t.Logf("per-spec budget (%d evaluations) ran out after %v", SweepSpecBudget, took)
	// A shallow instance of the same schema is fine.
	if ok, err := s.Judge(ctx, []byte(`{"a":{"a":1}}`)); err != nil || !ok {
		t.Errorf("shallow: %v, %v", ok, err)
	}
}

func TestSweepMeter(t *testing.T) {
	t.Run("RequestBudget", func(t *testing.T) {
		m := &meter{ctx: ctx, spec: 100, req: 5}
		err := runMeter(m, 10)
		if !errors.Is(err, errRequestBudget) {
			t.Errorf("err = %v, want the request budget", err)
		}
	})
	t.Run("SpecBudget", func(t *testing.T) {
		m := &meter{ctx: ctx, spec: 3, req: 100}
		if err := runMeter(m, 10); !errors.Is(err, errSpecBudget) {
			t.Errorf("err = %v, want the spec budget", err)
		}
	})
	t.Run("ContextEnds", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		m := &meter{ctx: c, spec: 1 << 20, req: 1 << 20}
		if err := runMeter(m, 5000); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if 1<<20-m.spec > 1024 {
			t.Errorf("took %d steps to notice the context", 1<<20-m.spec)
		}
	})
	t.Run("Judge", func(t *testing.T) {
		s, err := CompileSchema([]byte(topicSchema))
		must(t, err)
		c, cancel := context.WithCancel(ctx)
		s.Budget(c)
		cancel()
		if _, err := s.Judge(c, []byte(`{"topic":"x"}`)); !errors.Is(err, context.Canceled) {
			t.Errorf("Judge after the client left = %v, want context.Canceled", err)
		}
	})
}

func runMeter(m *meter, n int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = r.(abort).err
		}
	}()
	for range n {
		m.step()
	}
	return nil
}

func TestSweepLegitLargeSchema(t *testing.T) {
	raw := hostile.LegitSchema(MaxSchemaBytes)
	if len(raw) > MaxSchemaBytes || len(raw) < MaxSchemaBytes-2048 {
		t.Fatalf("schema is %d bytes", len(raw))
	}
	if !json.Valid([]byte(raw)) {
		t.Fatal("generated schema is not JSON")
	}
	start := time.Now()
	s, err := CompileSchema([]byte(raw))
	must(t, err)
	t.Logf("%d-byte schema compiled and checked in %v", len(raw), time.Since(start))
	for _, tt := range []struct {
		spec  string
		valid bool
	}{
		{`{"topic":"a","field3":{"id":"web-1","primary":{"host":"h","port":80},"replicas":[{"host":"r"}],"labels":{"x":"y"},"mode":"active"}}`, true},
		{`{"topic":"a","field3":{"mode":"active"}}`, false},
		{`{"topic":"a","field7":{"id":"Bad Id"}}`, false},
		{`{"field1":{"id":"a"}}`, false},
	} {
		ok, err := s.Judge(ctx, []byte(tt.spec))
		must(t, err)
		if ok != tt.valid {
			t.Errorf("Judge(%s) = %v, want %v", tt.spec, ok, tt.valid)
		}
	}
}

// The first look at the expansion (on the document, before compiling)
// refuses only what the compiled walk refuses too: never a schema the full
// check would accept.
func TestRawExpansionAgreesWithCompiled(t *testing.T) {
	schemas := []string{hostile.LegitSchema(MaxSchemaBytes), hostile.DoublingSchema, topicSchema,
		`{"$defs":{"a":{"$ref":"#"}},"anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}`,
		`{"$id":"urn:x","$defs":{"a":{"$id":"urn:y","$defs":{"b":true},"$ref":"#/$defs/b"}},"$ref":"#/$defs/a"}`}
	for levels := 1; levels <= 22; levels++ {
		schemas = append(schemas, hostile.Schema(levels))
	}
	for i, raw := range schemas {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
		must(t, err)
		fast := rawExpansion(doc)
		_, full := compileSchema([]byte(raw), false)
		if fast && !errors.Is(full, errExpansion) {
			t.Errorf("schema %d: the first look refuses, the compiled walk says %v", i, full)
		}
		if i >= 5 && i-4 >= 16 && !fast { // 16+ levels are beyond the limit
			t.Errorf("schema %d (%d levels): the first look let it through to compilation", i, i-4)
		}
	}
}
