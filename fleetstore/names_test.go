package fleetstore

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
)

// The reference grammar the hand-written checks must agree with.
var segmentRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

func TestLegalSegment(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"repo", true}, {"repo-1", true}, {"a_b-c9", true}, {"-", true}, {"_", true}, {"0", true},
		{"", false}, {"Repo-1", false}, {"repo 1", false}, {"repo/1", false}, {"repo.1", false},
		{"répo", false}, {"repo\x00", false}, {"repo\n", false}, {"*", false}, {"%2F", false},
	}
	for _, tt := range tests {
		if got := LegalSegment(tt.in); got != tt.want {
			t.Errorf("LegalSegment(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"monitors", true},
		{"inst-7/monitors", true},
		{strings.Repeat("a/", MaxRootSegments-1) + "a", true},
		{strings.Repeat("a", MaxRootSegmentBytes), true},
		{strings.Repeat("a", MaxRootSegmentBytes) + "/" + strings.Repeat("b", MaxRootBytes-MaxRootSegmentBytes-1), true},
		{strings.Repeat("a", MaxRootSegmentBytes+1), false},
		{"x/" + strings.Repeat("a", MaxRootSegmentBytes+1), false},
		{strings.Repeat("a", MaxRootBytes), false},
		{"", false}, {"/", false}, {"a//b", false}, {"/a", false}, {"a/", false},
		{"Monitors", false}, {"inst-7%2Fmonitors", false}, {"a/../b", false},
		{strings.Repeat("a/", MaxRootSegments) + "a", false},
		{strings.Repeat("a", MaxRootBytes+1), false},
	}
	everything, err := core.ParseGrant("fleet://**#*")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		err := CheckRoot(tt.in)
		// One rule for roots: what CheckRoot accepts, a grant can name.
		if allowed := (core.Grants{everything}).AllowsFleet(tt.in, core.ReadWrite); allowed != (err == nil) {
			t.Errorf("CheckRoot(%q) = %v but fleet://**#* allows it: %v", tt.in, err, allowed)
		}
		if (err == nil) != tt.want {
			t.Errorf("CheckRoot(%q) = %v, want ok %v", tt.in, err, tt.want)
		}
		if err != nil && muster.ErrorCode(err) != muster.CodeInvalidRequest {
			t.Errorf("CheckRoot(%q) code = %s, want invalid_request", tt.in, muster.ErrorCode(err))
		}
	}
}

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

func FuzzCheckRoot(f *testing.F) {
	for _, s := range []string{"monitors", "inst-7/monitors", "a//b", "/a", "a/", "A", "a%2Fb", "a/b/c/d/e/f/g/h/i"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs := strings.Split(s, "/")
		want := len(s) <= MaxRootBytes && len(segs) <= MaxRootSegments
		for _, seg := range segs {
			want = want && segmentRE.MatchString(seg)
		}
		if err := CheckRoot(s); (err == nil) != want {
			t.Fatalf("CheckRoot(%q) = %v, reference says legal %v", s, err, want)
		}
	})
}
