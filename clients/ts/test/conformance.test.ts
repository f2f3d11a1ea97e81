// The shared conformance scenarios against the real broker through the
// harness; then each scenario with its deliberately broken observer, which
// it must catch.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Broken } from "../src/internal/faults.js";
import { runScenario, selectorMatches } from "./conformance.js";
import { Harness, ScenarioSkipped, loadScenarios } from "./harness.js";

/** Per scenario, the broken observer it must catch (the Go runner's table). */
export const brokenVariants: Record<string, number> = {
  "bootstrap-changes-before-stream": Broken.IgnoreSnapshot,
  "bootstrap-changes-during-paging": Broken.DropBuffered,
  "bootstrap-changes-right-after-ready": Broken.IgnoreLive,
  "steady-state-updates": Broken.IgnoreExpired,
  "overflow-recovery": Broken.StayReady,
  "broker-restart-fresh-bootstrap": Broken.MergeViews,
  "holder-session-ends": Broken.IgnoreSessionClosed,
  "periodic-reconciliation": Broken.NoReconcile,
  "close-while-page-hangs": Broken.UncancellablePages,
  "overlapping-observers-converge": Broken.DropBuffered | Broken.IgnoreLive,
  "family-isolation": Broken.RetryFatal,
  "observation-grants-nothing": Broken.IgnoreSnapshot,
  "waiter-granted-after-release": Broken.IgnoreLive,
  "expired-lease-leaves-view": Broken.IgnoreExpired,
  "superseded-same-session-same-selector": Broken.IgnoreLive,
  "wildcard-registration-limit": Broken.IgnoreLive,
  "forbidden-selector-stops-observer": Broken.RetryFatal,
  "follow-owner": Broken.NoFollow,
  "failover-follow-owner": Broken.StickyOwner,
  "grant-after-wait-keeps-lease": Broken.SendPlusTtl,
  "restart-loses-lease-promptly": Broken.LateLoss,
  "dead-broker-first": Broken.SingleBroker,
  "unavailable-broker-moves-on": Broken.StayOnUnavailable,
  "planned-move-keeps-session": Broken.CreatorLoss,
};

/** Where a scenario's broken variant is a broken client, the step at which it must fail. */
const brokenSteps: Record<string, string> = {
  "grant-after-wait-keeps-lease": "worker_holds",
  "restart-loses-lease-promptly": "worker_lost",
  "planned-move-keeps-session": "worker_extend",
};

/** Further broken clients a scenario must catch, each at the named step (the Go runner's moreBrokenVariants). */
const moreBrokenVariants = [
  { scenario: "failover-follow-owner", name: "never-lost", mode: Broken.NeverLost, step: "worker_lost" },
  { scenario: "unavailable-broker-moves-on", name: "single-broker", mode: Broken.SingleBroker, step: "worker_acquire" },
];

test("selector matching for expect_same_view", () => {
  assert.ok(selectorMatches("lease://acme/*/*", "lease://acme/r/x"));
  assert.ok(selectorMatches("lease://**", "lease://a/b/c"));
  assert.ok(selectorMatches("lease://acme/**", "lease://acme/r/x"));
  assert.ok(!selectorMatches("lease://acme/*", "lease://acme/r/x"));
  assert.ok(!selectorMatches("lease://acme/r/*", "lease://other/r/x"));
});

describe("conformance", () => {
  let h: Harness;
  before(async () => {
    h = await Harness.start();
  });
  after(async () => {
    await h.stop();
  });
  const scenarios = loadScenarios();
  test("at least 12 scenarios", () => assert.ok(scenarios.length >= 12, `${scenarios.length} scenarios`));
  for (const sc of scenarios) {
    test(sc.name, async (t) => {
      try {
        await runScenario(h, sc);
      } catch (e) {
        if (!(e instanceof ScenarioSkipped)) throw e;
        t.skip(e.message);
      }
    });
  }
  // MUSTER_TS_BROKEN=all runs every variant; the default runs the ones the
  // issue requires plus a few cheap ones, to keep make test short.
  const all = process.env["MUSTER_TS_BROKEN"] === "all";
  const quick = new Set([
    "bootstrap-changes-during-paging",
    "overflow-recovery",
    "broker-restart-fresh-bootstrap",
    "periodic-reconciliation",
    "close-while-page-hangs",
    "forbidden-selector-stops-observer",
    "follow-owner",
    "failover-follow-owner",
    "grant-after-wait-keeps-lease",
    "restart-loses-lease-promptly",
    "dead-broker-first",
    "unavailable-broker-moves-on",
    "planned-move-keeps-session",
  ]);
  for (const sc of scenarios) {
    if (!all && !quick.has(sc.name)) continue;
    test(`broken observer caught: ${sc.name}`, async (t) => {
      const mode = brokenVariants[sc.name];
      assert.ok(mode !== undefined, `no broken observer variant for scenario ${sc.name}`);
      const err = await runScenario(h, sc, mode | Broken.NoReconcile).then(
        () => null,
        (e: unknown) => e,
      );
      if (err instanceof ScenarioSkipped) {
        t.skip(err.message);
        return;
      }
      assert.ok(err !== null, "the scenario passed with a broken observer");
      const step = brokenSteps[sc.name];
      if (step !== undefined) {
        assert.ok(err instanceof Error && err.message.includes(`(${step})`), `with a broken client: ${err instanceof Error ? err.message : "a non-Error"}, want a failure at ${step}`);
      }
      t.diagnostic(`caught: ${err instanceof Error ? err.message : "a non-Error"}`);
    });
  }
  // Further broken clients a scenario must catch, each at the named step.
  for (const v of moreBrokenVariants) {
    const sc = scenarios.find((x) => x.name === v.scenario);
    test(`broken client caught: ${v.scenario} + ${v.name}`, async (t) => {
      assert.ok(sc !== undefined, `no scenario ${v.scenario}`);
      const err = await runScenario(h, sc, v.mode | Broken.NoReconcile).then(
        () => null,
        (e: unknown) => e,
      );
      if (err instanceof ScenarioSkipped) {
        t.skip(err.message);
        return;
      }
      assert.ok(err instanceof Error && err.message.includes(`(${v.step})`), `with a broken client: ${String(err)}, want a failure at ${v.step}`);
      t.diagnostic(`caught: ${err.message}`);
    });
  }
});
