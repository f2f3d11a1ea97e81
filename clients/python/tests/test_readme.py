"""Every Python block of the README type-checks with mypy --strict and runs,
as written, against the real broker (a block marked ``<!-- not-run -->`` is
type-checked only), with the SDK a user installs: the interpreter
$MUSTER_SDK_PYTHON (test.sh: a fresh virtual environment outside the
checkout, holding the built wheel alone), else this one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import muster

from .conftest import REPO, Broker
from .readme_blocks import Block, blocks

README = Path(__file__).resolve().parents[1] / "README.md"
SDK_PYTHON = os.environ.get("MUSTER_SDK_PYTHON", sys.executable)

#: What a fragment's program runs: its function ``_``, called with what its
#: signature asks for, and what the call left behind printed.
DRIVERS = {
    "async def _(s: muster.Session, my_share: list[str]) -> None": """
import asyncio, os
async def drive() -> None:
    async with muster.Client(os.environ["MUSTER_URL"]) as c, c.session("batch", ttl=30) as s:
        await _(s, [f"lease://acme/renderers/batch-{i}" for i in range(3)])
        print(sorted([(it.route, it.owner_id) async for it in c.list("lease://acme/renderers/*")]))
asyncio.run(drive())
""",
}


def _five_minutes(out: str) -> None:
    assert "doc-123 rendered under token" in out
    assert re.search(r"<muster\.Lease lease://acme/renderers/doc-125 fencing_token=\d+ held until ", out), out
    assert "kept ['repo-1'] dropped []" in out
    assert "nobody runs ['repo-1']" in out


#: What each block that runs prints, by its index: a block added to the README
#: needs its line here (or a not-run marker) before it passes.
CHECKS: dict[int, Callable[[str], None]] = {
    0: _five_minutes,
    1: lambda out: _match(r"\d+\n", out),  # the fencing token
    2: lambda out: _match(r"0 held\n", out),
    3: lambda out: _match(
        r"\[" + ", ".join(f"\\('lease://acme/renderers/batch-{i}', 'batch'\\)" for i in range(3)) + r"\]\n", out
    ),
}


def _match(pattern: str, out: str) -> None:
    assert re.fullmatch(pattern, out), out


@pytest.fixture(scope="module")
def readme() -> list[Block]:
    found = blocks(README.read_text())
    assert len(found) >= 4, "the README lost its examples"
    return found


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory outside the checkout, so that ``import muster`` finds the installed SDK alone."""
    with tempfile.TemporaryDirectory(prefix="muster-readme-") as d:
        yield Path(d)


def program(b: Block) -> str:
    if not b.signature:
        return b.program()
    assert b.signature in DRIVERS, f"README line {b.line}: a fragment needs a driver in DRIVERS, or <!-- not-run -->"
    return b.program() + DRIVERS[b.signature]


def test_the_sdk_is_the_installed_one(workdir: Path) -> None:
    """The README runs with the wheel of the user's install, and the suite with the wheel of its own."""
    out = subprocess.run(
        [SDK_PYTHON, "-c", "import muster; print(muster.__file__)"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    path = Path(out.stdout.strip())
    assert "site-packages" in path.parts, path
    if "MUSTER_SDK_PYTHON" in os.environ:
        assert not path.is_relative_to(REPO), path
        # The rest of the suite tests the wheel too (installed in test.sh's venv), not src/.
        assert "site-packages" in Path(muster.__file__).parts, muster.__file__


def test_every_block_type_checks(readme: list[Block], workdir: Path) -> None:
    files = []
    for b in readme:
        f = workdir / f"block_{b.index}.py"
        f.write_text(b.program())
        files.append(str(f))
    # mypy runs here; the modules it checks the blocks against are those of SDK_PYTHON's installation.
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", SDK_PYTHON, *files],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=workdir,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_block_runs(readme: list[Block], broker_bin: Path, workdir: Path) -> None:
    ran = []
    for b in readme:
        if not b.run:
            continue
        assert b.index in CHECKS, f"README line {b.line}: a block that runs needs its check in CHECKS"
        f = workdir / f"run_{b.index}.py"
        f.write_text(program(b))
        dev = Broker(broker_bin, dev=True)  # the README's broker: `make run`, dev mode, no token
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MUSTER_")}
            out = subprocess.run(
                [SDK_PYTHON, str(f)],
                env={**env, "MUSTER_URL": dev.url},
                cwd=workdir,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        finally:
            dev.close()
        assert out.returncode == 0, f"README line {b.line}:\n{out.stderr}"
        CHECKS[b.index](out.stdout)
        ran.append(b.index)
    assert sorted(ran) == sorted(CHECKS), "CHECKS names a block that does not run"
