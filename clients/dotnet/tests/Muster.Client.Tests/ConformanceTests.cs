using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>One harness for the whole test assembly, started on first use and
    /// stopped when every fixture has run.</summary>
    [SetUpFixture]
    public class SharedHarness
    {
        private static Harness h;

        internal static Harness Get()
        {
            if (h == null) h = new Harness();
            return h;
        }

#if NUNIT2
        [TearDown] // NUnit 2.6's one-time teardown of a SetUpFixture
#else
        [OneTimeTearDown]
#endif
        public void StopHarness()
        {
            if (h != null) h.Dispose();
            h = null;
        }
    }

    /// <summary>The shared conformance scenarios against the real broker, through the
    /// shared harness; and the proof that they catch deliberately broken observers.</summary>
    [TestFixture, Category("Conformance")]
    public class ConformanceTests
    {
        private Harness h;

        [OneTimeSetUp]
        public void Start() { h = SharedHarness.Get(); }

        public static IEnumerable<string> Scenarios()
        {
            return Directory.GetFiles(Harness.ScenarioDir(), "*.json").Select(Path.GetFileName).OrderBy(f => f, StringComparer.Ordinal);
        }

        [Test, TestCaseSource("Scenarios")]
        public void Scenario(string file)
        {
            string problem;
            try
            {
                problem = ConformanceRunner.Run(h, Path.Combine(Harness.ScenarioDir(), file));
            }
            catch (ScenarioSkippedException e)
            {
                Assert.Ignore(file + ": " + e.Message);
                return;
            }
            Assert.IsNull(problem, file + ": " + problem);
        }

        // Per scenario, the deliberately broken observer it must catch (the Go runner's
        // table). Every variant also skips the periodic reconciliation, which would
        // otherwise repair some faults before the scenario looks.
        private static readonly Dictionary<string, ObserverFaults> Broken = new Dictionary<string, ObserverFaults>
        {
            { "bootstrap-changes-before-stream", ObserverFaults.IgnoreSnapshot },
            { "bootstrap-changes-during-paging", ObserverFaults.SkipBufferedChanges },
            { "bootstrap-changes-right-after-ready", ObserverFaults.IgnoreLive },
            { "steady-state-updates", ObserverFaults.IgnoreExpired },
            { "overflow-recovery", ObserverFaults.IgnoreStreamEnd },
            { "broker-restart-fresh-bootstrap", ObserverFaults.MergeViews },
            { "holder-session-ends", ObserverFaults.IgnoreSessionClosed },
            { "periodic-reconciliation", ObserverFaults.None }, // NoReconcile alone
            { "close-while-page-hangs", ObserverFaults.UncancellablePages },
            { "overlapping-observers-converge", ObserverFaults.SkipBufferedChanges | ObserverFaults.IgnoreLive },
            { "family-isolation", ObserverFaults.RetryFatal },
            { "observation-grants-nothing", ObserverFaults.IgnoreSnapshot },
            { "waiter-granted-after-release", ObserverFaults.IgnoreLive },
            { "expired-lease-leaves-view", ObserverFaults.IgnoreExpired },
            { "superseded-same-session-same-selector", ObserverFaults.IgnoreLive },
            { "wildcard-registration-limit", ObserverFaults.IgnoreLive },
            { "forbidden-selector-stops-observer", ObserverFaults.RetryFatal },
            { "follow-owner", ObserverFaults.NoFollow },
            { "failover-follow-owner", ObserverFaults.StickyOwner },
            { "grant-after-wait-keeps-lease", ObserverFaults.SendPlusTtl },
            { "restart-loses-lease-promptly", ObserverFaults.LateLoss },
            { "dead-broker-first", ObserverFaults.SingleBroker },
            { "unavailable-broker-moves-on", ObserverFaults.StayOnUnavailable },
            { "planned-move-keeps-session", ObserverFaults.CreatorLoss },
        };

        /// <summary>
        /// Each scenario FAILS with its broken observer (in one of up to three runs): a
        /// scenario that passes with one proves nothing. A new scenario needs an entry in Broken. The broken runs mostly
        /// wait for their failing step's timeout, so they run on three harnesses at once.
        /// </summary>
        [Test]
        public void EveryScenarioFailsWithItsBrokenObserver()
        {
            var files = Scenarios().Select(f => Path.Combine(Harness.ScenarioDir(), f)).ToList();
            var missing = files.Select(ConformanceRunner.Name).Where(n => !Broken.ContainsKey(n)).ToList();
            Assert.IsEmpty(missing, "no broken observer variant for these scenarios: add them to Broken");
            var queue = new System.Collections.Concurrent.ConcurrentQueue<string>(files);
            var passed = new System.Collections.Concurrent.ConcurrentBag<string>();
            var extra = new List<Harness>();
            try
            {
                extra.Add(new Harness());
                extra.Add(new Harness());
                var workers = new[] { h }.Concat(extra).Select(harness => Task.Run(() =>
                {
                    string path;
                    while (queue.TryDequeue(out path))
                    {
                        var name = ConformanceRunner.Name(path);
                        var faults = Broken[name] | ObserverFaults.NoReconcile;
                        // A fault only shows when the scenario's timing exposes it: on a
                        // loaded machine a bootstrap may start after all the churn (then
                        // dropping the buffered changes is harmless). Up to three runs; one
                        // failure is the proof.
                        string problem = null;
                        try
                        {
                            for (int attempt = 0; attempt < 3 && problem == null; attempt++)
                            {
                                problem = ConformanceRunner.Run(harness, path, faults);
                            }
                        }
                        catch (ScenarioSkippedException e)
                        {
                            Console.WriteLine("{0} skipped: {1}", name, e.Message);
                            continue;
                        }
                        if (problem == null) passed.Add(name + " (" + faults + ")");
                        else Console.WriteLine("{0} with {1} fails as it must: {2}", name, faults, problem);
                    }
                })).ToArray();
                Task.WaitAll(workers);
            }
            finally
            {
                foreach (var x in extra) x.Dispose();
            }
            Assert.IsEmpty(passed.ToList(), "scenarios that passed with a broken observer");
        }

        /// <summary>Broken clients a scenario must catch at the named step: further ones
        /// (the Go runner's moreBrokenVariants), and Broken's own variants whose failure
        /// must come from the fault, not from an earlier step.</summary>
        [TestCase("19_failover_follow_owner.json", "NeverLost", "worker_lost")]
        [TestCase("20_grant_after_wait_keeps_lease.json", "SendPlusTtl", "worker_holds")]
        [TestCase("21_restart_loses_lease_promptly.json", "LateLoss", "worker_lost")]
        [TestCase("23_unavailable_broker_moves_on.json", "SingleBroker", "worker_acquire")]
        [TestCase("24_planned_move_keeps_session.json", "CreatorLoss", "worker_extend")]
        public void MoreBrokenClientsAreCaught(string file, string fault, string step)
        {
            var faults = (ObserverFaults)Enum.Parse(typeof(ObserverFaults), fault) | ObserverFaults.NoReconcile;
            string problem;
            try
            {
                problem = ConformanceRunner.Run(h, Path.Combine(Harness.ScenarioDir(), file), faults);
            }
            catch (ScenarioSkippedException e)
            {
                Assert.Ignore(file + ": " + e.Message);
                return;
            }
            Assert.IsNotNull(problem, file + " passed with a broken client (" + faults + ")");
            StringAssert.Contains("(" + step + ")", problem, file + " with " + faults + " failed, but not at " + step);
            Console.WriteLine("{0} with {1} fails as it must: {2}", file, faults, problem);
        }

        /// <summary>The two faults the harness's README requires every SDK to catch, each
        /// caught by its scenario even with reconciliation left on.</summary>
        [TestCase("02_bootstrap_during_paging.json", "SkipBufferedChanges")]
        [TestCase("05_overflow_recovery.json", "IgnoreStreamEnd")]
        public void RequiredBrokenVariantsFail(string file, string fault)
        {
            var faults = (ObserverFaults)Enum.Parse(typeof(ObserverFaults), fault);
            var problem = ConformanceRunner.Run(h, Path.Combine(Harness.ScenarioDir(), file), faults);
            Assert.IsNotNull(problem, file + " passed with a broken observer (" + faults + ")");
            Console.WriteLine("{0} with {1} fails as it must: {2}", file, faults, problem);
        }
    }
}
