package fleetstore

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

// The reference grammar the hand-written checks must agree with.
var segmentRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// TestLongestNameIsLegal: the longest kind with the largest counter makes a
// name CheckName accepts, so every minted name can be forgotten.
func TestLongestNameIsLegal(t *testing.T) {
	name := mintName(strings.Repeat("k", MaxKindBytes), math.MaxInt64)
	if len(name) != MaxNameBytes {
		t.Fatalf("longest name has %d bytes, MaxNameBytes is %d", len(name), MaxNameBytes)
	}
	if err := CheckName(name); err != nil {
		t.Fatalf("CheckName(longest minted name) = %v", err)
	}
}

func FuzzCheckName(f *testing.F) {
	for _, s := range append(illegalNames, "repo-1", "a", "-", strings.Repeat("a", MaxNameBytes)) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckName(s)
		want := segmentRE.MatchString(s) && len(s) <= MaxNameBytes
		if (err == nil) != want {
			t.Fatalf("CheckName(%q) = %v, reference says legal %v", s, err, want)
		}
		if err != nil && muster.ErrorCode(err) != muster.CodeInvalidName {
			t.Fatalf("CheckName(%q) code = %s, want invalid_name", s, muster.ErrorCode(err))
		}
		if err == nil && strings.ToLower(s) != s {
			t.Fatalf("CheckName accepted %q, which folding would change", s)
		}
	})
}

func FuzzCheckKind(f *testing.F) {
	for _, s := range []string{"repo", "Repo", "", "re/po", "a-b_c", strings.Repeat("k", MaxKindBytes+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckKind(s)
		want := segmentRE.MatchString(s) && len(s) <= MaxKindBytes
		if (err == nil) != want {
			t.Fatalf("CheckKind(%q) = %v, reference says legal %v", s, err, want)
		}
		if err == nil {
			// Every name minted for a legal kind is a legal name.
			if err := CheckName(mintName(s, math.MaxInt64)); err != nil {
				t.Fatalf("kind %q mints a name CheckName refuses: %v", s, err)
			}
			if !strings.HasPrefix(mintName(s, 1), NamePrefix(s)) {
				t.Fatalf("mintName(%q) lacks NamePrefix", s)
			}
		}
	})
}

func FuzzParseMintedName(f *testing.F) {
	for _, s := range []string{"repo-1", "repo-x-12", "repo-01", "repo-0", "repo-", "-1", "repo",
		"k-9223372036854775806", "k-9223372036854775807", "k-18446744073709551616", "Repo-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, n, err := ParseMintedName(s)
		if err != nil {
			if muster.ErrorCode(err) != muster.CodeInvalidName {
				t.Fatalf("ParseMintedName(%q) code = %s, want invalid_name", s, muster.ErrorCode(err))
			}
			return
		}
		// What it accepts is exactly what Register can mint, and round-trips.
		if n < 1 || n >= MaxCounter || CheckKind(kind) != nil {
			t.Fatalf("ParseMintedName(%q) = %q, %d: outside what Register mints", s, kind, n)
		}
		if mintName(kind, n) != s {
			t.Fatalf("ParseMintedName(%q) = %q, %d, which mints %q", s, kind, n, mintName(kind, n))
		}
	})
}
