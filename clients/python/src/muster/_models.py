"""Wire models of openapi.yaml's components.schemas, hand-written.

Each dataclass mirrors one schema: its field names are the JSON member names
(the contract is snake_case), a field without a default is a required member,
one with a default is optional. tests/test_models.py checks every model
against openapi.yaml, field by field, so the two cannot drift apart.

:func:`decode` builds a model from parsed JSON and checks the types on the
way: a malformed answer is a :class:`DecodeError`, never a half-built object.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, Union

T = TypeVar("T")


class DecodeError(ValueError):
    """An answer of the broker does not match the contract's schema."""


@dataclass(frozen=True)
class Problem:
    type: str
    title: str
    status: int
    code: str
    detail: str | None = None
    scope: str | None = None
    owner: str | None = None


@dataclass(frozen=True)
class CreateSessionRequest:
    owner_id: str
    ttl_ms: int


@dataclass(frozen=True)
class Session:
    session_id: str
    holder_incarnation: str
    owner_id: str
    ttl_ms: int
    expires_at: datetime
    epoch: str


@dataclass(frozen=True)
class Keepalive:
    expires_at: datetime
    ttl_ms: int


@dataclass(frozen=True)
class AcquireRequest:
    session_id: str
    ttl_ms: int
    wait_ms: int | None = None


@dataclass(frozen=True)
class ExtendRequest:
    session_id: str
    fencing_token: int
    ttl_ms: int


@dataclass(frozen=True)
class ReleaseRequest:
    session_id: str
    fencing_token: int


@dataclass(frozen=True)
class Lease:
    route: str
    fencing_token: int
    acquired_at: datetime
    expires_at: datetime
    renewals: int
    outcome: str | None = None
    expires_after_request_ms: int | None = None


@dataclass(frozen=True)
class BatchOp:
    op: str
    route: str
    ttl_ms: int | None = None
    fencing_token: int | None = None


@dataclass(frozen=True)
class BatchRequest:
    session_id: str
    ops: list[BatchOp]


@dataclass(frozen=True)
class BatchResult:
    op: str
    route: str
    ok: bool
    lease: Lease | None = None
    code: str | None = None
    status: int | None = None
    detail: str | None = None


@dataclass(frozen=True)
class BatchResponse:
    results: list[BatchResult]
    revision: int


@dataclass(frozen=True)
class LeaseStatus:
    route: str
    held: bool
    waiters: int
    owner_id: str | None = None
    holder_incarnation: str | None = None
    acquired_at: datetime | None = None
    expires_at: datetime | None = None
    remaining_ms: int | None = None
    renewals: int | None = None


@dataclass(frozen=True)
class LeaseItem:
    route: str
    owner_id: str
    holder_incarnation: str
    acquired_at: datetime
    expires_at: datetime
    remaining_ms: int
    renewals: int


@dataclass(frozen=True)
class Snapshot:
    epoch: str
    revision: int


@dataclass(frozen=True)
class LeasePage:
    items: list[LeaseItem]
    snapshot: Snapshot
    next_cursor: str | None = None


@dataclass(frozen=True)
class WatchSubscription:
    id: str
    selector: str
    items: list[LeaseItem]
    next_cursor: str | None = None


@dataclass(frozen=True)
class SnapshotEvent:
    epoch: str
    revision: int
    subscriptions: list[WatchSubscription]


@dataclass(frozen=True)
class ChangeEvent:
    subscription_id: str
    route: str
    kind: str
    revision: int
    item: LeaseItem | None = None


@dataclass(frozen=True)
class StreamEndEvent:
    reason: str
    revision: int | None = None


@dataclass(frozen=True)
class RegisterRequest:
    kind: str
    spec: Any


@dataclass(frozen=True)
class SpecRow:
    name: str
    spec: Any


@dataclass(frozen=True)
class SpecPage:
    items: list[SpecRow]
    next_cursor: str | None = None


@dataclass(frozen=True)
class SweepRequest:
    schema: dict[str, Any]


@dataclass(frozen=True)
class InvalidSpec:
    name: str
    reason: str


@dataclass(frozen=True)
class SweepResult:
    kept: list[SpecRow]
    dropped: list[str]
    invalid: list[InvalidSpec] | None = None


@dataclass(frozen=True)
class PlanRequest:
    desired: list[str]
    live: list[str]


@dataclass(frozen=True)
class Plan:
    missing: list[str]
    orphans: list[str]


@dataclass(frozen=True)
class Gap:
    missing: list[str]
    orphans: list[str]
    revision: int
    next_cursor: str | None = None


@dataclass(frozen=True)
class PlacementOwner:
    broker: str
    addr: str
    epoch: int
    expires_in_ms: int


@dataclass(frozen=True)
class PlacementBroker:
    broker: str
    addr: str


@dataclass(frozen=True)
class Placement:
    family: str
    placed: bool
    broker: str | None = None
    owner: PlacementOwner | None = None
    pinned: str | None = None
    brokers: list[PlacementBroker] | None = None


@dataclass(frozen=True)
class MoveRequest:
    to: str


@dataclass(frozen=True)
class Health:
    status: str
    epoch: str
    dev_mode: bool | None = None
    version: str | None = None
    commit: str | None = None
    commit_time: str | None = None
    go_version: str | None = None


#: Every model, by its schema name in openapi.yaml.
MODELS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        Problem,
        CreateSessionRequest,
        Session,
        Keepalive,
        AcquireRequest,
        ExtendRequest,
        ReleaseRequest,
        Lease,
        BatchOp,
        BatchRequest,
        BatchResult,
        BatchResponse,
        LeaseStatus,
        LeaseItem,
        Snapshot,
        LeasePage,
        WatchSubscription,
        SnapshotEvent,
        ChangeEvent,
        StreamEndEvent,
        RegisterRequest,
        SpecRow,
        SpecPage,
        SweepRequest,
        InvalidSpec,
        SweepResult,
        PlanRequest,
        Plan,
        Gap,
        Placement,
        PlacementOwner,
        PlacementBroker,
        MoveRequest,
        Health,
    )
}

_hints_cache: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints_cache[cls] = h
    return h


def decode(cls: type[T], data: object) -> T:
    """Builds the model ``cls`` from parsed JSON, checking every member's type;
    unknown members are ignored (the contract may add optional ones)."""
    return typing.cast(T, _decode(cls, data, cls.__name__))


def _decode(tp: Any, v: object, where: str) -> object:
    if tp is Any:
        return v
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if v is None:
            return None
        return _decode(args[0], v, where)
    if origin is list:
        if not isinstance(v, list):
            raise DecodeError(f"{where}: want an array")
        (arg,) = typing.get_args(tp)
        return [_decode(arg, x, f"{where}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if not isinstance(v, dict):
            raise DecodeError(f"{where}: want an object")
        return v
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise DecodeError(f"{where}: want an object")
        kw: dict[str, object] = {}
        hints = _hints(typing.cast(type[Any], tp))
        for f in dataclasses.fields(tp):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if f.name not in v:
                if required:
                    raise DecodeError(f"{where}: missing {f.name}")
                continue
            kw[f.name] = _decode(hints[f.name], v[f.name], f"{where}.{f.name}")
        return typing.cast(Any, tp)(**kw)
    if tp is datetime:
        if not isinstance(v, str):
            raise DecodeError(f"{where}: want a date-time string")
        try:
            return datetime.fromisoformat(v)
        except ValueError as e:
            raise DecodeError(f"{where}: {e}") from None
    if tp is bool:
        if not isinstance(v, bool):
            raise DecodeError(f"{where}: want a boolean")
        return v
    if tp is int:
        if not isinstance(v, int) or isinstance(v, bool):
            raise DecodeError(f"{where}: want an integer")
        return v
    if tp is str:
        if not isinstance(v, str):
            raise DecodeError(f"{where}: want a string")
        return v
    raise TypeError(f"{where}: unsupported type {tp!r}")  # a bug of this module


def encode(model: object) -> dict[str, Any]:
    """The JSON object of a request model (models in lists encoded too);
    optional members left at None are omitted."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(typing.cast(Any, model)):
        val = getattr(model, f.name)
        if val is None and f.default is None:
            continue
        if isinstance(val, list):
            val = [encode(x) if dataclasses.is_dataclass(x) else x for x in val]
        out[f.name] = val
    return out


__all__ = ["MODELS", "DecodeError", "decode", "encode"]
