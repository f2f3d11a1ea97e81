package core

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/musterhq/muster"
)

// Bounds of the selector grammar, in bytes. A selector or route longer than
// MaxSelectorLen, or with a segment longer than muster.MaxSegmentLen, is rejected
// before any other check. (Three fixed segments of muster.MaxSegmentLen plus four
// `**` stay below MaxSelectorLen, so the whole-text bound only matters as a
// cheap guard against oversized input.)
const MaxSelectorLen = 512

// LeaseScheme prefixes every route and selector. It is case-sensitive.
const LeaseScheme = "lease://"

const (
	routeDepth = 3 // segments of a concrete route
	// maxSegments is the longest legal selector: three fixed segments with a
	// `**` before, between and after them.
	maxSegments = 2*routeDepth + 1
	msgWildcard = "wildcards are not allowed in a route"
)

// Route is one concrete lease identity lease://{realm}/{area}/{resource}.
// Routes built by ParseRoute and NewRoute have three non-empty literal
// segments that obey the selector grammar; the zero Route is not valid.
// Route is comparable and may be used as a map key.
type Route struct{ Realm, Area, Resource string }

// ParseRoute parses the text of a concrete route. Any grammar violation and
// any wildcard (`*` or `**`, even one that matches a single route) fails with
// a *muster.Error of code muster.CodeInvalidRoute whose message never repeats the input.
func ParseRoute(s string) (Route, error) {
	var buf [maxSegments]string
	segs, msg := splitSelector(s, &buf)
	if msg == "" {
		msg = checkRouteSegments(segs)
	}
	if msg != "" {
		return Route{}, &muster.Error{Code: muster.CodeInvalidRoute, Message: msg}
	}
	return Route{segs[0], segs[1], segs[2]}, nil
}

// NewRoute builds a route from its three path segments (as the HTTP layer
// receives them, already unescaped) under the same segment rules as
// ParseRoute; a violation fails with muster.CodeInvalidRoute.
func NewRoute(realm, area, resource string) (Route, error) {
	if msg := checkRouteSegments([]string{realm, area, resource}); msg != "" {
		return Route{}, &muster.Error{Code: muster.CodeInvalidRoute, Message: msg}
	}
	return Route{realm, area, resource}, nil
}

// checkRouteSegments reports why segs is not a concrete route, or "".
func checkRouteSegments(segs []string) string {
	for _, seg := range segs {
		if strings.IndexByte(seg, '*') >= 0 {
			return msgWildcard
		}
	}
	if len(segs) != routeDepth {
		return "a route has exactly three segments"
	}
	for _, seg := range segs {
		if msg := checkLiteral(seg); msg != "" {
			return msg
		}
	}
	return ""
}

// String is the route's text, "lease://realm/area/resource".
func (r Route) String() string { return LeaseScheme + r.Key() }

// Key is "realm/area/resource": the ordering key of the lease inventory.
// Keys of valid routes are distinct for distinct routes, and the keys of all
// routes matching a selector share the selector's Prefix.
func (r Route) Key() string { return r.Realm + "/" + r.Area + "/" + r.Resource }

// Selector returns the exact selector naming r, as ParseSelector(r.String())
// would, without re-parsing. r must be valid.
func (r Route) Selector() Selector {
	key := r.Key()
	return Selector{
		raw:    LeaseScheme + key,
		segs:   []string{r.Realm, r.Area, r.Resource},
		exact:  true,
		prefix: key,
		forms:  [][3]string{{r.Realm, r.Area, r.Resource}},
	}
}

// Selector is a parsed lease selector: the one classification that listing,
// watching, unsubscribing, authorization and matching all share.
//
// Its identity is the original text (String): no canonicalization, so
// "lease://acme/**" and "lease://acme/*/*" are different selectors with the
// same match set. Selector holds slices and is not comparable; key maps by
// String. A Selector is immutable and safe for concurrent use. The zero
// Selector is not valid and matches nothing.
type Selector struct {
	raw    string
	segs   []string // literal, "*" or "**", in order
	exact  bool
	prefix string
	forms  [][3]string // match set among depth-3 routes, deduplicated
}

// ParseSelector parses and classifies a selector (grammar in design §5).
// Any violation fails with a *muster.Error of code muster.CodeInvalidSelector whose
// message never repeats the input.
func ParseSelector(s string) (Selector, error) {
	var buf [maxSegments]string
	segs, msg := splitSelector(s, &buf)
	if msg == "" {
		msg = checkPattern(segs)
	}
	if msg != "" {
		return Selector{}, &muster.Error{Code: muster.CodeInvalidSelector, Message: msg}
	}
	sel := Selector{raw: s, segs: slices.Clone(segs), forms: expandForms(segs)}
	sel.exact = len(segs) == routeDepth && !slices.ContainsFunc(segs, isWild)
	sel.prefix = commonPrefix(sel.forms)
	return sel, nil
}

// splitSelector checks the bound and the scheme of s and splits the rest at
// "/" into buf. It reports a message on failure; segments are not checked.
func splitSelector(s string, buf *[maxSegments]string) ([]string, string) {
	if len(s) > MaxSelectorLen {
		return nil, "longer than 512 bytes"
	}
	body, ok := strings.CutPrefix(s, LeaseScheme)
	if !ok {
		return nil, "must start with lease://"
	}
	n := 0
	for ; n < len(buf); n++ {
		i := strings.IndexByte(body, '/')
		if i < 0 {
			buf[n] = body
			return buf[:n+1], ""
		}
		buf[n], body = body[:i], body[i+1:]
	}
	return nil, "too many segments"
}

// checkPattern reports why segs is not a legal selector, or "".
func checkPattern(segs []string) string {
	fixed, double := 0, false
	for i, seg := range segs {
		switch seg {
		case "**":
			if i > 0 && segs[i-1] == "**" {
				return "adjacent ** segments"
			}
			double = true
		case "*":
			fixed++
		default:
			if msg := checkLiteral(seg); msg != "" {
				return msg
			}
			fixed++
		}
	}
	switch {
	case !double && fixed != routeDepth:
		return "exactly three segments are required without **"
	case fixed > routeDepth:
		return "more than three segments besides **"
	}
	return ""
}

func isWild(seg string) bool { return seg == "*" || seg == "**" }

// checkLiteral reports why seg is not a literal segment, or "": a literal
// is non-empty valid UTF-8 of at most muster.MaxSegmentLen bytes without "/", "*"
// or control characters (Unicode Cc), and is not "." or "..".
//
// Dot segments are refused because a route travels as a URL path
// (/v1/leases/{realm}/{area}/{resource}), which a path-normalising proxy
// resolves ("a/../b" is "b") after decoding %2e to ".": the request would
// reach another route. Segments arrive decoded, so "%2e%2e" in a request
// path is judged as "..", and the rule holds for routes and selectors
// alike. Dots within a segment ("...", ".a", "a.") are text.
func checkLiteral(seg string) string {
	if seg == "" {
		return "empty segment"
	}
	if seg == "." || seg == ".." {
		return ". and .. are not segments"
	}
	if len(seg) > muster.MaxSegmentLen {
		return "segment longer than 128 bytes"
	}
	i := 0
	for i < len(seg) && plainSegByte[seg[i]] {
		i++
	}
	for i < len(seg) {
		b := seg[i]
		if b < utf8.RuneSelf {
			switch {
			case b < 0x20 || b == 0x7f:
				return "control character in segment"
			case b == '*':
				return "* must be a whole segment"
			case b == '/':
				return "/ in segment"
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(seg[i:])
		if r == utf8.RuneError && n == 1 {
			return "segment is not valid UTF-8"
		}
		if r <= 0x9f { // C1 controls U+0080..U+009F
			return "control character in segment"
		}
		i += n
	}
	return ""
}

// plainSegByte holds the bytes checkLiteral passes without a closer look:
// printable ASCII other than '*' and '/'.
var plainSegByte = func() (t [256]bool) {
	for b := 0x20; b < 0x7f; b++ {
		t[b] = b != '*' && b != '/'
	}
	return t
}()

// expandForms lists the depth-3 literal-or-"*" forms of a legal pattern:
// every way its `**` segments can absorb the positions its other segments
// leave, deduplicated, in a deterministic order.
func expandForms(segs []string) [][3]string {
	var out [][3]string
	var cur [3]string
	var walk func(i, n int)
	walk = func(i, n int) {
		switch {
		case i == len(segs):
			if n == routeDepth && !slices.Contains(out, cur) {
				out = append(out, cur)
			}
		case segs[i] == "**":
			for k := n; k <= routeDepth; k++ {
				walk(i+1, k)
				if k < routeDepth {
					cur[k] = "*"
				}
			}
		case n < routeDepth:
			cur[n] = segs[i]
			walk(i+1, n+1)
		}
	}
	walk(0, 0)
	return out
}

// commonPrefix is the longest key prefix shared by every route matching
// one of forms: the literal segments before each form's first "*", then the
// common part of those.
func commonPrefix(forms [][3]string) string {
	var p string
	for i, f := range forms {
		var b strings.Builder
		for j, seg := range f {
			if seg == "*" {
				break
			}
			b.WriteString(seg)
			if j < routeDepth-1 {
				b.WriteByte('/')
			}
		}
		q := b.String()
		if i == 0 {
			p = q
			continue
		}
		n := 0
		for n < len(p) && n < len(q) && p[n] == q[n] {
			n++
		}
		p = p[:n]
	}
	return p
}

// String is the original text of the selector: its identity.
func (s Selector) String() string { return s.raw }

// IsExact reports whether s is three literal segments naming one route.
// A pattern such as lease://a/b/c/** matches one route too, but it is a
// wildcard selector: exactness is a property of the text.
func (s Selector) IsExact() bool { return s.exact }

// Route returns the route an exact selector names, and false for any other.
func (s Selector) Route() (Route, bool) {
	if !s.exact {
		return Route{}, false
	}
	return Route{s.segs[0], s.segs[1], s.segs[2]}, true
}

// Segments returns a copy of the compiled segments: literals, "*" and "**".
func (s Selector) Segments() []string { return slices.Clone(s.segs) }

// Forms returns a copy of the match set of s among depth-3 routes, as a
// union of literal-or-"*" forms ("**" expanded), deduplicated. A valid
// selector has one to three forms. A literal never equals "*".
func (s Selector) Forms() [][3]string { return slices.Clone(s.forms) }

// Prefix is the longest string every matching Route.Key() starts with:
// "acme/renderers/" for lease://acme/renderers/*, the whole key for an
// exact selector, "" for lease://*/x/*. Seek an ordered index to it and stop
// at the first key without it.
func (s Selector) Prefix() string { return s.prefix }

// Matches reports whether route r is in the match set of s. It does not
// allocate.
func (s Selector) Matches(r Route) bool {
	return s.match(r.Realm, r.Area, r.Resource)
}

// MatchesKey is Matches on a Route.Key(), without allocating. A string
// that is not three non-empty segments joined by "/" matches nothing.
func (s Selector) MatchesKey(key string) bool {
	if s.exact {
		return key == s.prefix
	}
	i := strings.IndexByte(key, '/')
	if i <= 0 {
		return false
	}
	rest := key[i+1:]
	j := strings.IndexByte(rest, '/')
	if j <= 0 || j == len(rest)-1 || strings.IndexByte(rest[j+1:], '/') >= 0 {
		return false
	}
	return s.match(key[:i], rest[:j], rest[j+1:])
}

func (s Selector) match(realm, area, resource string) bool {
	for i := range s.forms {
		f := &s.forms[i]
		if (f[0] == "*" || f[0] == realm) &&
			(f[1] == "*" || f[1] == area) &&
			(f[2] == "*" || f[2] == resource) {
			return true
		}
	}
	return false
}
