package leasemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Call performs one operation of in (its Kind, Token and TTL) on route, in
// session sess, against the broker at base (with bearer when not empty),
// and records its window: in.Call before the request is sent, Ret after the
// answer is read. An error is a transport or decoding failure: the caller
// decides whether the operation may have taken effect (Output.Unknown).
func Call(c *http.Client, base, bearer, route, sess string, in *Input) (Output, error) {
	path := "/v1/leases/" + strings.TrimPrefix(route, "lease://")
	ttl := time.Duration(in.TTL).Milliseconds()
	method, body := "POST", map[string]any{"session_id": sess}
	var send any = body
	switch in.Kind {
	case Acquire:
		path += "/acquire"
		body["ttl_ms"] = ttl
	case Extend:
		path += "/extend"
		body["fencing_token"], body["ttl_ms"] = in.Token, ttl
	case Release:
		path += "/release"
		body["fencing_token"] = in.Token
	default:
		method, send = "GET", nil
	}
	req, err := Request(method, base+path, bearer, send)
	if err != nil {
		return Output{}, err
	}
	in.Call = time.Now().UnixNano()
	resp, err := c.Do(req)
	if err != nil {
		return Output{}, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	out := Output{Status: resp.StatusCode, Ret: time.Now().UnixNano(), Owner: -1}
	if err != nil {
		return out, err
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
			return out, fmt.Errorf("%s %s: %d %q: %w", method, path, resp.StatusCode, data, err)
		}
	}
	out.Code = v.Code
	if v.Outcome != "" {
		out.Code = v.Outcome
	}
	out.Token, out.Held = v.FencingToken, v.Held
	if !v.ExpiresAt.IsZero() {
		out.Exp = v.ExpiresAt.UnixNano()
	}
	if v.OwnerID != "" {
		_, _ = fmt.Sscanf(v.OwnerID, "client-%d", &out.Owner)
	}
	return out, nil
}

// Request is an HTTP request with body as JSON (none when nil) and the
// bearer token when not empty.
func Request(method, url, bearer string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return req, nil
}
