package fleetstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/tests/hostile"
)

// FuzzCompileSchema: any bytes either compile or fail with invalid_request
// or payload_too_large; the first look at the expansion never refuses what
// the compiled walk accepts; a compiled schema judges any spec without
// panicking, within its budget, in bounded time.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range []string{`true`, `{}`, topicSchema, hostile.Schema(8), hostile.DoublingSchema,
		`{"anyOf":[{"$ref":"#"},{"$ref":"#"}]}`, `{"pattern":"^(a+)+$"}`, `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`} {
		f.Add([]byte(s), []byte(`{"a":{"a":1}}`))
	}
	f.Fuzz(func(t *testing.T, schema, spec []byte) {
		s, err := CompileSchema(schema)
		if errors.Is(err, errExpansion) {
			if _, full := compileSchema(schema, false); !errors.Is(full, errExpansion) {
				t.Fatalf("the first look refused a schema the compiled walk does not: %v", full)
			}
		}
		if err != nil {
			if c := muster.ErrorCode(err); c != muster.CodeInvalidRequest && c != muster.CodePayloadTooLarge {
				t.Fatalf("CompileSchema: %v", err)
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err = s.Judge(ctx, spec)
		if err != nil && muster.ErrorCode(err) != muster.CodeInvalidRequest {
			t.Fatalf("Judge: %v", err)
		}
		if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 4*time.Second {
			t.Fatalf("Judge took %v", time.Since(start))
		}
	})
}
