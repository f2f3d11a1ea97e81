package core

import (
	"fmt"
	"strings"

	"github.com/musterhq/muster"
)

// Access is a set of permissions. Write does not imply Read.
type Access uint8

// The permissions; ReadWrite is the "*" of a grant.
const (
	Read Access = 1 << iota
	Write
	ReadWrite = Read | Write
)

// String is the grant suffix of a: "read", "write", "*", or "none".
func (a Access) String() string {
	switch a {
	case Read:
		return "read"
	case Write:
		return "write"
	case ReadWrite:
		return "*"
	}
	return "none"
}

// FleetScheme prefixes the root pattern of a fleet grant.
const FleetScheme = "fleet://"

type grantScheme uint8

const (
	schemeLease grantScheme = iota + 1
	schemeFleet
)

// Grant is one permission of a token: "<pattern>#read", "#write" or "#*",
// where pattern is a lease selector ("lease://acme/renderers/*") or a fleet
// root pattern ("fleet://acme/**"). Grants of one scheme never authorize
// anything on the other.
//
// A grant whose realm segment is "*" or "**" (lease://*/renderers/*#read,
// lease://**#read) is cross-realm authority: it discloses route existence,
// owner ids and holder incarnations in every realm of the family. Realms are
// application namespaces, not tenants; grant the narrowest pattern that works.
type Grant struct {
	raw    string
	scheme grantScheme
	access Access
	lease  Selector // schemeLease
	fleet  []string // schemeFleet: legal segments, "*" and "**"
}

// ParseGrant parses one grant string. A malformed one fails with a *muster.Error
// of code muster.CodeInvalidRequest whose message never repeats the input.
func ParseGrant(s string) (Grant, error) {
	i := strings.LastIndexByte(s, '#')
	if i < 0 {
		return Grant{}, grantError("missing #read, #write or #* suffix")
	}
	g := Grant{raw: s}
	switch s[i+1:] {
	case "read":
		g.access = Read
	case "write":
		g.access = Write
	case "*":
		g.access = ReadWrite
	default:
		return Grant{}, grantError("access must be read, write or *")
	}
	pattern := s[:i]
	switch {
	case strings.HasPrefix(pattern, LeaseScheme):
		sel, err := ParseSelector(pattern)
		if err != nil {
			return Grant{}, grantError("lease pattern: " + err.(*muster.Error).Message)
		}
		g.scheme, g.lease = schemeLease, sel
	case strings.HasPrefix(pattern, FleetScheme):
		segs, msg := splitFleetPattern(pattern[len(FleetScheme):])
		if msg != "" {
			return Grant{}, grantError("fleet pattern: " + msg)
		}
		g.scheme, g.fleet = schemeFleet, segs
	default:
		return Grant{}, grantError("pattern must start with lease:// or fleet://")
	}
	return g, nil
}

func grantError(msg string) error {
	return &muster.Error{Code: muster.CodeInvalidRequest, Message: "grant: " + msg}
}

// String is the original grant text.
func (g Grant) String() string { return g.raw }

// Access is the set of permissions g gives.
func (g Grant) Access() Access { return g.access }

// Grants is the permission set of one token. The order does not matter:
// each request is checked against every grant on its own, and grants never
// add up.
type Grants []Grant

// ParseGrants parses every string with ParseGrant; the first failure is
// returned with its position.
func ParseGrants(ss []string) (Grants, error) {
	gs := make(Grants, 0, len(ss))
	for i, s := range ss {
		g, err := ParseGrant(s)
		if err != nil {
			e := err.(*muster.Error)
			return nil, muster.Errorf(e.Code, "grant %d: %s", i, strings.TrimPrefix(e.Message, "grant: "))
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// AllGrants is the dev-mode permission set: everything on both schemes.
func AllGrants() Grants {
	everything, _ := ParseSelector("lease://**") // valid: TestAllGrants
	return Grants{
		{raw: "lease://**#*", scheme: schemeLease, access: ReadWrite, lease: everything},
		{raw: "fleet://**#*", scheme: schemeFleet, access: ReadWrite, fleet: []string{"**"}},
	}
}

// AllowsLease reports whether ONE lease grant with every permission in a
// contains the entire match set of sel among depth-3 routes. An exact route
// is checked as its selector (Route.Selector). Partial grants never add up:
// lease://acme/*/* and lease://*/renderers/* together do not allow
// lease://*/*/*. It is false for an empty a and for the zero Selector.
func (g Grants) AllowsLease(sel Selector, a Access) bool {
	if a == 0 || len(sel.forms) == 0 {
		return false
	}
	for i := range g {
		if g[i].scheme == schemeLease && g[i].access&a == a && g[i].lease.Contains(sel) {
			return true
		}
	}
	return false
}

// AllowsRoute is AllowsLease(r.Selector(), a) without building the
// selector: for an exact route, containment is one match per grant. r
// must be valid (ParseRoute, NewRoute).
func (g Grants) AllowsRoute(r Route, a Access) bool {
	if a == 0 {
		return false
	}
	for i := range g {
		if g[i].scheme == schemeLease && g[i].access&a == a && g[i].lease.match(r.Realm, r.Area, r.Resource) {
			return true
		}
	}
	return false
}

// AllowsFleet reports whether one fleet grant with every permission in a
// matches the concrete root ("acme" or "acme/inst-7"). It is false for an
// empty a and for a root that muster.ParseFleetRoot refuses.
func (g Grants) AllowsFleet(root string, a Access) bool {
	if a == 0 {
		return false
	}
	segs, err := muster.ParseFleetRoot(root)
	if err != nil {
		return false
	}
	for i := range g {
		if g[i].scheme == schemeFleet && g[i].access&a == a && globMatch(g[i].fleet, segs) {
			return true
		}
	}
	return false
}

// AllowsSomeFleet reports whether one fleet grant has every permission in
// a, whatever root it matches: what an operation that names no root (plan)
// can ask of a token.
func (g Grants) AllowsSomeFleet(a Access) bool {
	for i := range g {
		if a != 0 && g[i].scheme == schemeFleet && g[i].access&a == a {
			return true
		}
	}
	return false
}

// AllowsSomeLease reports whether one lease grant has every permission in
// a, whatever pattern it covers: what a question about the family itself
// (its placement) can ask of a token.
func (g Grants) AllowsSomeLease(a Access) bool {
	for i := range g {
		if a != 0 && g[i].scheme == schemeLease && g[i].access&a == a {
			return true
		}
	}
	return false
}

// Contains reports whether every route matching t also matches s. With an
// unbounded alphabet a form of t is inside a union of forms exactly when one
// of them has, at every position, "*" or the same literal; so s contains t
// when each form of t, read as a route whose "*" is a literal, matches s
// (a literal never equals "*", so only a "*" of s matches it). A zero
// Selector contains nothing and is contained in nothing.
func (s Selector) Contains(t Selector) bool {
	if len(s.forms) == 0 || len(t.forms) == 0 {
		return false
	}
	for _, f := range t.forms {
		if !s.match(f[0], f[1], f[2]) {
			return false
		}
	}
	return true
}

// splitFleetPattern splits a fleet grant's root pattern into 1 to
// muster.MaxFleetDepth segments, each "*", "**" or a root segment
// (muster.FleetChars, at most muster.MaxSegmentLen), with no two "**" side
// by side. A pattern is not a root: its whole length is not bounded by
// muster.MaxFleetRootLen, and AllowsFleet matches it only against roots
// muster.ParseFleetRoot accepts.
func splitFleetPattern(s string) ([]string, string) {
	if strings.Count(s, "/") >= muster.MaxFleetDepth {
		return nil, fmt.Sprintf("more than %d segments", muster.MaxFleetDepth)
	}
	segs := strings.Split(s, "/")
	for i, seg := range segs {
		switch {
		case seg == "**" && i > 0 && segs[i-1] == "**":
			return nil, "adjacent ** segments"
		case seg == "*" || seg == "**":
		case !muster.FleetChars(seg) || len(seg) > muster.MaxSegmentLen:
			return nil, fmt.Sprintf("segments must be 1-%d of a-z, 0-9, - and _", muster.MaxSegmentLen)
		}
	}
	return segs, ""
}

// globMatch reports whether pattern matches the concrete segments: "*" is one
// segment, "**" zero or more.
func globMatch(pattern, segs []string) bool {
	if len(pattern) == 0 {
		return len(segs) == 0
	}
	switch pattern[0] {
	case "**":
		for k := 0; k <= len(segs); k++ {
			if globMatch(pattern[1:], segs[k:]) {
				return true
			}
		}
		return false
	case "*":
		return len(segs) > 0 && globMatch(pattern[1:], segs[1:])
	default:
		return len(segs) > 0 && pattern[0] == segs[0] && globMatch(pattern[1:], segs[1:])
	}
}
