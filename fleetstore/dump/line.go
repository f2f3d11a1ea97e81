// Package dump is the desired set as JSON Lines: what `muster fleet export`
// writes and `muster fleet import` reads, to move a desired set between
// stores (bbolt and PostgreSQL) or keep a copy anyone can read.
//
// Each line is one JSON object. Per root, a counter line comes first:
//
//	{"family":"acme","root":"monitors","counter":7}
//
// counter is the root's counter, the number its next register mints, so a
// restored root never mints a name it held before, even one forgotten
// since. Then one line per spec, in name order:
//
//	{"family":"acme","root":"monitors","name":"repo-3","kind":"repo","spec":{"topic":"x"}}
//
// spec is the spec as stored, byte for byte. A spec whose bytes cannot sit
// in a line unchanged (one registered with whitespace or newlines, with
// invalid UTF-8, or with a duplicate member name) is given instead as
// "spec_base64": the standard base64 of its exact bytes. kind must be the
// name's kind. Members are exactly those; blank lines are skipped.
package dump

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/fleetstore"
)

// MaxLineBytes bounds one line: the largest spec in base64, and room for
// the rest.
const MaxLineBytes = 4*fleetstore.MaxSpecBytes/3 + 8<<10

// Line is one parsed line: a counter line (Name empty, Counter set) or a
// spec line (Name, Kind and Spec set, Counter 0).
type Line struct {
	Family, Root string
	Counter      uint64
	Name, Kind   string
	Spec         []byte
}

// LineError is why a line was refused.
type LineError struct {
	Msg string
}

func (e *LineError) Error() string { return e.Msg }

func lineErr(format string, args ...any) error {
	return &LineError{Msg: fmt.Sprintf(format, args...)}
}

type wire struct {
	Family     *string        `json:"family"`
	Root       *string        `json:"root"`
	Counter    *uint64        `json:"counter"`
	Name       *string        `json:"name"`
	Kind       *string        `json:"kind"`
	Spec       jsontext.Value `json:"spec"`
	SpecBase64 *string        `json:"spec_base64"`
}

// ParseLine reads one line (without its newline) and judges it whole: the
// family, root, name and kind as the store would, the counter in
// 1 … fleetstore.MaxCounter, the spec as Register would. A refusal is a
// *LineError.
func ParseLine(b []byte) (Line, error) {
	if len(b) > MaxLineBytes {
		return Line{}, lineErr("line longer than %d bytes", MaxLineBytes)
	}
	var w wire
	if err := jsonv2.Unmarshal(b, &w, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Line{}, lineErr("not one JSON object of the dump's members: %s", plain(err))
	}
	if w.Family == nil || w.Root == nil {
		return Line{}, lineErr("family and root are required")
	}
	l := Line{Family: *w.Family, Root: *w.Root}
	if err := fleetstore.CheckFamily(l.Family); err != nil {
		return Line{}, lineErr("family: %s", plain(err))
	}
	if _, err := muster.ParseFleetRoot(l.Root); err != nil {
		return Line{}, lineErr("root: %s", plain(err))
	}
	if w.Counter != nil {
		if w.Name != nil || w.Kind != nil || w.Spec != nil || w.SpecBase64 != nil {
			return Line{}, lineErr("a counter line has only family, root and counter")
		}
		if *w.Counter < 1 || *w.Counter > fleetstore.MaxCounter {
			return Line{}, lineErr("counter must be 1 to %d", uint64(fleetstore.MaxCounter))
		}
		l.Counter = *w.Counter
		return l, nil
	}
	if w.Name == nil || w.Kind == nil {
		return Line{}, lineErr("a spec line needs name, kind and spec (or counter for a counter line)")
	}
	kind, _, err := fleetstore.ParseMintedName(*w.Name)
	if err != nil {
		return Line{}, lineErr("name: %s", plain(err))
	}
	if kind != *w.Kind {
		return Line{}, lineErr("kind %q is not the kind of name %q", *w.Kind, *w.Name)
	}
	l.Name, l.Kind = *w.Name, kind
	switch {
	case w.Spec != nil && w.SpecBase64 != nil:
		return Line{}, lineErr("give spec or spec_base64, not both")
	case w.Spec != nil:
		l.Spec = bytes.Clone(w.Spec)
	case w.SpecBase64 != nil:
		if l.Spec, err = base64.StdEncoding.Strict().DecodeString(*w.SpecBase64); err != nil {
			return Line{}, lineErr("spec_base64 is not standard base64")
		}
	default:
		return Line{}, lineErr("a spec line needs spec or spec_base64")
	}
	if err := fleetstore.CheckSpec(l.Spec); err != nil {
		return Line{}, lineErr("spec: %s", plain(err))
	}
	return l, nil
}

// AppendLine appends l and a newline to b, as ParseLine reads it back: a
// counter line when l.Name is empty, else a spec line, the spec inline
// when its bytes survive that unchanged, else in spec_base64.
func AppendLine(b []byte, l Line) []byte {
	b = append(b, `{"family":`...)
	b, _ = jsontext.AppendQuote(b, l.Family)
	b = append(b, `,"root":`...)
	b, _ = jsontext.AppendQuote(b, l.Root)
	if l.Name == "" {
		b = append(b, `,"counter":`...)
		b = strconv.AppendUint(b, l.Counter, 10)
		return append(b, "}\n"...)
	}
	b = append(b, `,"name":`...)
	b, _ = jsontext.AppendQuote(b, l.Name)
	b = append(b, `,"kind":`...)
	b, _ = jsontext.AppendQuote(b, l.Kind)
	if inline(l.Spec) {
		b = append(b, `,"spec":`...)
		b = append(b, l.Spec...)
	} else {
		b = append(b, `,"spec_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, l.Spec)
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// inline reports whether spec can sit in a line as is: valid for the
// strict parser (UTF-8, no duplicate names) and already compact, so no
// byte of it would change or break the line.
func inline(spec []byte) bool {
	if !jsontext.Value(spec).IsValid() {
		return false
	}
	var c bytes.Buffer
	return json.Compact(&c, spec) == nil && bytes.Equal(c.Bytes(), spec)
}

// plain is an error's message without a *muster.Error's code prefix.
func plain(err error) string {
	if me, ok := err.(*muster.Error); ok {
		return me.Message
	}
	return err.Error()
}
