"""The wire helpers of the asyncio client: routes, base URLs, bodies and
problem answers (RFC 9457) as MusterErrors."""

from __future__ import annotations

import json
import ssl
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import quote, urlsplit

import httpx

from ._errors import InvalidRouteError, MusterError, TransportError, error_for

#: Bounds the bytes read from one non-streaming response.
MAX_BODY = 32 << 20


class Route:
    """A parsed exact route."""

    __slots__ = ("area", "realm", "resource")

    def __init__(self, realm: str, area: str, resource: str) -> None:
        self.realm, self.area, self.resource = realm, area, resource

    def __str__(self) -> str:
        return f"lease://{self.realm}/{self.area}/{self.resource}"

    @property
    def path(self) -> str:
        return "/".join(quote(s, safe="") for s in (self.realm, self.area, self.resource))


def parse_route(s: str) -> Route:
    """Splits lease://realm/area/resource. It checks only the shape needed to
    build a path; the broker checks the rest (a wildcard is its invalid_route)."""
    rest = s.removeprefix("lease://")
    parts = rest.split("/")
    if rest == s or len(parts) != 3 or not all(parts):
        raise InvalidRouteError(detail="a route is lease://{realm}/{area}/{resource}")
    return Route(parts[0], parts[1], parts[2])


def parse_bases(base_url: str | Sequence[str]) -> list[str]:
    """The base URLs of a Client: one, a list, or one string with several
    separated by commas, in order of preference; each http(s)://host[:port]
    (a trailing '/' dropped)."""
    given = [base_url] if isinstance(base_url, str) else list(base_url)
    out: list[str] = []
    for one in given:
        if not isinstance(one, str):
            raise TypeError(f"muster: base URL {one!r}: want a str")
        for part in one.split(","):
            b = part.strip().rstrip("/")
            try:
                u = urlsplit(b)
            except ValueError:
                u = None
            if u is None or u.scheme not in ("http", "https") or not u.netloc:
                raise ValueError(f"muster: base URL {b!r}: want http(s)://host[:port], or several separated by commas")
            out.append(b)
    if not out:
        raise ValueError("muster: no base URL: want http(s)://host[:port], or several separated by commas")
    return out


def not_sent(err: httpx.TransportError) -> bool:
    """Whether err proves the request never reached a broker: the connection
    could not be made."""
    return isinstance(err, httpx.ConnectError | httpx.ConnectTimeout)


def ssl_failure(err: ssl.SSLError, req: httpx.Request) -> httpx.ReadError:
    """An ``ssl.SSLError`` that httpx lets through instead of raising its own
    exception (a TLS alert read after the handshake: under TLS 1.3, a broker
    that wants a client certificate and got none answers the first read with
    one) as the ``httpx.ReadError`` it stands for, caused by it."""
    e = httpx.ReadError(f"{type(err).__name__}: {err}", request=req)
    e.__cause__ = err
    return e


def is_problem_type(resp: httpx.Response) -> bool:
    ct: str = resp.headers.get("Content-Type", "")
    return ct.split(";")[0].strip().lower() == "application/problem+json"


async def buffered(resp: httpx.Response, req: httpx.Request) -> tuple[httpx.Response, bytes]:
    """Reads and closes a streaming answer; returns an answer holding its
    body (read again by the caller) and the body."""
    try:
        body = await read_body(resp)
    finally:
        await resp.aclose()
    headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
    return httpx.Response(resp.status_code, headers=headers, content=body, request=req), body


def problem_code(content_type: str, body: bytes) -> str:
    """The code of a problem answer, "" when it is not one."""
    if content_type.split(";")[0].strip().lower() != "application/problem+json":
        return ""
    try:
        p = json.loads(body)
    except ValueError:
        return ""
    c = p.get("code") if isinstance(p, dict) else None
    return c if isinstance(c, str) else ""


async def read_body(resp: httpx.Response) -> bytes:
    """The body of a streaming answer, at most MAX_BODY bytes; a failure
    reading it is a TransportError."""
    data = bytearray()
    try:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > MAX_BODY:
                break
    except httpx.RequestError as e:  # the connection broke, or a read timed out
        raise TransportError(e) from e
    except ssl.SSLError as e:  # a TLS alert httpx let through
        err = ssl_failure(e, resp.request)
        raise TransportError(err) from err
    return bytes(data[:MAX_BODY])


def misdirected_to(content_type: str, body: bytes) -> str | None:
    """The owner a 421 answer names (scheme://host[:port]), when it is a
    ``wrong_broker`` problem with an http(s) URL; None otherwise."""
    if content_type.split(";")[0].strip().lower() != "application/problem+json":
        return None
    try:
        p = json.loads(body)
    except ValueError:
        return None
    if not isinstance(p, dict) or p.get("code") != "wrong_broker" or not isinstance(p.get("owner"), str):
        return None
    try:
        u = urlsplit(p["owner"])
    except ValueError:
        return None
    if u.scheme not in ("http", "https") or not u.netloc:
        return None
    return f"{u.scheme}://{u.netloc}"


def problem_error(resp: httpx.Response, body: bytes) -> MusterError:
    """A non-success answer as a MusterError: the problem body's code when
    there is one; otherwise a code derived from the status, so a gateway's
    502 is still advised as retryable."""
    status = resp.status_code
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = ""
    mt = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if mt in ("application/problem+json", "application/json"):
        try:
            p = json.loads(body)
        except ValueError:
            p = None
        if isinstance(p, dict) and isinstance(p.get("code"), str) and p["code"]:
            t = p.get("title")
            d = p.get("detail")
            sc = p.get("scope")
            ow = p.get("owner")
            return error_for(
                p["code"],
                d if isinstance(d, str) else "",
                status=status,
                title=t if isinstance(t, str) and t else title,
                scope=sc if isinstance(sc, str) else "",
                owner=ow if isinstance(ow, str) else "",
            )
    code = {502: "unavailable", 503: "unavailable", 504: "unavailable", 404: "not_found"}.get(status)
    code = code or {401: "unauthenticated", 403: "forbidden", 413: "payload_too_large"}.get(status, "internal")
    text = body[:200].decode("utf-8", errors="replace").strip()
    return error_for(code, f"HTTP {status} without a problem body: {text}", status=status, title=title)
