package peers

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
)

// musterBatch sends a pair's acquires (then its releases) as one
// POST /v1/leases/batch of the worker's session: the Muster row beside
// Redis pipelined. An operation's result carries its own code: lease_held
// is errHeld, not_owner and fenced are errNotHeld.
type musterBatch struct {
	h *httpLeaser
}

// openMusterBatch opens the batch row; it is skipped when the broker under
// test has no batch endpoint (a branch without it).
func openMusterBatch(tb testing.TB) batchLeaser { return openMusterBatchAt(tb, musterURL(tb)) }

func openMusterBatchAt(tb testing.TB, url string) batchLeaser {
	tb.Helper()
	m := &musterBatch{h: openHTTP(tb, url)}
	body := fmt.Appendf(nil, `{"session_id":%q,"ops":[]}`, m.h.sessions[0])
	if st, err := m.h.post("/v1/leases/batch", body, http.StatusBadRequest, nil); st == http.StatusNotFound || st == http.StatusMethodNotAllowed {
		tb.Skipf("the broker has no batch endpoint (POST /v1/leases/batch answers %d: %v)", st, err)
	}
	return m
}

// answers reads a batch answer into its results (readBatchAnswer).
type answers struct{ got []batchAnswer }

func (a *answers) readRaw(b []byte) (err error) {
	a.got, err = readBatchAnswer(b, a.got)
	return err
}

// do sends the ops of one kind on keys (tokens for releases) and returns
// the token of each result; the first failed result's code is the error.
// The body is written as a client library would, without reflection.
func (m *musterBatch) do(w int, op string, keys []string, tokens []int64) ([]int64, error) {
	b := make([]byte, 0, 64+len(keys)*80)
	b = append(b, `{"session_id":"`...)
	b = append(b, m.h.sessions[w]...)
	b = append(b, `","ops":[`...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"op":"`...)
		b = append(b, op...)
		b = append(b, `","route":"lease://peers/`...)
		b = append(b, k...) // keys are plain ASCII: w<n>/b<n>
		b = append(b, '"')
		if tokens != nil {
			b = append(b, `,"fencing_token":`...)
			b = strconv.AppendInt(b, tokens[i], 10)
		} else {
			b = append(b, `,"ttl_ms":`...)
			b = strconv.AppendInt(b, leaseTTL.Milliseconds(), 10)
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	var out answers
	if _, err := m.h.post("/v1/leases/batch", b, http.StatusOK, &out); err != nil {
		return nil, err
	}
	if len(out.got) != len(keys) {
		return nil, fmt.Errorf("batch %s: %d results for %d ops", op, len(out.got), len(keys))
	}
	got := make([]int64, len(keys))
	var first error
	for i, r := range out.got {
		switch {
		case r.ok && op == "acquire" && r.token < 1:
			first = fmt.Errorf("batch acquire of %s: granted without a fencing token", keys[i])
		case r.ok:
			got[i] = r.token
		case first != nil:
		case r.code == "lease_held":
			first = errHeld
		case r.code == "not_owner" || r.code == "fenced":
			first = errNotHeld
		default:
			first = fmt.Errorf("batch %s of %s: %s", op, keys[i], r.code)
		}
	}
	return got, first
}

func (m *musterBatch) acquireAll(w int, keys []string) ([]int64, error) {
	return m.do(w, "acquire", keys, nil)
}

func (m *musterBatch) releaseAll(w int, keys []string, tokens []int64) error {
	_, err := m.do(w, "release", keys, tokens)
	return err
}

func (m *musterBatch) close() { m.h.close() }
