using System;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    [TestFixture]
    public class OptionTests
    {
        private static string Refusal(ObserveOptions o)
        {
            using (var c = new MusterClient("http://127.0.0.1:9"))
            {
                var e = Assert.Throws<MusterException>(() => c.Observe("lease://acme/renderers/*", o));
                Assert.AreEqual(ErrorCode.InvalidRequest, e.Code);
                Assert.AreEqual(0, e.Status);
                return e.Detail;
            }
        }

        [Test]
        public void ObserveOptionsAreValidatedWithTheGoMessages()
        {
            Assert.AreEqual("Observe: the shortest TTL must not be negative", Refusal(new ObserveOptions { ShortestTtl = TimeSpan.FromSeconds(-1) }));
            Assert.AreEqual("Observe: the reconciliation interval must be at least 10ms", Refusal(new ObserveOptions { ReconcileInterval = TimeSpan.FromMilliseconds(9) }));
            Assert.AreEqual("Observe: the reconciliation interval must be at least 10ms", Refusal(new ObserveOptions { ReconcileInterval = TimeSpan.Zero }));
            Assert.AreEqual("Observe: the reconciliation jitter must be in [0, 1)", Refusal(new ObserveOptions { ReconcileJitter = 1 }));
            Assert.AreEqual("Observe: the reconciliation jitter must be in [0, 1)", Refusal(new ObserveOptions { ReconcileJitter = -0.1 }));
            Assert.AreEqual("Observe: the reconciliation jitter must be in [0, 1)", Refusal(new ObserveOptions { ReconcileJitter = double.NaN }));
            Assert.AreEqual("Observe: the page size must be in 1..500", Refusal(new ObserveOptions { PageSize = 0 }));
            Assert.AreEqual("Observe: the page size must be in 1..500", Refusal(new ObserveOptions { PageSize = 501 }));
            Assert.AreEqual("Observe: the reconciliation jitter must be in [0, 1); the page size must be in 1..500",
                Refusal(new ObserveOptions { ReconcileJitter = 2, PageSize = -1 }));
        }

        [Test]
        public void ObserveDefaults()
        {
            var o = new ObserveOptions();
            Assert.AreEqual(0.2, o.ReconcileJitter);
            Assert.AreEqual(500, o.PageSize);
            Assert.IsNull(o.ReconcileInterval);
            using (var c = new MusterClient("http://127.0.0.1:9"))
            {
                using (var obs = c.Observe("lease://acme/renderers/*", new ObserveOptions { ShortestTtl = TimeSpan.FromSeconds(30) }))
                {
                    Assert.AreEqual(TimeSpan.FromSeconds(15), obs.ReconcileEvery);
                }
                using (var obs = c.Observe("lease://acme/renderers/*", new ObserveOptions { ReconcileInterval = TimeSpan.FromMilliseconds(10) }))
                {
                    Assert.AreEqual(TimeSpan.FromMilliseconds(10), obs.ReconcileEvery);
                }
            }
        }

        [Test]
        public void ReconcileIntervalIsClampedHalfTheShortestTtl()
        {
            Assert.AreEqual(TimeSpan.FromSeconds(60), Reconcile.Interval(TimeSpan.Zero));
            Assert.AreEqual(TimeSpan.FromSeconds(5), Reconcile.Interval(TimeSpan.FromSeconds(1)));
            Assert.AreEqual(TimeSpan.FromSeconds(5), Reconcile.Interval(TimeSpan.FromSeconds(10)));
            Assert.AreEqual(TimeSpan.FromSeconds(21), Reconcile.Interval(TimeSpan.FromSeconds(42)));
            Assert.AreEqual(TimeSpan.FromSeconds(60), Reconcile.Interval(TimeSpan.FromSeconds(120)));
            Assert.AreEqual(TimeSpan.FromSeconds(60), Reconcile.Interval(TimeSpan.FromMinutes(10)));
            for (int i = 0; i < 1000; i++)
            {
                var d = Reconcile.Jittered(TimeSpan.FromSeconds(10), 0.2);
                Assert.That(d >= TimeSpan.FromSeconds(8) && d <= TimeSpan.FromSeconds(12), d.ToString());
            }
            Assert.AreEqual(TimeSpan.FromSeconds(10), Reconcile.Jittered(TimeSpan.FromSeconds(10), 0));
        }

        [Test]
        public void BackoffDoublesTo2sJitteredIntoTheUpperHalf()
        {
            var b = new Backoff(TimeSpan.FromMilliseconds(50), TimeSpan.FromSeconds(2));
            double want = 50;
            for (int i = 0; i < 10; i++)
            {
                var d = b.Next().TotalMilliseconds;
                Assert.That(d >= want / 2 && d <= want, i + ": " + d + " not in [" + want / 2 + ", " + want + "]");
                want = Math.Min(want * 2, 2000);
            }
            b.Reset();
            Assert.That(b.Next().TotalMilliseconds <= 50);
        }

        [Test]
        public void BaseUrlIsValidated()
        {
            foreach (var bad in new[] { null, "", "127.0.0.1:7420", "ftp://x", "http://" })
            {
                var e = Assert.Throws<ArgumentException>(() => new MusterClient(bad));
                StringAssert.Contains("want http(s)://host[:port]", e.Message);
            }
            using (var c = new MusterClient("https://broker.example:7420/")) Assert.AreEqual("https://broker.example:7420", c.BaseUrl);
        }

        [Test]
        public void RoutesAreCheckedLocally()
        {
            foreach (var bad in new[] { null, "lease://a/b", "lease://a/b/c/d", "lease://a//c", "http://a/b/c", "" })
            {
                var e = Assert.Throws<MusterException>(() => Route.Parse(bad));
                Assert.AreEqual(ErrorCode.InvalidRoute, e.Code);
            }
            Assert.AreEqual("/v1/leases/a/b%20c/d/acquire", Route.Parse("lease://a/b c/d").Path("/acquire"));
        }
    }
}
