package app

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/musterhq/muster/handlers"
)

// Configuration errors are written for the person editing the file: which
// token (by position, from 1, and name), which key, and what is expected,
// never a validator's or a YAML library's Go-facing text.

// newConfigValidator checks FileConfig by its `validate` tags and reports
// fields by their YAML keys.
func newConfigValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			return f.Name
		}
		return name
	})
	_ = v.RegisterValidation("origin", func(fl validator.FieldLevel) bool {
		return handlers.CheckOrigin(fl.Field().String()) == nil
	})
	return v
}

// indexRe finds the list indices of a validator namespace ("tokens[0]").
var indexRe = regexp.MustCompile(`^(\w+)\[(\d+)\]$`)

// describeValidation turns validator errors into one line per problem:
//
//	token 1 ("acme-workers"): sha256: must be exactly 64 characters, got 3
func describeValidation(cfg *FileConfig, err error) error {
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return err
	}
	lines := make([]string, 0, len(verrs))
	for _, fe := range verrs {
		lines = append(lines, where(cfg, fe.Namespace())+": "+expected(fe))
	}
	return errors.New(strings.Join(lines, "; "))
}

// where names the place of a field from its namespace
// ("FileConfig.tokens[0].grants[2]" → `token 1 ("a"): grants: item 3`).
func where(cfg *FileConfig, ns string) string {
	parts := strings.Split(ns, ".")[1:] // drop the root type
	var out []string
	for _, p := range parts {
		m := indexRe.FindStringSubmatch(p)
		if m == nil {
			out = append(out, p)
			continue
		}
		i, _ := strconv.Atoi(m[2])
		if m[1] == "tokens" && i < len(cfg.Tokens) {
			label := fmt.Sprintf("token %d", i+1)
			if n := cfg.Tokens[i].Name; n != "" {
				label += fmt.Sprintf(" (%q)", n)
			}
			out = append(out, label)
			continue
		}
		out = append(out, fmt.Sprintf("%s: item %d", m[1], i+1))
	}
	return strings.Join(out, ": ")
}

// expected says in words what a failed validation tag requires.
func expected(fe validator.FieldError) string {
	p := fe.Param()
	unit := " characters"
	got := ""
	switch fe.Kind() {
	case reflect.Slice, reflect.Map, reflect.Array:
		unit = " items"
		got = fmt.Sprintf(", got %d", reflect.ValueOf(fe.Value()).Len())
	case reflect.String:
		got = fmt.Sprintf(", got %d", len(fe.Value().(string)))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		unit = "" // a number (or a duration): the bound is the value itself
		got = fmt.Sprintf(", got %v", fe.Value())
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "len":
		return fmt.Sprintf("must be exactly %s%s%s", p, unit, got)
	case "max":
		return fmt.Sprintf("must be at most %s%s%s", p, unit, got)
	case "min":
		return fmt.Sprintf("must be at least %s%s%s", p, unit, got)
	case "hexadecimal":
		return "must be hexadecimal digits (0-9, a-f)"
	case "lowercase":
		return "must be lowercase"
	case "printascii":
		return "must be printable ASCII"
	case "excludesall":
		return fmt.Sprintf("must not contain any of %q", p)
	case "origin":
		if err := handlers.CheckOrigin(fmt.Sprint(fe.Value())); err != nil {
			return err.Error()
		}
		return "must be an exact origin such as https://dash.example.com"
	case "unique":
		return "must not list the same value twice"
	case "oneof":
		return fmt.Sprintf("must be one of %s, got %q", strings.Join(strings.Fields(p), ", "), fmt.Sprint(fe.Value()))
	case "gt", "gte", "lt", "lte":
		ops := map[string]string{"gt": "greater than", "gte": "at least", "lt": "less than", "lte": "at most"}
		return fmt.Sprintf("must be %s %s", ops[fe.Tag()], p)
	}
	if p != "" {
		return fmt.Sprintf("must satisfy %s=%s", fe.Tag(), p)
	}
	return "must satisfy " + fe.Tag()
}

// yamlUnknownRe and yamlTypeRe match yaml.v3's decoding messages.
var (
	yamlUnknownRe = regexp.MustCompile(`line (\d+): field (.+) not found in type [\w.]*?(\w+)$`)
	yamlLineRe    = regexp.MustCompile(`^line \d+: `)
	yamlTypeRe    = regexp.MustCompile("line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
)

// describeDecode rewrites a YAML decoding error in the file's terms.
func describeDecode(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("the file is empty: it must list at least one token under `tokens:` (run without --config for dev mode)")
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if m := yamlUnknownRe.FindStringSubmatch(l); m != nil {
			l = fmt.Sprintf("line %s: unknown key %q %s (known keys: %s)", m[1], m[2], placeOf(m[3]), knownKeys(m[3]))
		} else if m := yamlTypeRe.FindStringSubmatch(l); m != nil {
			l = fmt.Sprintf("line %s: expected %s, found a %s", m[1], goTypeWords(m[4]), yamlTypeWords(m[2]))
			if m[3] != "" && !strings.HasSuffix(m[3], "...") {
				l += fmt.Sprintf(" (%s)", m[3])
			}
		}
		if strings.Contains(l, "app.") || strings.Contains(l, "unmarshal") {
			// Anything else yaml.v3 says in Go's terms.
			l = yamlLineRe.FindString(l) + "this value does not fit here: see the file format in docs/operations.md"
		}
		lines = append(lines, l)
	}
	return errors.New(strings.Join(lines, "; "))
}

// configTypes are the structs of the file, by Go type name.
var configTypes = map[string]reflect.Type{
	"FileConfig":   reflect.TypeFor[FileConfig](),
	"TokenConfig":  reflect.TypeFor[TokenConfig](),
	"LimitsConfig": reflect.TypeFor[LimitsConfig](),
	"BrokerLimits": reflect.TypeFor[BrokerLimits](),
	"FamilyQuota":  reflect.TypeFor[FamilyQuota](),
	"CORSConfig":   reflect.TypeFor[CORSConfig](),
	"LogConfig":    reflect.TypeFor[LogConfig](),
	"TLSConfig":    reflect.TypeFor[TLSConfig](),
}

func placeOf(typeName string) string {
	switch typeName {
	case "FileConfig":
		return "at the top level"
	case "TokenConfig":
		return "in a token"
	case "BrokerLimits":
		return "in limits.broker"
	case "FamilyQuota":
		return "in a family's quota"
	case "CORSConfig":
		return "in cors"
	}
	return "in " + strings.ToLower(strings.TrimSuffix(typeName, "Config"))
}

func knownKeys(typeName string) string {
	t, ok := configTypes[typeName]
	if !ok {
		return "see docs/operations.md"
	}
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return strings.Join(keys, ", ")
}

func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "a whole number"
	case t == "bool":
		return "true or false"
	case t == "time.Duration":
		return "a duration such as 5s or 500ms"
	}
	return "a mapping of keys"
}

func yamlTypeWords(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	case "int":
		return "number"
	}
	return tag
}
