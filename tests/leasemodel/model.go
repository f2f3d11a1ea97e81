// Package leasemodel is the sequential specification of lease routes that
// porcupine checks recorded HTTP histories against, and the recorder of one
// operation. The linearizability test of one broker (tests/e2e) and the one
// across a failover of a placed family (tests/placement) share it.
//
// A history may span serving periods of a family (docs/placement.md): a Drop
// operation ends a period, as a failover or a planned move does. Every lease
// is gone after it and every session of the period has ended, but fencing
// tokens keep rising: a grant after a Drop must be above every token granted
// before it. Each operation names the period whose broker answered it, and
// the period its session was created in; an operation of a period can only
// take effect between that period's Drops.
package leasemodel

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation's kind.
type Kind uint8

// The operations.
const (
	Acquire Kind = iota
	Extend
	Release
	Query
	// Drop ends a serving period of the family (Input.Epoch is the period
	// it starts): every lease and every session of the family end.
	Drop
)

// Input is one operation as sent.
type Input struct {
	Kind    Kind
	Client  int   // the client; its sessions' owner_id is "client-<Client>"
	Session int   // the session's number, unique in the history
	Route   int   // which route (a partition of the history)
	Token   int64 // extend, release: the fencing token sent
	TTL     int64 // acquire, extend: the lease TTL asked, in ns
	Call    int64 // unix ns when the request was sent
	// Epoch is the serving period of the broker that answered (0 before
	// the first Drop); SessionEpoch the period the session was created in.
	Epoch, SessionEpoch int
}

// Output is one operation's outcome.
type Output struct {
	Status int
	Code   string // the problem code, or the acquire outcome
	Token  int64
	Exp    int64 // unix ns; acquire, extend
	Held   bool  // query
	Owner  int   // query: the holder's client, -1 when none
	Ret    int64 // unix ns when the answer was read
	// Unknown: no answer came (the broker died with the request in flight);
	// the operation may or may not have taken effect.
	Unknown bool
}

// unknownToken is the token of a grant whose answer was lost: no client
// can send it, and it does not count as the route's highest.
const unknownToken = -1

// state is one route's lease as the model sees it. A lease's expiry may be
// known only within [expLo, expHi] (an extension whose answer was lost).
type state struct {
	epoch        int
	holder       int // session; -1: free
	client       int
	token        int64
	expLo, expHi int64
	maxTok       int64 // the highest token ever granted on the route, in any period
}

func free(s state) state { return state{epoch: s.epoch, holder: -1, maxTok: s.maxTok} }

// Model is the specification of routes routes (0..routes-1). TTL makes it
// nondeterministic: a lease whose expiry falls inside an operation's
// [call, return] window may be seen live or expired.
func Model(routes int) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{holder: -1}} },
		Step: func(st, input, output any) []any {
			var out []any
			for _, n := range step(st.(state), input.(Input), output.(Output)) {
				out = append(out, n)
			}
			return out
		},
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			parts := make([][]porcupine.Operation, routes)
			for _, op := range history {
				if in := op.Input.(Input); in.Kind != Drop {
					parts[in.Route] = append(parts[in.Route], op)
					continue
				}
				for r := range parts {
					parts[r] = append(parts[r], op)
				}
			}
			return parts
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(Input), output.(Output)
			if in.Kind == Drop {
				return fmt.Sprintf("drop: period %d starts", in.Epoch)
			}
			if out.Unknown {
				return fmt.Sprintf("c%d/s%d p%d %s tok=%d → no answer", in.Client, in.Session, in.Epoch, in.Kind, in.Token)
			}
			return fmt.Sprintf("c%d/s%d p%d %s tok=%d → %d %s tok=%d", in.Client, in.Session, in.Epoch, in.Kind, in.Token, out.Status, out.Code, out.Token)
		},
	}
	return m.ToModel()
}

// Random is a random operation on one of routes routes: 40 % acquire, 20 %
// extend, 20 % release, 20 % query, with the client's last token of the
// route (tokens; a wrong one one time in ten) and a lease TTL in
// [minTTL, minTTL+spread), in whole milliseconds. The caller fills in who sends it.
func Random(rng *rand.Rand, tokens []int64, minTTL, spread time.Duration) Input {
	in := Input{Route: rng.IntN(len(tokens))}
	switch p := rng.IntN(10); {
	case p < 4:
		in.Kind = Acquire
	case p < 6:
		in.Kind = Extend
	case p < 8:
		in.Kind = Release
	default:
		in.Kind = Query
	}
	in.Token = max(1, tokens[in.Route])
	if rng.IntN(10) == 0 {
		in.Token += int64(rng.IntN(3)) // sometimes a wrong token
	}
	in.TTL = int64((minTTL + time.Duration(rng.Int64N(int64(spread)))).Truncate(time.Millisecond)) // the wire has ms
	return in
}

func (k Kind) String() string {
	return [...]string{"acquire", "extend", "release", "query", "drop"}[k]
}

// step is every state the operation can leave behind from s; none when its
// outcome cannot be explained.
func step(s state, in Input, out Output) []state {
	if in.Kind == Drop {
		if in.Epoch != s.epoch+1 {
			return nil
		}
		return []state{{epoch: in.Epoch, holder: -1, maxTok: s.maxTok}}
	}
	if in.Epoch != s.epoch {
		return nil // answered by a broker of another period
	}
	if in.SessionEpoch != in.Epoch && in.Kind != Query {
		// The session ended with its period: nothing happens. (A query
		// names no session.)
		if out.Unknown || out.Status == 404 && out.Code == "session_not_found" {
			return []state{s}
		}
		return nil
	}
	var next []state
	if s.holder >= 0 && s.expHi >= in.Call { // live at some point of the window
		live := s
		live.expLo = max(s.expLo, in.Call)
		next = append(next, apply(live, in, out)...)
	}
	if s.holder < 0 || s.expLo < out.Ret { // free at some point of the window
		next = append(next, apply(free(s), in, out)...)
	}
	return next
}

// apply is the lease state machine on a state whose holder is decided (live
// or free): the states it can leave, none when out is not its answer.
func apply(v state, in Input, out Output) []state {
	if out.Unknown {
		return append([]state{v}, effect(v, in, out.Ret)...)
	}
	isFree := v.holder < 0
	mine := v.holder == in.Session
	switch in.Kind {
	case Acquire:
		switch {
		case isFree:
			if out.Status == 200 && out.Code == "acquired" && out.Token > v.maxTok {
				return []state{{epoch: v.epoch, holder: in.Session, client: in.Client, token: out.Token, expLo: out.Exp, expHi: out.Exp, maxTok: out.Token}}
			}
		case mine:
			if out.Status == 200 && out.Code == "already_held" && out.Token == v.token {
				return []state{v}
			}
		case out.Status == 409 && out.Code == "lease_held":
			return []state{v}
		}
	case Extend, Release:
		extend := in.Kind == Extend
		switch {
		case isFree: // nothing to extend; nothing to release is not an error
			if extend && out.Status == 409 && out.Code == "lease_expired" || !extend && out.Status == 204 {
				return []state{v}
			}
		case !mine:
			if out.Status == 409 && out.Code == "not_owner" {
				return []state{v}
			}
		case v.token != in.Token:
			if out.Status == 409 && out.Code == "fenced" {
				return []state{v}
			}
		case extend && out.Status == 200 && out.Token == v.token:
			n := v
			n.expLo, n.expHi = out.Exp, out.Exp
			return []state{n}
		case !extend && out.Status == 204:
			return []state{free(v)}
		}
	case Query:
		if out.Status == 200 && (isFree && !out.Held || !isFree && out.Held && out.Owner == v.client) {
			return []state{v}
		}
	}
	return nil
}

// effect is what an operation whose answer was lost did if it took effect:
// it was applied by the time ret at the latest.
func effect(v state, in Input, ret int64) []state {
	mine := v.holder == in.Session
	switch in.Kind {
	case Acquire:
		if v.holder < 0 {
			return []state{{epoch: v.epoch, holder: in.Session, client: in.Client, token: unknownToken,
				expLo: in.Call + in.TTL, expHi: ret + in.TTL, maxTok: v.maxTok}}
		}
	case Extend:
		if mine && v.token == in.Token {
			n := v
			n.expLo, n.expHi = in.Call+in.TTL, ret+in.TTL
			return []state{n}
		}
	case Release:
		if mine && v.token == in.Token {
			return []state{free(v)}
		}
	}
	return nil
}
