using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
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

        [TearDown]
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

        [TestFixtureSetUp]
        public void Start() { h = SharedHarness.Get(); }

        public static IEnumerable<string> Scenarios()
        {
            return Directory.GetFiles(Harness.ScenarioDir(), "*.json").Select(Path.GetFileName).OrderBy(f => f, StringComparer.Ordinal);
        }

        [Test, TestCaseSource("Scenarios")]
        public void Scenario(string file)
        {
            var problem = ConformanceRunner.Run(h, Path.Combine(Harness.ScenarioDir(), file));
            Assert.IsNull(problem, file + ": " + problem);
        }

        [TestCase("02_bootstrap_during_paging.json", 1)]
        [TestCase("05_overflow_recovery.json", 2)]
        [TestCase("02_bootstrap_during_paging.json", 3)]
        [TestCase("05_overflow_recovery.json", 3)]
        public void BrokenObserverFails(string file, int faultBits)
        {
            var faults = (ObserverFaults)faultBits;
            var problem = ConformanceRunner.Run(h, Path.Combine(Harness.ScenarioDir(), file), faults);
            Assert.IsNotNull(problem, file + " passed with a broken observer (" + faults + ")");
            Console.WriteLine("{0} with {1} fails as it must: {2}", file, faults, problem);
        }
    }
}
