package hostile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/musterhq/muster/tests/musterbin"
)

// answers counts the statuses and codes of parallel requests.
type answers struct {
	mu  sync.Mutex
	got map[string]int
}

func (a *answers) add(st int, h http.Header, body []byte, err error) {
	var pb struct{ Code string }
	_ = json.Unmarshal(body, &pb)
	key := fmt.Sprint(st, " ", pb.Code)
	if st == 429 && h.Get("Retry-After") == "" {
		key += " without Retry-After"
	}
	if err != nil {
		key = "error" // the connection ended: counted, not told apart
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got[key]++
}

// parallel sends n copies of one request at once and returns the answers
// and the broker's peak resident memory above its start.
func parallel(t *testing.T, b *broker, n int, tok musterbin.Token, method, path, body string) (map[string]int, int64, time.Duration) {
	peak := b.peak()
	a := &answers{got: map[string]int{}}
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			st, h, out, err := b.do(t.Context(), tok, method, path, body)
			a.add(st, h, out, err)
		})
	}
	wg.Wait()
	return a.got, peak(), time.Since(start)
}

// The abuse report's plans: 120 parallel 4 MiB plans with a read-only token
// peaked at 3.4 GB. A token without a fleet grant is refused; with one, the
// plans beyond the family's bound are refused before their bodies are read.
func TestParallelPlans(t *testing.T) {
	b := startBroker(t, "", nil)
	// The largest plan the contract takes: 10,000 names a side, of about
	// 100 bytes (the longest name register mints is 84).
	var names []string
	for i := range 10_000 {
		names = append(names, fmt.Sprintf(`"%s-%06d"`, strings.Repeat("k", 90), i))
	}
	list := "[" + strings.Join(names, ",") + "]"
	body := `{"desired":` + list + `,"live":` + list + `}`
	t.Logf("plan body: %d KiB, %d names a side", len(body)>>10, len(names))

	got, growth, took := parallel(t, b, 120, readerTok, "POST", "/v1/fleets/plan", body)
	t.Logf("lease-only token: %v in %v, broker peak +%d MiB", got, took, growth>>20)
	if got["403 forbidden"] != 120 {
		t.Errorf("a token without a fleet grant: %v, want 120 × 403 forbidden", got)
	}
	got, growth, took = parallel(t, b, 120, hostileTok, "POST", "/v1/fleets/plan", body)
	t.Logf("fleet token: %v in %v, broker peak +%d MiB", got, took, growth>>20)
	if got["200 "] < 1 || got["200 "]+got["429 queue_full"] != 120 {
		t.Errorf("answers %v: want 200s and 429 queue_full only", got)
	}
	if growth > planGrowth {
		t.Errorf("broker peak resident memory grew by %d MiB, bound %d MiB", growth>>20, planGrowth>>20)
	}
}

// planGrowth bounds the broker's memory under the parallel plans: the
// family's two plans in flight at about 40 MiB each (a 4 MiB body is read,
// validated and decoded) and their answers.
const planGrowth = maxGrowth

// The abuse report's queued sweeps: 2,000 sweeps (244 KB bodies) of one
// family took the broker from 118 MB to 3.9 GB while they waited. Beyond
// the family's bound they are refused before their bodies are read.
func TestQueuedSweeps(t *testing.T) {
	b := startBroker(t, "", nil)
	schema, spec := enumBurnOf(100) // about 0.1 s of CPU a sweep
	if st, _, out, err := b.do(t.Context(), hostileTok, "POST", "/v1/fleets/burn/specs", `{"kind":"k","spec":`+spec+`}`); st != 201 {
		t.Fatalf("register: %d %v %s", st, err, out)
	}
	pad := strings.Repeat("x", 240<<10-len(schema))
	body := sweepBody(`{"description":"` + pad + `",` + schema[1:])
	n := 400
	if os.Getenv("MUSTER_HOSTILE_LONG") == "1" {
		n = 2000 // the report's count
	}
	got, growth, took := parallel(t, b, n, hostileTok, "POST", sweepPath("burn"), body)
	t.Logf("%d KiB sweeps: %v in %v, broker peak +%d MiB", len(body)>>10, got, took, growth>>20)
	if got["200 "] < 1 || got["200 "]+got["429 queue_full"] != n {
		t.Errorf("answers %v: want 200 and 429 queue_full only", got)
	}
	if got["200 "] > 4*3 {
		t.Errorf("%d sweeps of one family were admitted; 4 at a time, each about 0.1 s", got["200 "])
	}
	if growth > maxGrowth {
		t.Errorf("broker peak resident memory grew by %d MiB, bound %d MiB", growth>>20, maxGrowth>>20)
	}
}

// The abuse report's two runaway sweeps took both sweep slots (one per
// family, two in all) and a trivial sweep of a third family waited 33 s.
// A runaway sweep now ends at its worker's CPU limit, so the third family
// waits at most about one such limit.
func TestThirdFamilySweepsMeanwhile(t *testing.T) {
	b := startBroker(t, "", nil)
	schema, spec := enumBurn()
	for _, tok := range []musterbin.Token{hostileTok, secondTok} {
		if st, _, out, err := b.do(t.Context(), tok, "POST", "/v1/fleets/burn/specs", `{"kind":"k","spec":`+spec+`}`); st != 201 {
			t.Fatalf("register: %d %v %s", st, err, out)
		}
	}
	if st, _, out, err := b.do(t.Context(), thirdTok, "POST", "/v1/fleets/quiet/specs", `{"kind":"k","spec":{"topic":"a"}}`); st != 201 {
		t.Fatalf("register: %d %v %s", st, err, out)
	}
	runaway := make(chan int, 2)
	for _, tok := range []musterbin.Token{hostileTok, secondTok} {
		go func() {
			st, _, _, _ := b.do(t.Context(), tok, "POST", sweepPath("burn"), sweepBody(schema))
			runaway <- st
		}()
	}
	for len(b.children()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	st, _, out, err := b.do(t.Context(), thirdTok, "POST", sweepPath("quiet"), sweepBody(`{"required":["topic"]}`))
	took := time.Since(start)
	t.Logf("two runaway sweeps of two families hold both slots: the third family's sweep answered %d after %v", st, took)
	if err != nil || st != 200 {
		t.Fatalf("third family's sweep: %d %v %s", st, err, out)
	}
	if took > 4*time.Second {
		t.Errorf("the third family's sweep waited %v; a runaway sweep ends at its 2 s CPU limit", took)
	}
	for range 2 {
		if st := <-runaway; st != 400 {
			t.Errorf("a runaway sweep answered %d, want 400 (its CPU limit)", st)
		}
	}
}
