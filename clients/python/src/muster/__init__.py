"""muster: the Python SDK of the Muster lease broker (asyncio first, with a
synchronous facade in :mod:`muster.sync`).

The same surfaces and behaviour as the Go SDK (clients/go): a Client of one
broker; Session (background keepalive) and Lease (fencing token, extend,
release, lost); with_lease; LIST as an async iterator over pages; watch
streams; the Observer; fleet helpers; typed errors per contract code with
retry advice.
"""

from . import sync
from ._backoff import DEFAULT_RECONCILE_JITTER, MAX_RECONCILE, MIN_RECONCILE, reconcile_interval
from ._batch import MAX_BATCH_OPS, Batch, BatchResult
from ._client import DEFAULT_TIMEOUT, Client
from ._errors import *  # noqa: F403 - the error table is the public API
from ._errors import __all__ as _errors_all
from ._fleet import Fleet
from ._lease import Lease
from ._models import DecodeError
from ._observe import Observer
from ._scope import LeaseScope
from ._session import Session
from ._types import (
    Change,
    ChangeKind,
    Item,
    Kept,
    LeaseStatus,
    Marker,
    MarkerPage,
    ObserverStats,
    Page,
    Plan,
    Spec,
    SweepResult,
    View,
)
from ._watch import Subscription

__all__ = [
    "DEFAULT_RECONCILE_JITTER",
    "DEFAULT_TIMEOUT",
    "MAX_BATCH_OPS",
    "MAX_RECONCILE",
    "MIN_RECONCILE",
    "Batch",
    "BatchResult",
    "Change",
    "ChangeKind",
    "Client",
    "DecodeError",
    "Fleet",
    "Item",
    "Kept",
    "Lease",
    "LeaseScope",
    "LeaseStatus",
    "Marker",
    "MarkerPage",
    "Observer",
    "ObserverStats",
    "Page",
    "Plan",
    "Session",
    "Spec",
    "Subscription",
    "SweepResult",
    "View",
    "reconcile_interval",
    "sync",
    *_errors_all,
]
