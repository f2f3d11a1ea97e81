package fleetstore

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/musterhq/muster"
)

// CheckKind accepts a kind: one segment of muster.FleetChars of at most
// MaxKindBytes. It fails with CodeInvalidRequest.
func CheckKind(kind string) error {
	if !muster.FleetChars(kind) {
		return muster.Errorf(muster.CodeInvalidRequest, "kind must be one segment of a-z, 0-9, '-' and '_'")
	}
	if len(kind) > MaxKindBytes {
		return muster.Errorf(muster.CodeInvalidRequest, "kind is longer than %d bytes", MaxKindBytes)
	}
	return nil
}

// CheckName accepts a name as Forget and Get take it: one segment of
// muster.FleetChars of at most MaxNameBytes. It does not require the "<kind>-<n>" shape, so a legal
// name that was never minted is simply not there. It fails with
// CodeInvalidName.
func CheckName(name string) error {
	if !muster.FleetChars(name) || len(name) > MaxNameBytes {
		return muster.Errorf(muster.CodeInvalidName,
			"a name is one segment of a-z, 0-9, '-' and '_' of at most %d bytes", MaxNameBytes)
	}
	return nil
}

// CheckFamily accepts a family: non-empty UTF-8 of at most MaxFamilyBytes,
// without NUL. Families come from the broker's configuration, not from
// requests; the check keeps the backends' keys well formed. It fails with
// CodeInvalidRequest.
func CheckFamily(family string) error {
	if family == "" || len(family) > MaxFamilyBytes || !utf8.ValidString(family) ||
		strings.IndexByte(family, 0) >= 0 {
		return muster.Errorf(muster.CodeInvalidRequest,
			"family must be 1 to %d bytes of UTF-8 without NUL", MaxFamilyBytes)
	}
	return nil
}

// NamePrefix is the prefix every name minted for kind starts with: kind
// first, so "repo-3" is a handle an operator can say out loud.
func NamePrefix(kind string) string { return kind + "-" }

// mintName formats the n-th name of a root.
func mintName(kind string, n uint64) string {
	return NamePrefix(kind) + strconv.FormatUint(n, 10)
}
