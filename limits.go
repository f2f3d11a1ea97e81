package muster

// Limits and name rules that more than one layer enforces. They are part of
// the contract (openapi.yaml states each one, and a test checks that it
// states these values): raising one is compatible, lowering one is not.
const (
	// MaxSegmentLen is the longest segment, in bytes, of a lease route or
	// selector and of a fleet root.
	MaxSegmentLen = 128
)
