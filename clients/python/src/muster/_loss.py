"""Prompt loss, as in clients/go/loss.go. A session is lost the moment the
client learns that it ended, not at its next keepalive
(docs/client-operations.md, "Prompt loss"):

- any answer or stream from the broker that holds the session (the host that
  last answered one of the session's own requests with success, after
  following wrong_broker: its creator, or the broker a planned move took the
  family to) carries another epoch (Muster-Epoch) than that success: that
  broker restarted, or the family came back to it as a new lifetime, and its
  sessions are gone;
- that broker answers family_unavailable: it stopped serving the family, and
  its sessions with it;
- the broker answers session_not_found to a request of the session (acquire,
  extend, release, batch; the keepalive does it itself).

A connection error alone proves nothing: the session's local deadline decides
then. The session ends with a SessionLostError saying why, its leases with a
LeaseLostError caused by it, and its keepalive stops.

A success of one of the session's own requests (keepalive, acquire, extend,
release, batch, delete) records its broker and epoch (held_by) before that
same answer is judged: a success from the creator under a new epoch, the
family moved away and back, ends nothing (the Go SDK's Session.call).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import httpx

from ._errors import MusterException, SessionLostError, SessionNotFoundError


class Held(Protocol):
    """What the rule needs of a session (a Session is one): the broker that
    holds it, its epoch, and how to end it. The connection keeps a weak set
    of its live sessions (Conn._sessions) for broker_gone."""

    epoch: str
    _host: str  #: the broker (host:port) that last answered one of its requests with success

    @property
    def _late_loss(self) -> bool:
        """Conformance tests only: the session is lost at its keepalive only."""
        ...

    @property
    def _creator_loss(self) -> bool:
        """Conformance tests only: the session's broker stays its creator."""
        ...

    def _end(self, cause: MusterException) -> None: ...


def answered_by(resp: httpx.Response) -> str:
    """The host (host:port) that answered resp: the owner a wrong_broker
    answer was followed to, or the base URL's; "" when unknown."""
    try:
        return resp.request.url.netloc.decode("ascii")
    except RuntimeError:  # a response built without its request
        return ""


def held_by(s: Held, host: str, epoch: str) -> None:
    """Records host, answering one of s's own requests with success under
    epoch, as the broker that holds s now (docs/client-operations.md,
    "Planned moves")."""
    if host and epoch and not s._creator_loss:
        s._host, s.epoch = host, epoch


def broker_gone(sessions: Iterable[Held], host: str, epoch: str) -> None:
    """Ends, at once, every one of sessions held by host that the answer
    proves gone: those whose epoch differs from ``epoch`` (a new lifetime
    answered), or all of them (``epoch`` "": the broker stopped serving the
    family)."""
    if not host:
        return
    gone = [s for s in sessions if s._host == host and (not epoch or s.epoch != epoch) and not s._late_loss]
    for s in gone:
        if epoch:
            why = f"its broker {host} answered for another lifetime (epoch {epoch}, the session's {s.epoch})"
        else:
            why = f"its broker {host} no longer serves the family (family_unavailable)"
        s._end(SessionLostError(why))


def not_found(s: Held, err: BaseException) -> None:
    """Ends s at once when err is the broker's session_not_found to one of
    its requests."""
    if isinstance(err, SessionNotFoundError) and not s._late_loss:
        s._end(SessionLostError("the broker answered session_not_found", err))
