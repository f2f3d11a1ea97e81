"""The error table: every contract code maps to its typed exception with the
Go SDK's retry advice; an unknown code stays a generic MusterError."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
import yaml

import muster
from muster._http import problem_error

ROOT = Path(__file__).resolve().parents[3]
#: The known codes of the contract: ErrorCode is an open string, its known
#: codes listed under x-extensible-enum (never a closed enum).
ERROR_CODE = yaml.safe_load((ROOT / "openapi.yaml").read_text())["components"]["schemas"]["ErrorCode"]
CONTRACT_CODES = ERROR_CODE["x-extensible-enum"]


def go_table() -> dict[str, str]:
    """code -> advice, read from clients/go/errors.go's codeTable."""
    src = (ROOT / "clients/go/errors.go").read_text()
    sentinels = dict(re.findall(r'(Err\w+)\s*= &Error\{Code: "(\w+)"\}', src))
    rows = re.findall(r"\{(Err\w+), Retry(\w+)\}", src)
    return {
        sentinels[s]: {"No": "retry-no", "Backoff": "retry-backoff", "Restart": "retry-restart"}[a] for s, a in rows
    }


def test_codes_are_the_contracts_in_order() -> None:
    assert "enum" not in ERROR_CODE and ERROR_CODE["type"] == "string"
    assert muster.codes() == CONTRACT_CODES


def test_spec_limit() -> None:
    e = muster.error_for("spec_limit", "full", status=429, scope="root")
    assert type(e) is muster.SpecLimitError and e.scope == "root"
    assert e.advice is muster.Retry.NO and not muster.is_retryable(e)


def test_advice_matches_the_go_sdk() -> None:
    table = go_table()
    assert set(table) == set(CONTRACT_CODES)
    for code in CONTRACT_CODES:
        e = muster.error_for(code, "d", status=400)
        assert type(e) is not muster.MusterError, code
        assert isinstance(e, muster.MusterError) and e.code == code
        assert e.advice.value == table[code], code
        assert muster.is_retryable(e) == (table[code] == "retry-backoff")


def test_unknown_code_is_a_generic_error() -> None:
    e = muster.error_for("quota_exceeded_someday", "later", status=409)
    assert type(e) is muster.MusterError and e.code == "quota_exceeded_someday"
    assert str(e) == "muster: quota_exceeded_someday: later"
    assert e.advice is muster.Retry.NO
    assert muster.advice(muster.error_for("new_one", status=503)) is muster.Retry.BACKOFF
    assert muster.advice(muster.error_for("new_one", status=429)) is muster.Retry.BACKOFF


def test_sdk_errors_advice() -> None:
    assert muster.advice(None) is muster.Retry.NO
    assert muster.advice(muster.LeaseLostError(muster.FencedError())) is muster.Retry.RESTART
    assert muster.advice(muster.StreamEndError("overflow")) is muster.Retry.RESTART
    assert muster.advice(muster.SessionLostError("gone")) is muster.Retry.RESTART
    assert muster.advice(muster.ClosedError()) is muster.Retry.NO
    assert muster.advice(asyncio.CancelledError()) is muster.Retry.NO
    assert muster.advice(httpx.ConnectError("refused")) is muster.Retry.BACKOFF


def resp(status: int, body: bytes, ctype: str) -> httpx.Response:
    return httpx.Response(status, content=body, headers={"Content-Type": ctype})


@pytest.mark.parametrize(
    ("status", "body", "ctype", "cls", "code"),
    [
        (
            409,
            b'{"type":"about:blank","title":"Conflict","status":409,"code":"lease_held","detail":"held"}',
            "application/problem+json",
            muster.LeaseHeldError,
            "lease_held",
        ),
        (
            409,
            b'{"code":"brand_new","title":"Conflict","status":409}',
            "application/problem+json",
            muster.MusterError,
            "brand_new",
        ),
        (
            429,
            b'{"type":"about:blank","title":"Too Many Requests","status":429,"code":"session_limit","scope":"family"}',
            "application/problem+json",
            muster.SessionLimitError,
            "session_limit",
        ),
        (
            429,
            b'{"title":"Too Many Requests","status":429,"code":"spec_limit","scope":7}',
            "application/problem+json",
            muster.SpecLimitError,
            "spec_limit",
        ),
        (
            421,
            b'{"title":"Misdirected Request","status":421,"code":"wrong_broker","owner":"http://b2:7070"}',
            "application/problem+json",
            muster.WrongBrokerError,
            "wrong_broker",
        ),
        (502, b"<html>bad gateway</html>", "text/html", muster.UnavailableError, "unavailable"),
        (504, b"", "text/plain", muster.UnavailableError, "unavailable"),
        (404, b"nope", "text/plain", muster.NotFoundError, "not_found"),
        (401, b"", "", muster.UnauthenticatedError, "unauthenticated"),
        (403, b"", "", muster.ForbiddenError, "forbidden"),
        (413, b"", "", muster.PayloadTooLargeError, "payload_too_large"),
        (418, b"{not json", "application/problem+json", muster.InternalError, "internal"),
        (400, b'{"code": 7}', "application/json", muster.InternalError, "internal"),
    ],
)
def test_problem_error(status: int, body: bytes, ctype: str, cls: type[muster.MusterError], code: str) -> None:
    e = problem_error(resp(status, body, ctype), body)
    assert type(e) is cls and e.code == code and e.status == status
    if cls is muster.LeaseHeldError:
        assert e.detail == "held" and e.title == "Conflict"
    # scope only from a string member of the problem body; "" otherwise
    assert e.scope == ("family" if cls is muster.SessionLimitError else "")
    # owner (the broker serving the family) only on wrong_broker
    assert e.owner == ("http://b2:7070" if cls is muster.WrongBrokerError else "")
