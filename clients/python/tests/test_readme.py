"""The README's first example runs, unchanged, against the real broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import TOKENS, Broker

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(broker: Broker) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "no python example"
    env = {**os.environ, "MUSTER_URL": broker.url, "MUSTER_TOKEN": TOKENS["a"][0]}
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "doc-123 rendered under token" in out.stdout
    assert "kept ['repo-1'] dropped []" in out.stdout
    assert "nobody runs ['repo-1']" in out.stdout


def test_readme_sync_example_runs(broker_bin: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    dev = Broker(broker_bin, dev=True)  # the example talks to `make run`'s dev-mode broker
    try:
        code = blocks[1].replace("http://127.0.0.1:7420", dev.url)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().isdigit()  # the fencing token
    finally:
        dev.close()
