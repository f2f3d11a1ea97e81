"""``async with session.lease(route, ttl) as lease:``: a lease held for the
duration of a block, the way redis-py's and etcd3's ``lock()`` are used, and
kept for it: extended every ttl/3 in the background, released at the end. A
loss cancels the block, as ``asyncio.timeout`` does, and the block raises the
LeaseLostError instead of the CancelledError."""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType

from ._errors import LeaseLostError
from ._lease import Lease, SessionState

#: How long the end of a scope waits for its release.
RELEASE_TIMEOUT = 5.0


class LeaseScope:
    """What ``Session.lease`` returns: an async context manager whose
    ``__aenter__`` acquires the route (waiting in its queue up to ``wait``
    seconds, as ``Session.acquire``) and returns the :class:`Lease`.

    While the block runs, the lease is extended every ttl/3. When it is lost
    (its local deadline passed, the broker answered that it is not this
    session's, the session ended), the task running the block is cancelled
    and the block raises the lease's LeaseLostError, as ``asyncio.timeout``
    turns its cancellation into TimeoutError; a loss the block itself ran
    into (``lease.extend`` raising it) is raised as is. When the block ends,
    normally or not, the lease is released (bounded to 5 s: on a failure it
    ends at its TTL at the latest). A block that completed although the
    lease was lost while it ran raises the loss too: work done without the
    lease must not be taken as done. A scope is entered once."""

    def __init__(self, s: SessionState, route: str, ttl: float, wait: float) -> None:
        self._s, self._route, self._ttl, self._wait = s, route, ttl, wait
        self._lease: Lease | None = None
        self._task: asyncio.Task[object] | None = None
        self._renew: asyncio.Task[None] | None = None
        self._cancelled = False  # this scope cancelled the block's task
        self._exiting = False

    @property
    def lease(self) -> Lease | None:
        """The lease, once the scope was entered."""
        return self._lease

    async def __aenter__(self) -> Lease:
        if self._lease is not None or self._exiting:
            raise RuntimeError("muster: a lease scope is entered once")
        lease = await self._s.acquire(self._route, self._ttl, wait=self._wait)
        self._lease = lease
        if lease.error is not None:  # lost at once (its session ended meanwhile)
            raise lease.error
        self._task = asyncio.current_task()
        self._renew = asyncio.create_task(lease._renew(self._ttl), name=f"muster-renew {lease.route}")
        lease._on_end.append(self._on_end)
        return lease

    def _on_end(self) -> None:
        """Cancels the block when the lease is lost while it runs, unless the
        block's own task found out (it raises the loss itself)."""
        lease, task = self._lease, self._task
        if self._exiting or lease is None or task is None or task.done():
            return
        if not isinstance(lease.error, LeaseLostError) or asyncio.current_task() is task:
            return
        self._cancelled = True
        task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._exiting = True
        lease = self._lease
        assert lease is not None
        with contextlib.suppress(ValueError):
            lease._on_end.remove(self._on_end)
        if self._renew is not None:
            self._renew.cancel()
            await asyncio.gather(self._renew, return_exceptions=True)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(RELEASE_TIMEOUT):
                await asyncio.shield(lease.release())
        err = lease.error
        # uncancel() runs whenever this scope cancelled the task (it
        # balances the cancel); the loss replaces only its own cancellation.
        if (
            self._cancelled
            and self._task is not None
            and self._task.uncancel() == 0
            and exc_type is asyncio.CancelledError
            and isinstance(err, LeaseLostError)
        ):
            raise err
        if exc_type is None and isinstance(err, LeaseLostError):
            raise err
