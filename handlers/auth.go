package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/musterhq/muster"
	"github.com/musterhq/muster/core"
)

// Caller is the authenticated principal of a request: one family (the tenant
// boundary) and the grants of its token.
type Caller struct {
	Name   string
	Family core.Family
	Grants core.Grants
}

// Token is one configured token: the SHA-256 of its secret, never the secret.
type Token struct {
	Name   string
	Hash   [sha256.Size]byte
	Family core.Family
	Grants core.Grants
}

// DevFamily is the family of every request in dev mode.
const DevFamily = "default"

// Authenticator resolves bearer tokens. With no tokens it is in dev mode:
// every request is the caller {family "default", all grants}.
//
// Its table is replaced whole by Replace (a configuration reload) and read
// through an atomic pointer: a request sees the old table or the new one,
// never a mix, and takes no lock. A Caller handed out stays valid: a
// request or watch stream already authenticated keeps the grants it was
// admitted with.
type Authenticator struct {
	table atomic.Pointer[authTable]
}

// authTable is one immutable set of tokens.
type authTable struct {
	tokens  []Token
	callers []Caller // callers[i] is tokens[i]'s, shared by its requests as dev is
	dev     *Caller
}

// NewAuthenticator builds an authenticator over tokens; none means dev mode.
func NewAuthenticator(tokens []Token) *Authenticator {
	a := &Authenticator{}
	a.table.Store(newAuthTable(tokens))
	return a
}

func newAuthTable(tokens []Token) *authTable {
	t := &authTable{tokens: slices.Clone(tokens), callers: make([]Caller, len(tokens))}
	for i, tk := range tokens {
		t.callers[i] = Caller{Name: tk.Name, Family: tk.Family, Grants: tk.Grants}
	}
	if len(tokens) == 0 {
		t.dev = &Caller{Name: "dev", Family: DevFamily, Grants: core.AllGrants()}
	}
	return t
}

// Replace puts tokens in force for every request from now on. Whether dev
// mode may be entered or left this way is the caller's decision (the broker
// refuses it on a reload).
func (a *Authenticator) Replace(tokens []Token) { a.table.Store(newAuthTable(tokens)) }

// DevMode reports whether no tokens are configured.
func (a *Authenticator) DevMode() bool { return a.table.Load().dev != nil }

// Authenticate maps a presented secret to its caller. Every configured hash
// is compared in constant time, without an early exit.
func (a *Authenticator) Authenticate(secret string) (*Caller, bool) {
	t := a.table.Load()
	if t.dev != nil {
		return t.dev, true
	}
	if secret == "" {
		return nil, false
	}
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range t.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.tokens[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &t.callers[found], true
}

// bearer extracts the token of an `Authorization: Bearer` header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) > len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		return strings.TrimSpace(h[len(prefix):])
	}
	return ""
}

type callerKey struct{}

func withCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerFrom returns the request's caller; the contract middleware
// guarantees one on every authenticated route.
func callerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

var errForbidden = muster.Errorf(muster.CodeForbidden, "no grant covers this request")

// allowLease checks that ONE grant of the caller covers sel with access a.
func allowLease(c *Caller, sel core.Selector, a core.Access) error {
	if !c.Grants.AllowsLease(sel, a) {
		return errForbidden
	}
	return nil
}

// allowFleet checks that ONE grant of the caller covers root with access a.
func allowFleet(c *Caller, root string, a core.Access) error {
	if !c.Grants.AllowsFleet(root, a) {
		return errForbidden
	}
	return nil
}

// authorizeRoute parses an exact route from its path segments and checks
// that one grant covers it with access a.
func authorizeRoute(ctx context.Context, realm, area, resource string, a core.Access) (core.Route, error) {
	r, err := core.NewRoute(realm, area, resource)
	if err != nil {
		return r, err
	}
	return r, allowLease(callerFrom(ctx), r.Selector(), a)
}

// authorizeSelector parses a selector and checks that one grant covers its
// whole match set with access a.
func authorizeSelector(ctx context.Context, raw string, a core.Access) (core.Selector, error) {
	sel, err := core.ParseSelector(raw)
	if err != nil {
		return sel, err
	}
	return sel, allowLease(callerFrom(ctx), sel, a)
}
