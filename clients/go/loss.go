package muster

import (
	"fmt"
	"net/http"
)

// Prompt loss. A session is lost the moment the client learns that it
// ended, not at its next keepalive (docs/client-operations.md, "Prompt
// loss"):
//   - any answer or stream from the broker that holds the session carries
//     another epoch (Muster-Epoch): that broker restarted, or the family
//     came back to it as a new lifetime, and its sessions are gone;
//   - that broker answers family_unavailable: it stopped serving the
//     family, and its sessions with it;
//   - the broker answers session_not_found to a request of the session.
// A connection error alone proves nothing: the session's local deadline
// decides then.

// answeredBy is the host (host:port) that answered resp: the owner a
// wrong_broker answer was followed to, or the base URL's.
func answeredBy(resp *http.Response) string {
	if resp == nil || resp.Request == nil || resp.Request.URL == nil {
		return ""
	}
	return resp.Request.URL.Host
}

// track registers s for prompt loss; untrack forgets it when it ends.
func (c *Client) trackSession(s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[*Session]struct{}{}
	}
	c.sessions[s] = struct{}{}
}

func (c *Client) untrackSession(s *Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, s)
}

// brokerGone ends, promptly, every session held by host that match: those
// whose epoch differs from epoch (a new lifetime answered), or all of them
// (epoch "": the broker stopped serving the family).
func (c *Client) brokerGone(host, epoch string) {
	if host == "" || c.lateLoss {
		return
	}
	c.mu.Lock()
	var gone []*Session
	for s := range c.sessions {
		if s.heldBy(host, epoch) {
			gone = append(gone, s)
		}
	}
	c.mu.Unlock()
	for _, s := range gone {
		if epoch == "" {
			s.end(fmt.Errorf("%w: its broker %s no longer serves the family (family_unavailable)", ErrSessionLost, host))
		} else {
			s.end(fmt.Errorf("%w: its broker %s answered for another lifetime (epoch %s, the session's %s)", ErrSessionLost, host, epoch, s.Epoch()))
		}
	}
}
