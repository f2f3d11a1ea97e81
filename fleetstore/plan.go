package fleetstore

import (
	"slices"
)

// Plan is the pure difference between the desired set and the live set:
// missing holds the desired names that are not live, orphans the live names
// that are not desired. Both are sorted in byte order, without duplicates,
// and non-nil. Plan neither changes its arguments nor acts on anything.
//
// missing is meaningful whatever else live holds; orphans describes this
// fleet only when live holds this fleet's names alone.
func Plan(desired, live []string) (missing, orphans []string) {
	d := sortedSet(desired)
	l := sortedSet(live)
	missing, orphans = []string{}, []string{}
	i, j := 0, 0
	for i < len(d) && j < len(l) {
		switch {
		case d[i] < l[j]:
			missing = append(missing, d[i])
			i++
		case d[i] > l[j]:
			orphans = append(orphans, l[j])
			j++
		default:
			i++
			j++
		}
	}
	missing = append(missing, d[i:]...)
	orphans = append(orphans, l[j:]...)
	return missing, orphans
}

// sortedSet returns a sorted, de-duplicated copy of names.
func sortedSet(names []string) []string {
	s := slices.Clone(names)
	slices.Sort(s)
	return slices.Compact(s)
}
