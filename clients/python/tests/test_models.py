"""Every hand-written wire model against openapi.yaml, field by field: the
same names, the same required set, compatible types. A schema added to the
contract without a model (or a model without a schema) fails here too."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from muster import _models as m

SPEC = yaml.safe_load((Path(__file__).resolve().parents[3] / "openapi.yaml").read_text())
SCHEMAS: dict[str, Any] = SPEC["components"]["schemas"]

#: Schemas that are not objects (enums, scalars, the oneOf of watch events).
NOT_MODELS = {
    "ErrorCode",
    "SessionId",
    "Segment",
    "Selector",
    "OwnerId",
    "Epoch",
    "Revision",
    "HolderIncarnation",
    "LeaseTTL",
    "FencingToken",
    "ChangeKind",
    "StreamEndReason",
    "WatchEvent",
    "BatchOpKind",
    "Route",
}


def resolve(s: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in s:
        return resolve(SCHEMAS[s["$ref"].rsplit("/", 1)[1]])
    if "allOf" in s:
        return resolve(s["allOf"][0])
    return s


def check_type(tp: Any, s: dict[str, Any], where: str) -> None:
    """tp (the model's annotation, Optional stripped) fits schema s."""
    ref = s.get("$ref", "")
    s = resolve(s)
    if "x-go-type" in s and s["x-go-type"] == "json.RawMessage" and s.get("type") != "object":
        assert tp is Any, f"{where}: raw JSON is Any"
        return
    t = s.get("type")
    if t == "object" and ref:
        assert tp is m.MODELS[str(ref).rsplit("/", 1)[1]], f"{where}: want the model {ref}"
    elif t == "object":
        assert typing.get_origin(tp) is dict, f"{where}: want a dict"
    elif t == "array":
        assert typing.get_origin(tp) is list, f"{where}: want a list"
        check_type(typing.get_args(tp)[0], s["items"], where + "[]")
    elif t == "string" and s.get("format") == "date-time":
        assert tp is datetime, f"{where}: want datetime"
    else:
        want = {"string": str, "integer": int, "boolean": bool}[str(t)]
        assert tp is want, f"{where}: want {want.__name__}, have {tp}"


def test_every_object_schema_has_a_model() -> None:
    assert set(SCHEMAS) - NOT_MODELS == set(m.MODELS)


@pytest.mark.parametrize("name", sorted(m.MODELS))
def test_model_matches_schema(name: str) -> None:
    schema = SCHEMAS[name]
    cls = m.MODELS[name]
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    props = schema["properties"]
    assert set(fields) == set(props), name
    required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
    assert required == set(schema.get("required", [])), name
    for n, tp in hints.items():
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if n not in required:
            assert type(None) in typing.get_args(tp), f"{name}.{n}: optional members are Optional"
            tp = args[0]
        check_type(tp, props[n], f"{name}.{n}")


def test_decode_checks_types_and_required_members() -> None:
    good = {
        "route": "lease://a/b/c",
        "owner_id": "w",
        "holder_incarnation": "h",
        "acquired_at": "2026-11-30T10:00:00.123456789Z",
        "expires_at": "2026-11-30T10:00:15Z",
        "remaining_ms": 15000,
        "renewals": 0,
        "a_future_member": [1, 2],
    }
    it = m.decode(m.LeaseItem, good)
    assert it.remaining_ms == 15000 and it.acquired_at.microsecond == 123456
    for bad in (
        {k: v for k, v in good.items() if k != "route"},
        {**good, "renewals": "0"},
        {**good, "renewals": True},
        {**good, "expires_at": "yesterday"},
    ):
        with pytest.raises(m.DecodeError):
            m.decode(m.LeaseItem, bad)
    with pytest.raises(m.DecodeError):
        m.decode(m.LeasePage, {"items": {}, "snapshot": {"epoch": "e", "revision": 1}})


def test_encode_omits_unset_optional_members() -> None:
    assert m.encode(m.AcquireRequest(session_id="s", ttl_ms=100)) == {"session_id": "s", "ttl_ms": 100}
    assert m.encode(m.AcquireRequest(session_id="s", ttl_ms=100, wait_ms=5)) == {
        "session_id": "s",
        "ttl_ms": 100,
        "wait_ms": 5,
    }


def test_encode_encodes_models_in_lists() -> None:
    req = m.BatchRequest(session_id="s", ops=[m.BatchOp(op="release", route="lease://a/b/c", fencing_token=7)])
    assert m.encode(req) == {
        "session_id": "s",
        "ops": [{"op": "release", "route": "lease://a/b/c", "fencing_token": 7}],
    }
