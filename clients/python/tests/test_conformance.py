"""The shared conformance scenarios through the harness, against the real
broker; and the proof that they can fail: each deliberately broken observer
is caught by the scenario meant for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from muster._observe import BROKEN_IGNORE_STREAM_END, BROKEN_SKIP_BUFFERED

from .conformance import SCENARIOS, Harness, Runner, StepFailed

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session")
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.close()


@pytest.fixture
async def runner(harness: Harness) -> AsyncIterator[Runner]:
    r = Runner(harness)
    yield r
    await r.aclose()


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 12


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_scenario(runner: Runner, path: Path) -> None:
    await runner.run(path)


def scenario(name: str) -> Path:
    (p,) = [p for p in SCENARIOS if p.stem.endswith(name)]
    return p


@pytest.mark.parametrize(
    ("flaw", "name", "caught_by"),
    [
        # The snapshot installed without the changes buffered while paging:
        # doc-259 changed hands during paging, the view keeps the old holder.
        (BROKEN_SKIP_BUFFERED, "bootstrap_during_paging", r"\(expect_view\): .*doc-259"),
        # The end of the stream (overflow) ignored: no second watch is opened.
        (BROKEN_IGNORE_STREAM_END, "overflow_recovery", r"\((expect_proxy|wait_ready|expect_view)\)"),
    ],
)
async def test_broken_observer_is_caught(harness: Harness, flaw: str, name: str, caught_by: str) -> None:
    r = Runner(harness, broken=frozenset({flaw}))
    try:
        with pytest.raises(StepFailed, match=caught_by):
            await r.run(scenario(name))
    finally:
        await r.aclose()
