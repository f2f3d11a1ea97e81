"""The README's examples run, unchanged, against the real broker, and every
Python block of it type-checks with mypy --strict."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .conftest import TOKENS, Broker

README = Path(__file__).resolve().parents[1] / "README.md"

#: A Python block, optionally preceded by ``<!-- fragment: SIGNATURE -->``: a
#: fragment is checked as the body of the function SIGNATURE declares.
BLOCK = re.compile(r"(?:<!-- fragment: ([^\n]*?) -->\n)?```python\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    """(signature, code) of every Python block, in order; signature "" for a whole program."""
    found = [(sig or "", code) for sig, code in BLOCK.findall(README.read_text())]
    assert found, "no python example"
    return found


def programs() -> list[str]:
    return [code for sig, code in blocks() if not sig]


def test_readme_example_runs(broker: Broker) -> None:
    env = {**os.environ, "MUSTER_URL": broker.url, "MUSTER_TOKEN": TOKENS["a"][0]}
    out = subprocess.run(
        [sys.executable, "-c", programs()[0]], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "doc-123 rendered under token" in out.stdout
    assert "<muster.Lease lease://acme/renderers/doc-125 fencing_token=" in out.stdout
    assert "kept ['repo-1'] dropped []" in out.stdout
    assert "nobody runs ['repo-1']" in out.stdout


def test_readme_sync_examples_run(broker_bin: Path) -> None:
    dev = Broker(broker_bin, dev=True)  # the examples talk to `make run`'s dev-mode broker
    try:
        script, observer = programs()[1:3]
        out = subprocess.run(
            [sys.executable, "-c", script.replace("http://127.0.0.1:7420", dev.url)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().isdigit()  # the fencing token
        out = subprocess.run(
            [sys.executable, "-c", observer.replace("http://127.0.0.1:7420", dev.url)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "0 held"
    finally:
        dev.close()


def test_readme_blocks_type_check() -> None:
    with tempfile.TemporaryDirectory(prefix="muster-readme-") as d:
        files = []
        for i, (sig, code) in enumerate(blocks()):
            if sig:
                code = "import muster\n\n\n" + sig + ":\n" + textwrap.indent(code, "    ")
            f = Path(d) / f"block_{i}.py"
            f.write_text(code)
            files.append(str(f))
        out = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-version", "3.11", *files],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=d,
        )
        assert out.returncode == 0, out.stdout + out.stderr
