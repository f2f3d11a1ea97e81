"""Test fixtures: the real broker binary (`muster serve`) on a loopback
socket with the conformance token table, and clients of it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import muster

REPO = Path(__file__).resolve().parents[3]

#: name -> (secret, family, grants), the table of clients/conformance/README.md.
TOKENS = {
    "a": ("secret-a", "fam-a", ["lease://**#*", "fleet://**#*"]),
    "b": ("secret-b", "fam-b", ["lease://**#*", "fleet://**#*"]),
    "narrow": ("secret-narrow", "fam-a", ["lease://acme/renderers/*#read"]),
    # Not in the conformance table: a writer of lease://acme/renderers/* only (batch authorization).
    "renderers": ("secret-renderers", "fam-a", ["lease://acme/renderers/*#*"]),
}


@contextmanager
def raises_transport(cause: type[BaseException]) -> Iterator[None]:
    """Expects a muster.TransportError (a MusterException) caused by an
    httpx exception of type ``cause``."""
    with pytest.raises(muster.TransportError) as info:
        yield
    assert isinstance(info.value, muster.MusterException)
    assert isinstance(info.value.__cause__, cause), repr(info.value.__cause__)
    assert muster.advice(info.value) is muster.Retry.BACKOFF


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def broker_bin() -> Iterator[Path]:
    """The broker binary: $MUSTER_BIN when set (test.sh builds it once), else built here."""
    given = os.environ.get("MUSTER_BIN")
    if given:
        yield Path(given)
        return
    d = Path(tempfile.mkdtemp(prefix="muster-py-bin-"))
    subprocess.run(["go", "build", "-o", str(d / "muster"), "./cmd/muster"], cwd=REPO, check=True)
    yield d / "muster"
    shutil.rmtree(d, ignore_errors=True)


class Broker:
    """One `muster serve` process with a fresh data dir and the test tokens
    (``extra_config``: more YAML appended to the configuration file), or
    with ``config`` as its whole configuration file (given even when
    ``dev``), listening on ``addr``. ``url`` is https:// when the broker
    says it serves TLS."""

    def __init__(
        self,
        binary: Path,
        *,
        dev: bool = False,
        extra_config: str = "",
        config: str | None = None,
        addr: str = "127.0.0.1:0",
    ) -> None:
        self.binary = binary
        self.dev = dev  # dev mode: no tokens, every request allowed
        self.dir = Path(tempfile.mkdtemp(prefix="muster-py-broker-"))
        self.config = self.dir / "muster.yaml"
        self.with_config = not dev or config is not None
        self.tls = False  # set from the broker's "muster serving" line
        if config is None:
            lines = ["tokens:"]
            for name, (secret, family, grants) in TOKENS.items():
                lines += [
                    f"  - name: {name}",
                    f"    sha256: {hashlib.sha256(secret.encode()).hexdigest()}",
                    f"    family: {family}",
                    "    grants:",
                    *[f'      - "{g}"' for g in grants],
                ]
            config = "\n".join(lines) + "\n" + extra_config
        self.config.write_text(config)
        self.proc: subprocess.Popen[bytes] | None = None
        self.addr = ""
        self.start(addr)

    @property
    def url(self) -> str:
        return ("https://" if self.tls else "http://") + self.addr

    def start(self, addr: str) -> None:
        args = [str(self.binary), "serve", "--addr", addr, "--data-dir", str(self.dir / "data")]
        if self.with_config:
            args += ["--config", str(self.config)]
        proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.proc = proc
        serving: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stderr is not None
            for raw in proc.stderr:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and line.get("msg") == "muster serving":
                    serving.append(str(line["addr"]))
                    self.tls = line.get("tls") is True
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30) or not serving:
            self.kill()
            raise RuntimeError("the broker did not start")
        self.addr = serving[0]

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        """A new process on the same address and data dir: a new epoch."""
        self.kill()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.start(self.addr)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def broker(broker_bin: Path) -> Iterator[Broker]:
    b = Broker(broker_bin)
    yield b
    b.close()


@pytest.fixture
async def client(broker: Broker) -> AsyncIterator[muster.Client]:
    async with muster.Client(broker.url, token=TOKENS["a"][0]) as c:
        yield c
