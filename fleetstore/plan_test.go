package fleetstore

import (
	"fmt"
	"slices"
	"testing"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name             string
		desired, live    []string
		missing, orphans []string
	}{
		{"Empty", nil, nil, []string{}, []string{}},
		{"AllMissing", []string{"repo-2", "repo-1"}, nil, []string{"repo-1", "repo-2"}, []string{}},
		{"AllOrphans", nil, []string{"b", "a"}, []string{}, []string{"a", "b"}},
		{"InSync", []string{"repo-1", "repo-2"}, []string{"repo-2", "repo-1"}, []string{}, []string{}},
		{
			"Mixed",
			[]string{"repo-3", "repo-1", "reminder-2", "repo-10"},
			[]string{"repo-1", "watch-9", "repo-10", "other-1"},
			[]string{"reminder-2", "repo-3"},
			[]string{"other-1", "watch-9"},
		},
		{"Duplicates", []string{"a", "a", "b"}, []string{"c", "c", "b"}, []string{"a"}, []string{"c"}},
		{"ByteOrder", []string{"repo-2", "repo-10"}, nil, []string{"repo-10", "repo-2"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, l := slices.Clone(tt.desired), slices.Clone(tt.live)
			missing, orphans := Plan(tt.desired, tt.live)
			if !slices.Equal(missing, tt.missing) || missing == nil {
				t.Errorf("missing = %#v, want %#v", missing, tt.missing)
			}
			if !slices.Equal(orphans, tt.orphans) || orphans == nil {
				t.Errorf("orphans = %#v, want %#v", orphans, tt.orphans)
			}
			if !slices.Equal(d, tt.desired) || !slices.Equal(l, tt.live) {
				t.Errorf("Plan changed its arguments")
			}
		})
	}
}

// TestPlanAgreesWithSets checks Plan against the set definition on a larger
// overlapping input.
func TestPlanAgreesWithSets(t *testing.T) {
	desired, live := planInput(3000)
	missing, orphans := Plan(desired, live)
	inLive := map[string]bool{}
	for _, n := range live {
		inLive[n] = true
	}
	inDesired := map[string]bool{}
	for _, n := range desired {
		inDesired[n] = true
	}
	var wantMissing, wantOrphans []string
	for n := range inDesired {
		if !inLive[n] {
			wantMissing = append(wantMissing, n)
		}
	}
	for n := range inLive {
		if !inDesired[n] {
			wantOrphans = append(wantOrphans, n)
		}
	}
	slices.Sort(wantMissing)
	slices.Sort(wantOrphans)
	if !slices.Equal(missing, wantMissing) || !slices.Equal(orphans, wantOrphans) {
		t.Fatalf("Plan disagrees with the set difference: %d/%d missing, %d/%d orphans",
			len(missing), len(wantMissing), len(orphans), len(wantOrphans))
	}
}

// planInput is n desired and n live names, half of them shared, shuffled by
// a fixed stride.
func planInput(n int) (desired, live []string) {
	for i := range n {
		j := (i * 7919) % n
		desired = append(desired, fmt.Sprintf("repo-%d", j))
		live = append(live, fmt.Sprintf("repo-%d", j+n/2))
	}
	return desired, live
}
