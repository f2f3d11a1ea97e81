// Package hostile builds the requests of the abuse report (issue 16) and
// their legitimate counterparts, for the unit, end-to-end and fault tests.
package hostile

import (
	"fmt"
	"strings"
)

// Schema is the schema of the abuse report: level k is an anyOf of
// two $refs to level k-1, so validating a value that fails the bottom level
// doubles the work per level (2^levels evaluations). 21 levels is 1.4 KB.
func Schema(levels int) string {
	var b strings.Builder
	b.WriteString(`{"$defs":{"l0":{"type":"string"}`)
	for k := 1; k <= levels; k++ {
		fmt.Fprintf(&b, `,"l%d":{"anyOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, k, k-1, k-1)
	}
	fmt.Fprintf(&b, `},"$ref":"#/$defs/l%d"}`, levels)
	return b.String()
}

// LegitSchema is a realistic schema of about size bytes: shared $defs
// referenced from many properties, nested objects, patterns and enums.
func LegitSchema(size int) string {
	var b strings.Builder
	b.WriteString(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{`)
	b.WriteString(`"id":{"type":"string","pattern":"^[a-z][a-z0-9-]{0,62}$"},`)
	b.WriteString(`"port":{"type":"integer","minimum":1,"maximum":65535},`)
	b.WriteString(`"endpoint":{"type":"object","properties":{"host":{"type":"string"},"port":{"$ref":"#/$defs/port"}},"required":["host"]},`)
	b.WriteString(`"labels":{"type":"object","additionalProperties":{"type":"string","maxLength":256}}},`)
	b.WriteString(`"required":["topic"],"properties":{"topic":{"type":"string"}`)
	for i := 0; b.Len() < size-300; i++ {
		fmt.Fprintf(&b, `,"field%d":{"type":"object","description":"generated field %d of a large but ordinary schema","properties":{"id":{"$ref":"#/$defs/id"},"primary":{"$ref":"#/$defs/endpoint"},"replicas":{"type":"array","items":{"$ref":"#/$defs/endpoint"},"maxItems":16},"labels":{"$ref":"#/$defs/labels"},"mode":{"enum":["active","standby","off"]}},"anyOf":[{"required":["id"]},{"required":["primary"]}]}`, i, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// DoublingSchema passes every static check (its recursion counts once) but
// doubles the work per level of the instance: with DeepSpec(40) it asks for
// 2^40 evaluations, which only a work budget stops.
const DoublingSchema = `{"$defs":{"n":{"properties":{"a":{"$ref":"#/$defs/n"}},"allOf":[{"properties":{"a":{"$ref":"#/$defs/n"}}}]}},"$ref":"#/$defs/n"}`

// DeepSpec is {"a":{"a":…1…}} nested depth times.
func DeepSpec(depth int) string {
	return strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
}
