package muster

import "strings"

// Limits and name rules that more than one layer enforces, each defined
// once. They are part of the contract: openapi.yaml states each one, and
// handlers' TestContractLimitsAreTheServers checks that it states these
// values. Raising one is compatible; lowering one is not. Lengths are in
// bytes.
const (
	// MaxSegmentLen is the longest segment of a lease route or selector and
	// of a fleet root.
	MaxSegmentLen = 128

	// MaxFleetDepth is the largest number of segments of a fleet root and of
	// a fleet grant's root pattern.
	MaxFleetDepth = 8

	// MaxFleetRootLen is the longest fleet root, "/" separators included.
	// With MaxFleetDepth segments of MaxSegmentLen a root could be longer;
	// this bound is the one that applies.
	MaxFleetRootLen = 255
)

// FleetChars reports whether s is one or more of a-z, 0-9, '-' and '_': the
// alphabet of fleet root segments, kinds and spec names, each of which has a
// length bound of its own (MaxSegmentLen for a root segment). It judges, it
// never folds: "Repo" is not legal, and nothing turns it into "repo".
func FleetChars(s string) bool {
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

// ParseFleetRoot is the one parser of fleet roots, for the store and for
// grants alike: a root is 1 to MaxFleetDepth segments of FleetChars, each at
// most MaxSegmentLen bytes, joined by "/", at most MaxFleetRootLen bytes in
// all. Roots arrive decoded (the HTTP layer sends "/" as %2F). It returns the
// segments, or an *Error of code CodeInvalidRequest whose message never
// repeats the input.
func ParseFleetRoot(root string) ([]string, error) {
	if root == "" {
		return nil, Errorf(CodeInvalidRequest, "root is empty")
	}
	if len(root) > MaxFleetRootLen {
		return nil, Errorf(CodeInvalidRequest, "root is longer than %d bytes", MaxFleetRootLen)
	}
	segs := strings.Split(root, "/")
	for _, seg := range segs {
		if !FleetChars(seg) {
			return nil, Errorf(CodeInvalidRequest, "root must be segments of a-z, 0-9, '-' and '_' joined by '/'")
		}
		if len(seg) > MaxSegmentLen {
			return nil, Errorf(CodeInvalidRequest, "a root segment is longer than %d bytes", MaxSegmentLen)
		}
	}
	if len(segs) > MaxFleetDepth {
		return nil, Errorf(CodeInvalidRequest, "root has more than %d segments", MaxFleetDepth)
	}
	return segs, nil
}
