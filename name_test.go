package muster

import (
	"regexp"
	"strings"
	"testing"
)

// fleetCharsRE is the reference alphabet the hand-written check must agree with.
var fleetCharsRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

func TestFleetChars(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"repo", true}, {"repo-1", true}, {"a_b-c9", true}, {"-", true}, {"_", true}, {"0", true},
		{strings.Repeat("a", 300), true}, // the length bound is the caller's
		{"", false}, {"Repo-1", false}, {"repo 1", false}, {"repo/1", false}, {"repo.1", false},
		{"répo", false}, {"repo\x00", false}, {"repo\n", false}, {"*", false}, {"%2F", false},
	}
	for _, tt := range tests {
		if got := FleetChars(tt.in); got != tt.want {
			t.Errorf("FleetChars(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseFleetRoot(t *testing.T) {
	seg := strings.Repeat("a", MaxSegmentLen)
	tests := []struct {
		name string
		in   string
		want string // "" for a legal root, else the error message
	}{
		{"OneSegment", "monitors", ""},
		{"Nested", "inst-7/monitors", ""},
		{"MaxDepth", strings.Repeat("a/", MaxFleetDepth-1) + "a", ""},
		{"LongestSegment", seg, ""},
		{"LongestRoot", seg + "/" + strings.Repeat("b", MaxFleetRootLen-MaxSegmentLen-1), ""},
		{"Empty", "", "root is empty"},
		{"SegmentTooLong", seg + "a", "a root segment is longer than 128 bytes"},
		{"NestedSegmentTooLong", "x/" + seg + "a", "a root segment is longer than 128 bytes"},
		{"OneLongSegment", strings.Repeat("a", MaxFleetRootLen), "a root segment is longer than 128 bytes"},
		{"TooLong", strings.Repeat("a", MaxFleetRootLen+1), "root is longer than 255 bytes"},
		// Legal segments and depth, but longer than the root bound: the
		// contract's maxLength applies to grants as well (issue 18 item 3).
		{"ThreeLongestSegments", seg + "/" + seg + "/" + seg, "root is longer than 255 bytes"},
		{"TooDeep", strings.Repeat("a/", MaxFleetDepth) + "a", "root has more than 8 segments"},
		{"Slash", "/", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"EmptySegment", "a//b", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"LeadingSlash", "/a", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"TrailingSlash", "a/", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"Upper", "Monitors", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"Escaped", "inst-7%2Fmonitors", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"DotDot", "a/../b", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
		{"Wildcard", "a/*", "root must be segments of a-z, 0-9, '-' and '_' joined by '/'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, err := ParseFleetRoot(tt.in)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseFleetRoot(%q) = %v, want legal", tt.in, err)
				}
				if got := strings.Join(segs, "/"); got != tt.in {
					t.Fatalf("segments join to %q", got)
				}
				return
			}
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("ParseFleetRoot(%q) = %v (%T), want an *Error", tt.in, err, err)
			}
			if e.Code != CodeInvalidRequest || e.Message != tt.want {
				t.Fatalf("ParseFleetRoot(%q) = %s: %s, want invalid_request: %s", tt.in, e.Code, e.Message, tt.want)
			}
			if segs != nil {
				t.Fatalf("ParseFleetRoot(%q) returned segments with its error", tt.in)
			}
		})
	}
}

var rootMessages = map[string]bool{
	"root is empty":                                                true,
	"root is longer than 255 bytes":                                true,
	"a root segment is longer than 128 bytes":                      true,
	"root has more than 8 segments":                                true,
	"root must be segments of a-z, 0-9, '-' and '_' joined by '/'": true,
}

func FuzzParseFleetRoot(f *testing.F) {
	for _, s := range []string{"monitors", "inst-7/monitors", "a//b", "/a", "a/", "A", "a%2Fb",
		"a/b/c/d/e/f/g/h/i", strings.Repeat("a", MaxSegmentLen+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		segs := strings.Split(s, "/")
		want := len(s) <= MaxFleetRootLen && len(segs) <= MaxFleetDepth
		for _, seg := range segs {
			want = want && fleetCharsRE.MatchString(seg) && len(seg) <= MaxSegmentLen
		}
		got, err := ParseFleetRoot(s)
		if (err == nil) != want {
			t.Fatalf("ParseFleetRoot(%q) = %v, reference says legal %v", s, err, want)
		}
		if err == nil && strings.Join(got, "/") != s {
			t.Fatalf("ParseFleetRoot(%q) segments %q", s, got)
		}
		// The message is one of the fixed ones: it never repeats the input.
		if err != nil && (ErrorCode(err) != CodeInvalidRequest || !rootMessages[err.(*Error).Message]) {
			t.Fatalf("ParseFleetRoot(%q) = %v: want invalid_request with a fixed message", s, err)
		}
	})
}
