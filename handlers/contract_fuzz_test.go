package handlers

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzCheckOneJSONValue: the body check accepts only what encoding/json
// (the generated decoder) reads as exactly one value, of valid UTF-8, so
// nothing it accepts can be read differently downstream.
func FuzzCheckOneJSONValue(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1} x`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1,"a":2}`, ` [1,2] `, `"\ud83d\ude00"`, ``, `nul`, `{"a":{"b":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return // an empty body is the validator's to refuse
		}
		err := checkOneJSONValue(data)
		if err == nil && (!json.Valid(data) || !utf8.Valid(data)) {
			t.Fatalf("accepted %q, which is not one valid JSON value of UTF-8", data)
		}
		if err != nil && json.Valid(data) && utf8.Valid(data) {
			// Refusing valid JSON is allowed only for the stricter rules.
			var v any
			if json.Unmarshal(data, &v) != nil {
				t.Fatalf("json.Valid but not decodable: %q", data)
			}
			if msg := err.Error(); msg != "invalid_request: the request body has an object with a duplicate member name" &&
				msg != "invalid_request: the request body has an invalid escape (such as a lone surrogate \\ud800), which is not valid UTF-8" {
				t.Fatalf("refused valid JSON %q: %v", data, err)
			}
		}
	})
}
