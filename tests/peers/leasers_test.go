package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/load"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A leaser takes and gives back exclusive leases with a TTL on one system.
// Worker w (0 ≤ w < workers) is one client of the system; a worker is used
// by one goroutine at a time.
type leaser interface {
	// acquire takes key for worker w if it is free and returns the token
	// that proves the holding (fencing token, revision or value);
	// errHeld when another holder has it.
	acquire(w int, key string) (int64, error)
	// release gives key back if token still holds it; errNotHeld when it
	// does not (the key was not released).
	release(w int, key string, token int64) error
}

// A batchLeaser does the same for many keys in one round trip: one token
// per key, in order.
type batchLeaser interface {
	acquireAll(w int, keys []string) ([]int64, error)
	releaseAll(w int, keys []string, tokens []int64) error
}

var (
	errHeld    = errors.New("held by another holder")
	errNotHeld = errors.New("not held with this token")
)

const (
	leaseTTL   = 60 * time.Second  // each lease's TTL
	sessionTTL = 600 * time.Second // Muster session / etcd lease behind them (Muster's maximum)
)

// workers is how many clients a system gets: enough for every goroutine
// the closed-loop driver starts (it rounds the count to GOMAXPROCS).
func workers() int { return clients + testingProcs() }

// httpLeaser speaks Muster's lease routes: one session per worker, the
// fencing token as the token. The ceiling answers the same requests.
type httpLeaser struct {
	c        *http.Client
	base     string
	acquires [][]byte // the acquire body of each worker (its session)
	sessions []string
}

func openHTTP(tb testing.TB, base string) *httpLeaser {
	tb.Helper()
	h := &httpLeaser{c: load.Client(clients), base: base}
	for w := range workers() {
		var s struct {
			SessionID string `json:"session_id"`
		}
		body := fmt.Sprintf(`{"owner_id":"peers-%d","ttl_ms":%d}`, w, sessionTTL.Milliseconds())
		if _, err := h.post("/v1/sessions", []byte(body), http.StatusCreated, &s); err != nil {
			tb.Fatal(err)
		}
		h.sessions = append(h.sessions, s.SessionID)
		h.acquires = append(h.acquires, fmt.Appendf(nil, `{"session_id":%q,"ttl_ms":%d}`, s.SessionID, leaseTTL.Milliseconds()))
	}
	return h
}

// post sends one JSON POST with the load token; it returns the status when
// it is want or 409, and an error otherwise.
// A rawReader reads an answer's body itself (instead of encoding/json).
type rawReader interface{ readRaw([]byte) error }

func (h *httpLeaser) post(path string, body []byte, want int, out any) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, h.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer load-token")
	resp, err := h.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == want && out != nil:
		if r, ok := out.(rawReader); ok {
			return want, r.readRaw(raw)
		}
		return want, json.Unmarshal(raw, out)
	case resp.StatusCode == want || resp.StatusCode == http.StatusConflict:
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("POST %s: %d %s", path, resp.StatusCode, raw)
}

func (h *httpLeaser) acquire(w int, key string) (int64, error) {
	var l struct {
		FencingToken int64 `json:"fencing_token"`
	}
	st, err := h.post("/v1/leases/peers/"+key+"/acquire", h.acquires[w], http.StatusOK, &l)
	if err == nil && st == http.StatusConflict {
		err = errHeld
	}
	return l.FencingToken, err
}

func (h *httpLeaser) release(w int, key string, token int64) error {
	body := fmt.Appendf(nil, `{"session_id":%q,"fencing_token":%d}`, h.sessions[w], token)
	st, err := h.post("/v1/leases/peers/"+key+"/release", body, http.StatusNoContent, nil)
	if err == nil && st == http.StatusConflict {
		err = errNotHeld
	}
	return err
}

// redisLeaser is the usual Redis lock: SET key value NX PX ttl takes it,
// a compare-and-delete script gives it back only while the value is ours.
// The value is a number unique to each acquire (the token).
type redisLeaser struct {
	c    *redis.Client
	sha  string
	next atomic.Int64
}

// compareAndDelete deletes KEYS[1] only when it holds ARGV[1].
const compareAndDelete = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

func openRedis(tb testing.TB) *redisLeaser {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(tb), PoolSize: clients, MinIdleConns: clients})
	sha, err := c.ScriptLoad(context.Background(), compareAndDelete).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return &redisLeaser{c: c, sha: sha}
}

func (r *redisLeaser) setNX(ctx context.Context, c doer, key string, token int64) *redis.Cmd {
	return c.Do(ctx, "set", "peers:"+key, token, "nx", "px", leaseTTL.Milliseconds())
}

func (r *redisLeaser) del(ctx context.Context, c doer, key string, token int64) *redis.Cmd {
	return c.EvalSha(ctx, r.sha, []string{"peers:" + key}, token)
}

// doer is what the client and a pipeline of it both do.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

func setResult(cmd *redis.Cmd) error {
	switch err := cmd.Err(); {
	case errors.Is(err, redis.Nil):
		return errHeld
	case err != nil:
		return err
	}
	return nil
}

func delResult(cmd *redis.Cmd) error {
	n, err := cmd.Int()
	if err == nil && n != 1 {
		err = errNotHeld
	}
	return err
}

func (r *redisLeaser) acquire(_ int, key string) (int64, error) {
	token := r.next.Add(1)
	return token, setResult(r.setNX(context.Background(), r.c, key, token))
}

func (r *redisLeaser) release(_ int, key string, token int64) error {
	return delResult(r.del(context.Background(), r.c, key, token))
}

// redisLeaser pipelined: the same commands, all keys in one round trip.
func (r *redisLeaser) acquireAll(_ int, keys []string) ([]int64, error) {
	ctx := context.Background()
	p := r.c.Pipeline()
	tokens := make([]int64, len(keys))
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		tokens[i] = r.next.Add(1)
		cmds[i] = r.setNX(ctx, p, k, tokens[i])
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for _, c := range cmds {
		if err := setResult(c); err != nil {
			return nil, err
		}
	}
	return tokens, nil
}

func (r *redisLeaser) releaseAll(_ int, keys []string, tokens []int64) error {
	ctx := context.Background()
	p := r.c.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = r.del(ctx, p, k, tokens[i])
	}
	if _, err := p.Exec(ctx); err != nil {
		return err
	}
	for _, c := range cmds {
		if err := delResult(c); err != nil {
			return err
		}
	}
	return nil
}

// etcdLeaser is the usual etcd lock without its helpers' extra reads: a
// transaction puts the key only if it does not exist (create revision 0),
// attached to the worker's lease (granted once, as a Muster session is);
// the put's revision is the token; a transaction deletes the key only
// while its mod revision is still that token. Each worker has its own
// client, so its own connection.
type etcdLeaser struct {
	cs     []*clientv3.Client
	leases []clientv3.LeaseID
}

func openEtcd(tb testing.TB) *etcdLeaser {
	tb.Helper()
	ep := etcdEndpoint(tb)
	e := &etcdLeaser{}
	for range workers() {
		c, err := newEtcdClient(ep)
		if err != nil {
			tb.Fatal(err)
		}
		g, err := c.Grant(context.Background(), int64(sessionTTL.Seconds()))
		if err != nil {
			tb.Fatal(err)
		}
		e.cs, e.leases = append(e.cs, c), append(e.leases, g.ID)
	}
	return e
}

func (e *etcdLeaser) acquire(w int, key string) (int64, error) {
	key = "peers/" + key
	resp, err := e.cs[w].Txn(context.Background()).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "held", clientv3.WithLease(e.leases[w]))).
		Commit()
	switch {
	case err != nil:
		return 0, err
	case !resp.Succeeded:
		return 0, errHeld
	}
	return resp.Header.Revision, nil
}

func (e *etcdLeaser) release(w int, key string, token int64) error {
	key = "peers/" + key
	resp, err := e.cs[w].Txn(context.Background()).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", token)).
		Then(clientv3.OpDelete(key)).
		Commit()
	switch {
	case err != nil:
		return err
	case !resp.Succeeded:
		return errNotHeld
	}
	return nil
}

func (h *httpLeaser) close() { h.c.CloseIdleConnections() }

func (r *redisLeaser) close() { r.c.Close() }

func (e *etcdLeaser) close() {
	for _, c := range e.cs {
		c.Close()
	}
}

// itoa is strconv.Itoa, short.
func itoa(i int) string { return strconv.Itoa(i) }
