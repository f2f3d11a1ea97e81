package leasemodel

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

const ms = int64(1e6)

// op is one operation of a test history: in answered by out in [call, ret].
func op(client int, in Input, out Output, call, ret int64) porcupine.Operation {
	in.Client, in.Call, out.Ret = client, call, ret
	if in.Kind != Drop && in.Session == 0 {
		in.Session = client + 1
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func acquired(tok, exp int64) Output {
	return Output{Status: 200, Code: "acquired", Token: tok, Exp: exp, Owner: -1}
}

// The model accepts what a failover does and refuses what it must not do:
// a lease held across the drop, a token that does not rise, a session of
// the dead broker that still works.
func TestModelAcrossADrop(t *testing.T) {
	const (
		tokA = 1<<32 + 1
		tokB = 2<<32 + 1
	)
	long := 100_000 * ms // a lease TTL far beyond the history
	grantA := op(0, Input{Kind: Acquire, TTL: long}, acquired(tokA, long), 1*ms, 2*ms)
	drop := op(9, Input{Kind: Drop, Epoch: 1}, Output{}, 10*ms, 20*ms)
	after := Input{Kind: Acquire, TTL: long, Epoch: 1, SessionEpoch: 1, Session: 7}
	cases := []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"the lease is gone after the drop, the token rises", []porcupine.Operation{
			grantA, drop, op(1, after, acquired(tokB, long), 30*ms, 31*ms)}, true},
		{"a lease held across the drop", []porcupine.Operation{
			grantA, drop, op(1, after, Output{Status: 409, Code: "lease_held", Owner: -1}, 30*ms, 31*ms)}, false},
		{"a token that does not rise across the drop", []porcupine.Operation{
			grantA, drop, op(1, after, acquired(tokA, long), 30*ms, 31*ms)}, false},
		{"the dead broker's session still works", []porcupine.Operation{
			grantA, drop, op(0, Input{Kind: Release, Token: tokA, Epoch: 1}, Output{Status: 204, Owner: -1}, 30*ms, 31*ms)}, false},
		{"the dead broker's session is not found", []porcupine.Operation{
			grantA, drop, op(0, Input{Kind: Release, Token: tokA, Epoch: 1}, Output{Status: 404, Code: "session_not_found", Owner: -1}, 30*ms, 31*ms)}, true},
		{"an answer of the old period after the drop", []porcupine.Operation{
			drop, op(0, Input{Kind: Acquire, TTL: long}, acquired(tokA, long), 30*ms, 31*ms)}, false},
		{"a lost grant may have happened before the drop", []porcupine.Operation{
			op(0, Input{Kind: Acquire, TTL: long}, Output{Unknown: true, Owner: -1}, 1*ms, 9*ms),
			op(1, Input{Kind: Query}, Output{Status: 200, Held: true, Owner: 0}, 3*ms, 4*ms),
			drop, op(1, after, acquired(tokB, long), 30*ms, 31*ms)}, true},
		{"a lost release may not have happened", []porcupine.Operation{
			grantA,
			op(0, Input{Kind: Release, Token: tokA}, Output{Unknown: true, Owner: -1}, 3*ms, 9*ms),
			op(1, Input{Kind: Query}, Output{Status: 200, Held: true, Owner: 0}, 5*ms, 6*ms),
			op(1, Input{Kind: Query}, Output{Status: 200, Held: false, Owner: -1}, 7*ms, 8*ms),
			drop}, true},
		{"a lost release cannot be undone", []porcupine.Operation{
			grantA,
			op(0, Input{Kind: Release, Token: tokA}, Output{Unknown: true, Owner: -1}, 3*ms, 9*ms),
			op(1, Input{Kind: Query}, Output{Status: 200, Held: false, Owner: -1}, 5*ms, 6*ms),
			op(1, Input{Kind: Query}, Output{Status: 200, Held: true, Owner: 0}, 7*ms, 8*ms),
			drop}, false},
	}
	m := Model(1)
	for _, c := range cases {
		if got := porcupine.CheckOperations(m, c.history); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}
