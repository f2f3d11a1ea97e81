package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

var linearDuration = flag.Duration("linear.duration", 3*time.Second, "how long the linearizability clients run (longer: -linear.duration=60s)")

const (
	linClients = 8
	linRoutes  = 3
)

type linKind uint8

const (
	opAcquire linKind = iota
	opExtend
	opRelease
	opQuery
)

type linInput struct {
	kind   linKind
	client int
	route  int
	token  int64 // extend/release
	call   int64 // unix ns when the request was sent
}

type linOutput struct {
	status int
	code   string // problem code, or the acquire outcome
	token  int64
	exp    int64 // unix ns; acquire/extend
	held   bool  // query
	owner  int   // query: the holder's client index
	ret    int64 // unix ns when the response was read
}

// linState is one route's lease as the model sees it.
type linState struct {
	holder int // -1: free
	token  int64
	exp    int64
	maxTok int64 // the highest token ever granted on the route
}

// step applies one operation to a state whose holder is known (live or
// free) and reports whether the output is what the lease state machine
// answers, with the next state.
func step(v linState, in linInput, out linOutput) (bool, linState) {
	free := v.holder < 0
	switch in.kind {
	case opAcquire:
		switch {
		case free:
			ok := out.status == 200 && out.code == "acquired" && out.token > v.maxTok
			return ok, linState{holder: in.client, token: out.token, exp: out.exp, maxTok: out.token}
		case v.holder == in.client:
			return out.status == 200 && out.code == "already_held" && out.token == v.token, v
		default:
			return out.status == 409 && out.code == "lease_held", v
		}
	case opExtend:
		switch {
		case free:
			return out.status == 409 && out.code == "lease_expired", v
		case v.holder != in.client:
			return out.status == 409 && out.code == "not_owner", v
		case v.token != in.token:
			return out.status == 409 && out.code == "fenced", v
		default:
			n := v
			n.exp = out.exp
			return out.status == 200 && out.token == v.token, n
		}
	case opRelease:
		switch {
		case free:
			return out.status == 204, v
		case v.holder != in.client:
			return out.status == 409 && out.code == "not_owner", v
		case v.token != in.token:
			return out.status == 409 && out.code == "fenced", v
		default:
			return out.status == 204, linState{holder: -1, maxTok: v.maxTok}
		}
	default:
		if free {
			return out.status == 200 && !out.held, v
		}
		return out.status == 200 && out.held && out.owner == v.holder, v
	}
}

// leaseModel is the sequential specification of one route. TTL makes it
// nondeterministic: a lease whose expiry falls inside an operation's
// [call, return] window may be seen live or expired.
var leaseModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{holder: -1}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(linState), input.(linInput), output.(linOutput)
		var next []any
		if s.holder >= 0 && s.exp >= in.call { // live at some point of the window
			if ok, n := step(s, in, out); ok {
				next = append(next, n)
			}
		}
		if s.holder < 0 || s.exp < out.ret { // free at some point of the window
			if ok, n := step(linState{holder: -1, maxTok: s.maxTok}, in, out); ok {
				next = append(next, n)
			}
		}
		return next
	},
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		parts := make([][]porcupine.Operation, linRoutes)
		for _, op := range history {
			r := op.Input.(linInput).route
			parts[r] = append(parts[r], op)
		}
		return parts
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		return fmt.Sprintf("c%d %d tok=%d → %d %s tok=%d", in.client, in.kind, in.token, out.status, out.code, out.token)
	},
}

// fencedResource is a storage service guarded by fencing tokens: every write
// carries the writer's token, and a correct lease service never lets a
// write by a believed holder go backwards in token order.
type fencedResource struct {
	mu        sync.Mutex
	last      int64
	writes    int
	backwards []string
}

// write checks, under the resource's lock, that the writer still believes
// it holds the lease (its own clock against the expiry it was given, with a
// margin) and records the token order.
func (f *fencedResource) write(token, exp int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().UnixNano() >= exp-int64(5*time.Millisecond) {
		return // no longer sure it holds the lease: a careful client does not write
	}
	if token < f.last {
		f.backwards = append(f.backwards, fmt.Sprintf("token %d after %d", token, f.last))
	}
	f.last = max(f.last, token)
	f.writes++
}

// TestLeaseLinearizability runs concurrent HTTP clients doing random
// acquire/extend/release/query on a few routes with short TTLs, then checks
// the recorded history against the sequential lease model with porcupine,
// and the fenced-resource oracle.
func TestLeaseLinearizability(t *testing.T) {
	b := MustStartWallClockBroker(t)
	routes := [linRoutes]string{"lease://lin/r/0", "lease://lin/r/1", "lease://lin/r/2"}
	var resources [linRoutes]fencedResource
	sessions := make([]string, linClients)
	for i := range sessions {
		sessions[i] = createSession(t, b, "", fmt.Sprintf("client-%d", i), 600000)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: linClients}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		failed  = make(chan error, linClients)
	)
	deadline := time.Now().Add(*linearDuration)
	for c := 0; c < linClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			tokens := [linRoutes]int64{}
			var ops []porcupine.Operation
			for time.Now().Before(deadline) {
				in := linInput{client: c, route: rng.IntN(linRoutes)}
				p := rng.IntN(10)
				switch {
				case p < 4:
					in.kind = opAcquire
				case p < 6:
					in.kind = opExtend
				case p < 8:
					in.kind = opRelease
				default:
					in.kind = opQuery
				}
				in.token = max(1, tokens[in.route])
				if rng.IntN(10) == 0 {
					in.token += int64(rng.IntN(3)) // sometimes a wrong token
				}
				out, err := linCall(client, b.URL(), routes[in.route], sessions[c], &in, 100+rng.IntN(200))
				if err != nil {
					failed <- err
					return
				}
				if out.status == 200 && (in.kind == opAcquire || in.kind == opExtend) {
					tokens[in.route] = out.token
					resources[in.route].write(out.token, out.exp)
				}
				ops = append(ops, porcupine.Operation{ClientId: c, Input: in, Call: in.call, Output: out, Return: out.ret})
			}
			mu.Lock()
			history = append(history, ops...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	res, info := porcupine.CheckOperationsVerbose(leaseModel.ToModel(), history, 2*time.Minute)
	writes := 0
	for i := range resources {
		writes += resources[i].writes
		if len(resources[i].backwards) > 0 {
			t.Errorf("route %d: fenced writes went backwards: %v", i, resources[i].backwards)
		}
	}
	t.Logf("%d operations from %d clients in %v; %d fenced writes; porcupine: %s", len(history), linClients, *linearDuration, writes, res)
	if res != porcupine.Ok {
		path := t.TempDir() + "/linearizability.html"
		if err := porcupine.VisualizePath(leaseModel.ToModel(), info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatalf("the history is not linearizable against the lease model (result %s)", res)
	}
}

// linCall performs one operation and records its window and outcome.
func linCall(c *http.Client, base, route, sess string, in *linInput, ttl int) (linOutput, error) {
	var method, path string
	var body map[string]any
	switch in.kind {
	case opAcquire:
		method, path, body = "POST", leasePath(route)+"/acquire", map[string]any{"session_id": sess, "ttl_ms": ttl}
	case opExtend:
		method, path, body = "POST", leasePath(route)+"/extend", map[string]any{"session_id": sess, "fencing_token": in.token, "ttl_ms": ttl}
	case opRelease:
		method, path, body = "POST", leasePath(route)+"/release", map[string]any{"session_id": sess, "fencing_token": in.token}
	default:
		method, path = "GET", leasePath(route)
	}
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	in.call = time.Now().UnixNano()
	resp, err := c.Do(req)
	if err != nil {
		return linOutput{}, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := linOutput{status: resp.StatusCode, ret: time.Now().UnixNano(), owner: -1}
	if err != nil {
		return out, err
	}
	if resp.StatusCode >= 500 {
		return out, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	var v struct {
		Code         string    `json:"code"`
		Outcome      string    `json:"outcome"`
		FencingToken int64     `json:"fencing_token"`
		ExpiresAt    time.Time `json:"expires_at"`
		Held         bool      `json:"held"`
		OwnerID      string    `json:"owner_id"`
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &v); err != nil {
			return out, err
		}
	}
	out.code = v.Code
	if v.Outcome != "" {
		out.code = v.Outcome
	}
	out.token, out.held = v.FencingToken, v.Held
	if !v.ExpiresAt.IsZero() {
		out.exp = v.ExpiresAt.UnixNano()
	}
	if v.OwnerID != "" {
		fmt.Sscanf(v.OwnerID, "client-%d", &out.owner)
	}
	return out, nil
}
