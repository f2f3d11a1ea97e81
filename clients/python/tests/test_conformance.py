"""The shared conformance scenarios through the harness, against the real
broker; and the proof that they can fail: each scenario FAILS with the
deliberately broken observer meant for it (the same table as the Go SDK's
clients/go/conformance_test.go)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from muster import _broken as ob

from .conformance import SCENARIOS, Harness, Runner, ScenarioSkipped, StepFailed

pytestmark = pytest.mark.anyio

NAMES = {p: json.loads(p.read_text())["name"] for p in SCENARIOS}

#: Per scenario, the broken observer it must catch.
BROKEN_VARIANTS: dict[str, frozenset[str]] = {
    "bootstrap-changes-before-stream": frozenset({ob.BROKEN_IGNORE_SNAPSHOT}),
    "bootstrap-changes-during-paging": frozenset({ob.BROKEN_DROP_BUFFERED}),
    "bootstrap-changes-right-after-ready": frozenset({ob.BROKEN_IGNORE_LIVE}),
    "steady-state-updates": frozenset({ob.BROKEN_IGNORE_EXPIRED}),
    "overflow-recovery": frozenset({ob.BROKEN_STAY_READY}),
    "broker-restart-fresh-bootstrap": frozenset({ob.BROKEN_MERGE_VIEWS}),
    "holder-session-ends": frozenset({ob.BROKEN_IGNORE_SESSION_CLOSED}),
    "periodic-reconciliation": frozenset({ob.BROKEN_NO_RECONCILE}),
    "close-while-page-hangs": frozenset({ob.BROKEN_UNCANCELLABLE_PAGES}),
    "overlapping-observers-converge": frozenset({ob.BROKEN_DROP_BUFFERED, ob.BROKEN_IGNORE_LIVE}),
    "family-isolation": frozenset({ob.BROKEN_RETRY_FATAL}),
    "observation-grants-nothing": frozenset({ob.BROKEN_IGNORE_SNAPSHOT}),
    "waiter-granted-after-release": frozenset({ob.BROKEN_IGNORE_LIVE}),
    "expired-lease-leaves-view": frozenset({ob.BROKEN_IGNORE_EXPIRED}),
    "superseded-same-session-same-selector": frozenset({ob.BROKEN_IGNORE_LIVE}),
    "wildcard-registration-limit": frozenset({ob.BROKEN_IGNORE_LIVE}),
    "forbidden-selector-stops-observer": frozenset({ob.BROKEN_RETRY_FATAL}),
    "follow-owner": frozenset({ob.BROKEN_NO_FOLLOW}),
    "failover-follow-owner": frozenset({ob.BROKEN_STICKY_OWNER}),
    "grant-after-wait-keeps-lease": frozenset({ob.BROKEN_SEND_PLUS_TTL}),
    "restart-loses-lease-promptly": frozenset({ob.BROKEN_LATE_LOSS}),
    "dead-broker-first": frozenset({ob.BROKEN_SINGLE_BROKER}),
    "unavailable-broker-moves-on": frozenset({ob.BROKEN_STAY_ON_UNAVAILABLE}),
    "planned-move-keeps-session": frozenset({ob.BROKEN_CREATOR_LOSS}),
}

#: The step at which a scenario must catch its broken variant, where it matters.
CAUGHT_AT: dict[str, str] = {
    "grant-after-wait-keeps-lease": "worker_holds",
    "restart-loses-lease-promptly": "worker_lost",
    "planned-move-keeps-session": "worker_extend",
}


#: Further broken clients a scenario must catch, each at the named step.
MORE_BROKEN_VARIANTS: list[tuple[str, frozenset[str], str]] = [
    ("failover-follow-owner", frozenset({ob.BROKEN_NEVER_LOST}), "worker_lost"),
    ("unavailable-broker-moves-on", frozenset({ob.BROKEN_SINGLE_BROKER}), "worker_acquire"),
]


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


def test_there_are_scenarios_each_with_a_broken_variant() -> None:
    assert len(SCENARIOS) >= 17
    assert set(NAMES.values()) == set(BROKEN_VARIANTS)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_scenario(runner: Runner, path: Path) -> None:
    try:
        await runner.run(path)
    except ScenarioSkipped as e:
        pytest.skip(str(e))


async def run_broken(h: Harness, path: Path, broken: frozenset[str]) -> str:
    """The failure of path with a broken observer, "" when it passed; raises
    ScenarioSkipped when the harness skips it."""
    r = Runner(h, broken=broken)
    try:
        await r.run(path)
    except StepFailed as e:
        return str(e)
    finally:
        await r.aclose()
    return ""


async def test_control_without_reconciliation(harness: Harness) -> None:
    """Every broken variant below also skips the periodic reconciliation
    (which would repair most faults within its interval and let a slow
    scenario pass by luck); skipping it alone fails only the scenario about
    reconciliation. Runs alone: it needs the scenarios' timing to hold."""
    for path in SCENARIOS:
        try:
            failure = await run_broken(harness, path, frozenset({ob.BROKEN_NO_RECONCILE}))
        except ScenarioSkipped as e:
            print(f"{NAMES[path]}: skipped: {e}")
            continue
        want_failure = NAMES[path] == "periodic-reconciliation"
        assert bool(failure) == want_failure, f"{NAMES[path]}: {failure or 'passed'}"


async def test_every_scenario_catches_its_broken_observer(harness: Harness) -> None:
    """The broken runs are mostly waits running out: they run 4 at a time,
    each on a harness of its own."""
    extra = await asyncio.gather(*(asyncio.to_thread(Harness) for _ in range(3)))
    pool: asyncio.Queue[Harness] = asyncio.Queue()
    for h in (harness, *extra):
        pool.put_nowait(h)

    async def one(path: Path) -> tuple[str, str | None]:
        h = await pool.get()
        try:
            broken = BROKEN_VARIANTS[NAMES[path]] | {ob.BROKEN_NO_RECONCILE}
            return NAMES[path], await run_broken(h, path, broken)
        except ScenarioSkipped as e:
            print(f"{NAMES[path]}: skipped: {e}")
            return NAMES[path], None
        finally:
            pool.put_nowait(h)

    try:
        results = await asyncio.gather(*(one(p) for p in SCENARIOS))
    finally:
        for h in extra:
            await asyncio.to_thread(h.close)
    for name, failure in results:
        if failure is not None:
            print(f"{name}: caught at {failure}")  # shown with -s, or on a failure
    passed = [name for name, failure in results if failure == ""]
    assert not passed, f"scenarios that passed with a broken observer: {passed}"
    elsewhere = [
        f"{name}: {failure}"
        for name, failure in results
        if name in CAUGHT_AT and failure is not None and f"({CAUGHT_AT[name]})" not in failure
    ]
    assert not elsewhere, f"broken variants caught at another step than {CAUGHT_AT}: {elsewhere}"


@pytest.mark.parametrize(("name", "broken", "step"), MORE_BROKEN_VARIANTS)
async def test_more_broken_clients_are_caught(harness: Harness, name: str, broken: frozenset[str], step: str) -> None:
    path = next(p for p in SCENARIOS if NAMES[p] == name)
    try:
        failure = await run_broken(harness, path, broken | {ob.BROKEN_NO_RECONCILE})
    except ScenarioSkipped as e:
        pytest.skip(str(e))
    assert f"({step})" in failure, f"{name} with {set(broken)}: {failure or 'passed'}, want a failure at {step}"
