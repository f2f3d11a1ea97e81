package fleetstore

// Limits of the store; a root's are muster's (MaxFleetRootLen, MaxFleetDepth,
// MaxSegmentLen, one parser: muster.ParseFleetRoot). They are part of the
// contract: the HTTP layer documents them and the SDKs may rely on them.
// Raising one is compatible; lowering one is not.
const (
	// MaxSpecBytes is the largest spec Register accepts, in bytes of JSON as
	// given. Larger specs fail with CodePayloadTooLarge (413).
	MaxSpecBytes = 64 << 10

	// MaxSchemaBytes is the largest JSON Schema Sweep accepts. Larger schemas
	// fail with CodePayloadTooLarge.
	MaxSchemaBytes = 256 << 10

	// MaxKindBytes is the longest kind.
	MaxKindBytes = 64

	// MaxCounterDigits is the number of decimal digits of the largest counter
	// value (2^63-1).
	MaxCounterDigits = 19

	// MaxNameBytes is the longest name Register can mint: a kind, "-" and a
	// counter value. Longer names are refused with CodeInvalidName.
	MaxNameBytes = MaxKindBytes + 1 + MaxCounterDigits

	// MaxFamilyBytes is the longest family (tenant) identifier.
	MaxFamilyBytes = 255

	// DefaultPageSize is the page size of Desired when the caller asks for 0.
	DefaultPageSize = 100

	// MaxPageSize is the largest page Desired returns; larger requests are
	// clamped to it.
	MaxPageSize = 1000
)

// The store geometry, the seed's specs_path() and counter_key(): under each
// root, SpecsBucket holds one row per name and CounterKey, beside it, holds the
// next number to mint.
const (
	SpecsBucket = "specs"
	CounterKey  = "next_id"
)
