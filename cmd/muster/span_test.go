package main

import (
	"testing"
	"time"
)

func TestShort(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0"}, {100 * time.Millisecond, "100ms"}, {time.Second, "1s"}, {30 * time.Second, "30s"},
		{10 * time.Minute, "10m"}, {90 * time.Second, "1m30s"}, {2 * time.Hour, "2h"}, {time.Hour + time.Minute, "1h1m"},
	}
	for _, tt := range tests {
		if got := short(tt.in); got != tt.want {
			t.Errorf("short(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := span(100*time.Millisecond, 10*time.Minute); got != "100ms..10m" {
		t.Errorf("span = %q", got)
	}
}
