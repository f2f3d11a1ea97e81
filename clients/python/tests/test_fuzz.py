"""Property tests of the other parsers: a problem body and a wire model
decode never crash on arbitrary input; they give a MusterError / a
DecodeError."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

import muster
from muster import _models as m
from muster._http import problem_error

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    status=st.integers(min_value=300, max_value=599),
    body=st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())),
    ctype=st.sampled_from(["application/problem+json", "application/json; charset=utf-8", "text/plain", ""]),
)
def test_problem_error_never_crashes(status: int, body: bytes, ctype: str) -> None:
    e = problem_error(httpx.Response(status, content=body, headers={"Content-Type": ctype}), body)
    assert isinstance(e, muster.MusterError) and e.code and e.status == status
    assert isinstance(muster.advice(e), muster.Retry)


@settings(max_examples=200, deadline=None)
@given(
    value=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"items": json_values, "snapshot": json_values},
            optional={"next_cursor": json_values},
        ),
    )
)
def test_decode_never_crashes(value: Any) -> None:
    for cls in (m.LeasePage, m.SnapshotEvent, m.ChangeEvent, m.StreamEndEvent, m.Problem):
        with contextlib.suppress(m.DecodeError):
            m.decode(cls, value)
