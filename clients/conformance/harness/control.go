package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	muster "github.com/musterhq/muster/clients/go"
	"github.com/musterhq/muster/clients/go/api"
)

// maxStepTime bounds one POST /step, whatever its timeout_ms.
const maxStepTime = 2 * time.Minute

// harness owns the broker, the proxy and the loaded scenario, and serves the
// control API (README: "Control API"). Requests that change state are
// serialized; reads (holder, list, tokens) may run beside them.
type harness struct {
	broker         *broker
	brokerURL      string // fixed: restarts and resets keep the address
	proxyURL       string // the proxy in front of the broker
	deadURL        string // a loopback address that refuses every connection
	proxy          *proxy
	actorTransport *http.Transport // shared by the actors' clients
	listTransport  *http.Transport // for GET /list
	logf           func(format string, args ...any)
	pg             *pgServer

	mu         sync.RWMutex
	run        *run
	deployment *deployment // the placed scenario's other brokers, nil for none
}

func newHarness(b *broker, p *proxy, pg *pgServer, logf func(string, ...any)) *harness {
	return &harness{
		broker: b, brokerURL: b.url(), proxy: p, pg: pg, logf: logf, run: newRun(),
		actorTransport: &http.Transport{MaxIdleConnsPerHost: 64},
		listTransport:  &http.Transport{MaxIdleConnsPerHost: 8},
	}
}

func (h *harness) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /scenario", h.postScenario)
	mux.HandleFunc("POST /reset", h.postReset)
	mux.HandleFunc("POST /step", h.postStep)
	mux.HandleFunc("GET /holder/{actor}", h.getHolder)
	mux.HandleFunc("GET /list", h.getList)
	mux.HandleFunc("GET /tokens", h.getTokens)
	mux.HandleFunc("GET /brokers", h.getBrokers)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusNotFound, "not_found", "", "no control endpoint "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// problem writes an application/problem+json answer.
func problem(w http.ResponseWriter, status int, code, op, detail string) {
	body := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "code": code, "detail": detail}
	if op != "" {
		body["op"] = op
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		problem(w, http.StatusBadRequest, "invalid_request", "", "reading the body: "+err.Error())
		return nil, false
	}
	return data, true
}

// reset ends the loaded scenario and starts from nothing: gates open,
// counters zero, a new broker with an empty data dir on the same address
// (with placement: a new placed deployment, b1 on that address).
func (h *harness) reset(ctx context.Context, placement *placementSpec) error {
	h.run.stop()
	h.run = newRun()
	h.proxy.reset()
	h.actorTransport.CloseIdleConnections()
	h.listTransport.CloseIdleConnections()
	h.endDeployment()
	if placement != nil {
		return h.startDeployment(ctx, placement)
	}
	return h.broker.reset(h.broker.plainConfig(), "")
}

func (h *harness) postReset(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reset(r.Context(), nil); err != nil {
		problem(w, http.StatusInternalServerError, "reset_failed", "", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *harness) postScenario(w http.ResponseWriter, r *http.Request) {
	data, ok := readBody(w, r)
	if !ok {
		return
	}
	var sc scenarioFile
	if err := decodeStrict(data, &sc); err != nil {
		problem(w, http.StatusBadRequest, "invalid_scenario", "", err.Error())
		return
	}
	if err := sc.check(); err != nil {
		problem(w, http.StatusBadRequest, "invalid_scenario", "", err.Error())
		return
	}
	if why := skipReason(); sc.Placement != nil && why != "" {
		h.logf("scenario %s skipped: %s", sc.Name, why)
		problem(w, http.StatusConflict, "scenario_skipped", "", why)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.reset(r.Context(), sc.Placement); err != nil {
		problem(w, http.StatusInternalServerError, "reset_failed", "", err.Error())
		return
	}
	for _, spec := range sc.Actors {
		a := &actor{name: spec.Name, token: spec.Token, owner: spec.OwnerID,
			ttl: ms(spec.SessionTTLMs), brokerURL: h.brokerURL}
		h.run.actors[a.name] = a
		if err := a.newSession(r.Context(), h.actorTransport); err != nil {
			problem(w, http.StatusInternalServerError, "scenario_failed", "", err.Error())
			return
		}
	}
	h.logf("scenario %s: %d actors", sc.Name, len(sc.Actors))
	w.WriteHeader(http.StatusNoContent)
}

func (h *harness) postStep(w http.ResponseWriter, r *http.Request) {
	data, ok := readBody(w, r)
	if !ok {
		return
	}
	var st step
	if err := decodeStrict(data, &st); err != nil {
		problem(w, http.StatusBadRequest, "invalid_step", "", err.Error())
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.run.backgroundFailures(); f != "" {
		h.logf("step %s: an earlier background step failed: %s", st.Op, f)
		problem(w, http.StatusUnprocessableEntity, "step_failed", "background", f)
		return
	}
	if observerOps[st.Op] {
		problem(w, http.StatusBadRequest, "unknown_op", st.Op, "the runner runs "+st.Op+" with the SDK's observer")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), maxStepTime)
	defer cancel()
	err := h.step(ctx, st)
	switch {
	case errors.Is(err, errUnknownOp):
		problem(w, http.StatusBadRequest, "unknown_op", st.Op, fmt.Sprintf("the harness has no op %q", st.Op))
	case err != nil:
		h.logf("step %s failed: %v", st.Op, err)
		problem(w, http.StatusUnprocessableEntity, "step_failed", st.Op, err.Error())
	default:
		writeJSON(w, struct{}{})
	}
}

func (h *harness) getHolder(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	a := h.run.actors[r.PathValue("actor")]
	h.mu.RUnlock()
	if a == nil {
		problem(w, http.StatusNotFound, "no_actor", "", "no actor "+r.PathValue("actor")+" in the loaded scenario")
		return
	}
	_, s := a.current()
	writeJSON(w, map[string]string{"holder_incarnation": s.HolderIncarnation()})
}

// listAnswer is GET /list: one snapshot, every page drained.
type listAnswer struct {
	Epoch    string          `json:"epoch"`
	Revision int64           `json:"revision"`
	Items    []api.LeaseItem `json:"items"`
}

func (h *harness) getList(w http.ResponseWriter, r *http.Request) {
	sel, name := r.URL.Query().Get("selector"), r.URL.Query().Get("token")
	tok, ok := tokens[name]
	if sel == "" || !ok {
		problem(w, http.StatusBadRequest, "invalid_request", "", "want ?selector=S&token=N with N one of the token names of GET /tokens")
		return
	}
	c, err := muster.New(h.brokerURL, muster.WithToken(tok.Secret),
		muster.WithHTTPClient(&http.Client{Transport: h.listTransport}))
	if err != nil {
		problem(w, http.StatusInternalServerError, "internal", "", err.Error())
		return
	}
	out := listAnswer{Items: []api.LeaseItem{}}
	limit := 500
	params := &api.ListLeasesParams{Selector: sel, Limit: &limit}
	for {
		resp, err := c.Raw().ListLeases(r.Context(), params)
		var page api.LeasePage
		if err := decodeAnswer(resp, err, &page); err != nil {
			var e *muster.Error
			if errors.As(err, &e) {
				problem(w, e.Status, string(e.Code), "", "LIST "+sel+": "+e.Detail)
				return
			}
			problem(w, http.StatusBadGateway, "broker_unreachable", "", err.Error())
			return
		}
		if out.Epoch == "" {
			out.Epoch, out.Revision = page.Snapshot.Epoch, page.Snapshot.Revision
		}
		out.Items = append(out.Items, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			break
		}
		params.Cursor = page.NextCursor
	}
	writeJSON(w, out)
}

// decodeAnswer decodes a 200 answer into out, or returns the problem.
func decodeAnswer(resp *http.Response, err error, out any) error {
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return answer(resp, nil, http.StatusOK)
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}

func (h *harness) getTokens(w http.ResponseWriter, _ *http.Request) {
	out := map[string]string{}
	for name, t := range tokens {
		out[name] = t.Secret
	}
	writeJSON(w, out)
}

// close ends the scenario; the caller then closes the broker.
func (h *harness) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.run.stop()
	h.proxy.reset()
	h.actorTransport.CloseIdleConnections()
	h.listTransport.CloseIdleConnections()
	h.endDeployment()
	h.pg.close()
}

// getBrokers answers the base URL of every name a step's `brokers` may
// hold: proxy, dead, b1 (the broker behind the proxy, directly) and, in a
// placed scenario, b2 and b3.
func (h *harness) getBrokers(w http.ResponseWriter, _ *http.Request) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := map[string]string{"proxy": h.proxyURL, "dead": h.deadURL, h.broker.name: h.brokerURL}
	if d := h.deployment; d != nil {
		for _, b := range d.others {
			out[b.name] = b.url()
		}
	}
	writeJSON(w, out)
}
