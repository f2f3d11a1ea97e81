package fleetstore

import (
	"encoding/json"

	"github.com/musterhq/muster"
)

// The shape of a spec, bounded at register so that no stored spec can make
// one validation deep or one comparison costly: what a sweep costs depends
// on the schema and on the specs, and these limits are the specs' half.
// Specs stored before the limits existed are checked again when a sweep
// reads them (see SweepResult.Invalid); they are never judged, folded or
// deleted for it.
const (
	// MaxSpecDepth is the deepest nesting of arrays and objects in a spec
	// (a scalar is depth 0, [] and {} are depth 1).
	MaxSpecDepth = 64
	// MaxSpecNumberBytes is the longest number literal in a spec.
	MaxSpecNumberBytes = 64
	// MaxSpecExponentDigits is the most digits of a number literal's
	// exponent: 1e999 is a number, 1e1000 is not (a validator compares
	// numbers exactly, and 1e1000000 costs it milliseconds per comparison).
	MaxSpecExponentDigits = 3
)

// checkSpec applies the register-time rules to spec: size, one valid JSON
// value, and shape (checkSpecShape).
func checkSpec(spec []byte) error {
	if len(spec) > MaxSpecBytes {
		return muster.Errorf(muster.CodePayloadTooLarge, "spec is larger than %d bytes", MaxSpecBytes)
	}
	if !json.Valid(spec) {
		return muster.Errorf(muster.CodeInvalidRequest, "spec is not one valid JSON value")
	}
	return checkSpecShape(spec)
}

// checkSpecShape refuses a valid JSON value that nests deeper than
// MaxSpecDepth or holds a number beyond MaxSpecNumberBytes or
// MaxSpecExponentDigits, with CodeInvalidRequest naming the limit. It reads
// the bytes once, allocating nothing; spec must be valid JSON (json.Valid).
func checkSpecShape(spec []byte) error {
	depth := 0
	for i := 0; i < len(spec); i++ {
		switch c := spec[i]; {
		case c == '"':
			for i++; spec[i] != '"'; i++ {
				if spec[i] == '\\' {
					i++
				}
			}
		case c == '[' || c == '{':
			if depth++; depth > MaxSpecDepth {
				return errSpecDepth
			}
		case c == ']' || c == '}':
			depth--
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(spec) && isNumberByte(spec[j]) {
				j++
			}
			if numberTooBig(spec[i:j]) {
				return errSpecNumber
			}
			i = j - 1
		}
	}
	return nil
}

// numberTooBig reports whether one number literal, a spec's or a schema's,
// is beyond MaxSpecNumberBytes or MaxSpecExponentDigits (the same bound
// keeps the validator's exact comparisons cheap on both sides).
func numberTooBig[T ~string | ~[]byte](lit T) bool {
	if len(lit) > MaxSpecNumberBytes {
		return true
	}
	exp := -1 // digits of the exponent, once one starts
	for i := 0; i < len(lit); i++ {
		switch b := lit[i]; {
		case b == 'e' || b == 'E':
			exp = 0
		case exp >= 0 && b >= '0' && b <= '9':
			exp++
		}
	}
	return exp > MaxSpecExponentDigits
}

func isNumberByte(b byte) bool {
	return b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.' || b == 'e' || b == 'E'
}

var (
	errSpecDepth = muster.Errorf(muster.CodeInvalidRequest,
		"spec nests deeper than %d levels (limit: spec depth)", MaxSpecDepth)
	errSpecNumber = muster.Errorf(muster.CodeInvalidRequest,
		"spec holds a number longer than %d characters or with more than %d exponent digits (limit: spec number)",
		MaxSpecNumberBytes, MaxSpecExponentDigits)
)
