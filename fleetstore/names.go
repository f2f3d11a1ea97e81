package fleetstore

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/musterhq/muster"
)

// LegalSegment reports whether s is a legal segment: one or more of a-z, 0-9,
// '-' and '_'. It judges, it never folds: "Repo" is not legal, and nothing
// turns it into "repo".
func LegalSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckRoot accepts a root: at most MaxRootSegments legal segments of at
// most MaxRootSegmentBytes each, joined by "/", at most MaxRootBytes in all
// (the same rule as a fleet grant's root, core.Grants.AllowsFleet). Roots arrive decoded (the HTTP layer sends
// "/" as %2F). It fails with CodeInvalidRequest.
func CheckRoot(root string) error {
	if root == "" {
		return muster.Errorf(muster.CodeInvalidRequest, "root is empty")
	}
	if len(root) > MaxRootBytes {
		return muster.Errorf(muster.CodeInvalidRequest, "root is longer than %d bytes", MaxRootBytes)
	}
	n := 0
	for seg := range strings.SplitSeq(root, "/") {
		n++
		if !LegalSegment(seg) {
			return muster.Errorf(muster.CodeInvalidRequest,
				"root must be segments of a-z, 0-9, '-' and '_' joined by '/'")
		}
		if len(seg) > MaxRootSegmentBytes {
			return muster.Errorf(muster.CodeInvalidRequest, "a root segment is longer than %d bytes", MaxRootSegmentBytes)
		}
	}
	if n > MaxRootSegments {
		return muster.Errorf(muster.CodeInvalidRequest, "root has more than %d segments", MaxRootSegments)
	}
	return nil
}

// CheckKind accepts a kind: one legal segment of at most MaxKindBytes. It fails
// with CodeInvalidRequest.
func CheckKind(kind string) error {
	if !LegalSegment(kind) {
		return muster.Errorf(muster.CodeInvalidRequest, "kind must be one segment of a-z, 0-9, '-' and '_'")
	}
	if len(kind) > MaxKindBytes {
		return muster.Errorf(muster.CodeInvalidRequest, "kind is longer than %d bytes", MaxKindBytes)
	}
	return nil
}

// CheckName accepts a name as Forget and Get take it: one legal segment of at
// most MaxNameBytes. It does not require the "<kind>-<n>" shape, so a legal
// name that was never minted is simply not there. It fails with
// CodeInvalidName.
func CheckName(name string) error {
	if !LegalSegment(name) || len(name) > MaxNameBytes {
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
