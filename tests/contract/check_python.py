"""Drives a Python client generated from openapi.yaml (openapi-python-client).

usage: check_python.py GENERATED_DIR BASE_URL

1. Against the real broker at BASE_URL: create a session, acquire a lease,
   release it with a stale fencing token and parse the real 409 problem.
2. The same parser given a problem whose `code` no broker sends yet (a
   stand-in transport: the real broker only sends the codes it knows): it
   must parse, because the contract says the set of codes is open.
"""

import sys

sys.path.insert(0, sys.argv[1])
import httpx  # noqa: E402

from muster_client import Client  # noqa: E402
from muster_client.api.leases import acquire_lease, release_lease  # noqa: E402
from muster_client.api.sessions import create_session  # noqa: E402
from muster_client.models import (  # noqa: E402
    AcquireRequest,
    CreateSessionRequest,
    Lease,
    Problem,
    ReleaseRequest,
    Session,
)

base = sys.argv[2]
client = Client(base_url=base)
session = create_session.sync(client=client, body=CreateSessionRequest(owner_id="py-1", ttl_ms=60000))
assert isinstance(session, Session), session
lease = acquire_lease.sync("acme", "py", "doc-1", client=client,
                           body=AcquireRequest(session_id=session.session_id, ttl_ms=60000))
assert isinstance(lease, Lease), lease
fenced = release_lease.sync("acme", "py", "doc-1", client=client,
                            body=ReleaseRequest(session_id=session.session_id, fencing_token=lease.fencing_token + 100))
assert isinstance(fenced, Problem) and fenced.code == "fenced" and fenced.status == 409, fenced

future = {"type": "about:blank", "title": "Conflict", "status": 409,
          "detail": "a code added after this client was generated", "code": "a_code_from_the_future"}


def stand_in(request: httpx.Request) -> httpx.Response:
    return httpx.Response(409, json=future, headers={"Content-Type": "application/problem+json"})


offline = Client(base_url=base)
offline.set_httpx_client(httpx.Client(base_url=base, transport=httpx.MockTransport(stand_in)))
got = release_lease.sync("acme", "py", "doc-1", client=offline,
                         body=ReleaseRequest(session_id=session.session_id, fencing_token=1))
assert isinstance(got, Problem) and got.code == "a_code_from_the_future", got
print("python: generated client parsed a real `fenced` problem and an unknown code")
