package app

import (
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

// TestFamilyRuleIsMusters: the configuration's `family` keys (a token's
// family and the keys of limits.families) accept exactly the families
// muster.ValidFamily accepts, so the store's check never refuses a family
// the configuration let through, and the tags state no other bound.
func TestFamilyRuleIsMusters(t *testing.T) {
	samples := []string{"default", "acme", "a", "Acme.io:7~!", strings.Repeat("f", muster.MaxFamilyLen),
		strings.Repeat("f", muster.MaxFamilyLen+1), "", "a b", "a/b", "é", "a\x00", "a\tb", "a\x7f", "a\n"}
	v := newConfigValidator()
	for _, fam := range samples {
		tok := TokenConfig{Name: "t", SHA256: strings.Repeat("a", 64), Family: fam, Grants: []string{"lease://**#read"}}
		if got, want := v.Struct(tok) == nil, muster.ValidFamily(fam); got != want {
			t.Errorf("token family %q: the configuration accepts it: %v, muster.ValidFamily: %v", fam, got, want)
		}
		lim := LimitsConfig{Families: map[string]FamilyQuota{fam: {}}}
		if got, want := v.Struct(lim) == nil, muster.ValidFamily(fam); got != want {
			t.Errorf("limits.families key %q: the configuration accepts it: %v, muster.ValidFamily: %v", fam, got, want)
		}
	}
}
