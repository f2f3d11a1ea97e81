"""The TLS options (``ca_file``, ``client_cert``) against the real broker
serving HTTPS with a throwaway CA (``go run ./tests/tlsca DIR``, from the
repository root; docs/operations.md, "TLS"), in dev mode (no tokens)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import muster
import muster.sync

from .conftest import REPO, Broker

SEL = "lease://acme/renderers/*"
ROUTE = "lease://acme/renderers/doc-1"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """DIR of tests/tlsca: ca.pem, server.pem, server-key.pem, tls.yaml."""
    d = tmp_path_factory.mktemp("tlsca")
    subprocess.run(["go", "run", "./tests/tlsca", str(d)], cwd=REPO, check=True, timeout=300)
    return d


@pytest.fixture(scope="module")
def tls_broker(broker_bin: Path, certs: Path) -> Iterator[Broker]:
    b = Broker(broker_bin, dev=True, config="dev_mode: true\n" + (certs / "tls.yaml").read_text())
    yield b
    b.close()


@pytest.fixture(scope="module")
def client_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed client certificate (its own CA, for client_ca_file) and its key."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl to make a client certificate")
    d = tmp_path_factory.mktemp("client-cert")
    cert, key = d / "client.pem", d / "client-key.pem"
    args = "req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=muster-test-client"
    args += " -addext extendedKeyUsage=clientAuth"
    subprocess.run(
        [openssl, *args.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60
    )
    return cert, key


@pytest.fixture(scope="module")
def mtls_broker(broker_bin: Path, certs: Path, client_cert: tuple[Path, Path]) -> Iterator[Broker]:
    config = "dev_mode: true\n" + (certs / "tls.yaml").read_text() + f"  client_ca_file: {client_cert[0]}\n"
    b = Broker(broker_bin, dev=True, config=config)
    yield b
    b.close()


def verify_failed(err: BaseException) -> bool:
    """Whether err's chain of causes holds the certificate verification failure."""
    e: BaseException | None = err
    while e is not None:
        if isinstance(e, ssl.SSLCertVerificationError) and "certificate verify failed" in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


@pytest.mark.anyio
async def test_ca_file_session_lease_watch_observer(tls_broker: Broker, certs: Path) -> None:
    assert tls_broker.url.startswith("https://127.0.0.1:")
    async with muster.Client(tls_broker.url, ca_file=certs / "ca.pem") as c, c.session("tls-worker", ttl=10) as s:
        lease = await s.acquire(ROUTE, ttl=30)
        assert lease.fencing_token >= 1
        assert (await c.get(ROUTE)).held
        async with await c.watch(SEL) as sub:  # its own stream, over the same TLS
            assert sub.marker.epoch == c.epoch != "" and sub.marker.revision >= 1
        async with c.observe(SEL) as o:
            await o.ready()
            assert [i.route for i in o.view().items] == [ROUTE]
        await lease.release()
        assert not (await c.get(ROUTE)).held


@pytest.mark.anyio
async def test_without_ca_file_verification_fails(tls_broker: Broker) -> None:
    async with muster.Client(tls_broker.url, timeout=10) as c:
        with pytest.raises(muster.TransportError) as info:
            await c.new_session("tls-worker", ttl=10)
        assert isinstance(info.value.__cause__, httpx.ConnectError), repr(info.value.__cause__)
        assert verify_failed(info.value), repr(info.value.__cause__)
        assert muster.advice(info.value) is muster.Retry.BACKOFF
        with pytest.raises(muster.TransportError) as info:
            await c.watch(SEL)
        assert verify_failed(info.value)


@pytest.mark.anyio
async def test_ca_file_of_another_ca_fails(tls_broker: Broker, client_cert: tuple[Path, Path]) -> None:
    # The client certificate is a CA of its own, and not the server's: only
    # ca_file is trusted, so the handshake fails.
    async with muster.Client(tls_broker.url, ca_file=client_cert[0], timeout=10) as c:
        with pytest.raises(muster.TransportError) as info:
            await c.get(ROUTE)
        assert verify_failed(info.value)


@pytest.mark.anyio
async def test_hostname_is_checked(broker_bin: Path, certs: Path) -> None:
    # The server certificate names 127.0.0.1, ::1 and localhost, not
    # 127.0.0.2 (a loopback address too, on Linux): the CA alone does not pass.
    try:
        b = Broker(
            broker_bin, dev=True, config="dev_mode: true\n" + (certs / "tls.yaml").read_text(), addr="127.0.0.2:0"
        )
    except RuntimeError:
        pytest.skip("cannot listen on 127.0.0.2")
    try:
        assert b.url.startswith("https://127.0.0.2:")
        async with muster.Client(b.url, ca_file=certs / "ca.pem", timeout=10) as c:
            with pytest.raises(muster.TransportError) as info:
                await c.get(ROUTE)
        assert verify_failed(info.value)
        assert "127.0.0.2" in str(info.value.__cause__), str(info.value.__cause__)
    finally:
        b.close()


def test_sync_ca_file(tls_broker: Broker, certs: Path) -> None:
    with muster.sync.Client(tls_broker.url, ca_file=str(certs / "ca.pem")) as c:
        with c.new_session("tls-script", ttl=10) as s:
            lease = s.acquire(ROUTE, ttl=30)
            assert lease.fencing_token >= 1 and c.get(ROUTE).held
            lease.release()
            assert not c.get(ROUTE).held
        with c.watch(SEL) as sub:
            assert sub.marker.epoch == c.epoch != "" and sub.marker.revision >= 1
        with c.observe(SEL) as o:
            o.ready(timeout=10)


def test_sync_without_ca_file_fails(tls_broker: Broker) -> None:
    with muster.sync.Client(tls_broker.url, timeout=10) as c:
        with pytest.raises(muster.TransportError) as info:
            c.new_session("tls-script", ttl=10)
        assert verify_failed(info.value)


@pytest.mark.anyio
async def test_client_cert_mutual_tls(mtls_broker: Broker, certs: Path, client_cert: tuple[Path, Path]) -> None:
    async with muster.Client(mtls_broker.url, ca_file=certs / "ca.pem", client_cert=client_cert) as c:
        async with c.session("mtls-worker", ttl=10) as s:
            lease = await s.acquire(ROUTE, ttl=30)
            await lease.release()
        async with await c.watch(SEL) as sub:
            assert sub.marker.revision >= 1
    # Without a client certificate the broker ends the handshake.
    async with muster.Client(mtls_broker.url, ca_file=certs / "ca.pem", timeout=10) as c:
        with pytest.raises(muster.TransportError) as info:
            await c.get(ROUTE)
        # Under TLS 1.3 the broker's alert comes at the first read (an
        # ssl.SSLError httpx lets through, raised as a TransportError too),
        # unless its reset of the connection overtakes it.
        cause = info.value.__cause__
        assert isinstance(cause, httpx.ReadError | httpx.WriteError), repr(cause)
        if isinstance(cause.__cause__, ssl.SSLError):
            assert "CERTIFICATE_REQUIRED" in str(cause), str(cause)
    with muster.sync.Client(mtls_broker.url, ca_file=certs / "ca.pem", client_cert=client_cert) as sc:
        assert not sc.get(ROUTE).held


@pytest.mark.anyio
async def test_http_client_with_tls_options_is_refused(certs: Path) -> None:
    async with httpx.AsyncClient() as h:
        with pytest.raises(ValueError, match="http_client"):
            muster.Client("https://127.0.0.1:1", http_client=h, ca_file=certs / "ca.pem")
        with pytest.raises(ValueError, match="http_client"):
            muster.Client(
                "https://127.0.0.1:1", http_client=h, client_cert=(certs / "server.pem", certs / "server-key.pem")
            )


def test_bad_files_are_refused_at_once(tmp_path: Path, certs: Path) -> None:
    with pytest.raises(FileNotFoundError):
        muster.Client("https://127.0.0.1:1", ca_file=tmp_path / "missing.pem")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="no PEM certificate"):
        muster.Client("https://127.0.0.1:1", ca_file=junk)
    with pytest.raises(ValueError, match="client_cert"):
        muster.Client("https://127.0.0.1:1", client_cert=(junk, junk))
    with pytest.raises(TypeError, match="client_cert"):
        muster.Client("https://127.0.0.1:1", client_cert=str(certs / "server.pem"))  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        muster.sync.Client("https://127.0.0.1:1", ca_file=tmp_path / "missing.pem")
