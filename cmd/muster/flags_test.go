package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParseInterspersed: flags may come before, between or after the
// arguments; everything after "--" is an argument, flags included.
func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		max     int
		wantPos []string
		wantTTL time.Duration
		code    int // -1: parsing goes on
	}{
		{"FlagAfter", []string{"lease://a/b/c", "--ttl", "1m"}, 1, []string{"lease://a/b/c"}, time.Minute, -1},
		{"FlagBefore", []string{"--ttl=2m", "lease://a/b/c"}, 1, []string{"lease://a/b/c"}, 2 * time.Minute, -1},
		{"Between", []string{"r", "--ttl", "3s", "cmd"}, -1, []string{"r", "cmd"}, 3 * time.Second, -1},
		{"DashDash", []string{"r", "--ttl", "1s", "--", "sh", "-c", "exit 3", "--ttl", "9s"}, -1,
			[]string{"r", "sh", "-c", "exit 3", "--ttl", "9s"}, time.Second, -1},
		{"TooMany", []string{"a", "b"}, 1, nil, 0, 2},
		{"Unknown", []string{"a", "--nope"}, 1, nil, 0, 2},
		{"Help", []string{"a", "--help"}, 1, nil, 0, 0},
		{"None", nil, 1, nil, 0, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			ttl := fs.Duration("ttl", 0, "")
			var stderr strings.Builder
			pos, done, code := parseInterspersed(fs, "x", tc.args, tc.max, io.Discard, &stderr)
			if tc.code >= 0 {
				if !done || code != tc.code {
					t.Fatalf("done %v code %d, want code %d (%s)", done, code, tc.code, stderr.String())
				}
				return
			}
			if done || !slices.Equal(pos, tc.wantPos) || *ttl != tc.wantTTL {
				t.Fatalf("pos %q ttl %v done %v (%s), want %q %v", pos, *ttl, done, stderr.String(), tc.wantPos, tc.wantTTL)
			}
		})
	}
}
