using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using Muster.Client.Wire;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>Session.Batch against the real broker the shared harness runs (straight at
    /// its broker URL): one result per operation, partial success, per-operation
    /// authorization and whole-batch refusals.</summary>
    [TestFixture, Category("Broker")]
    public class BatchTests
    {
        private Harness h;
        private MusterClient c;
        private static int unique;

        [OneTimeSetUp]
        public void Start()
        {
            h = SharedHarness.Get();
            c = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["a"] });
        }

        [OneTimeTearDown]
        public void Stop() { c.Dispose(); }

        private static string Realm() { return "batch" + Interlocked.Increment(ref unique); }

        private static TimeSpan Sec(double s) { return TimeSpan.FromSeconds(s); }

        [Test]
        public async Task LifecycleOneResultPerOperation()
        {
            var p = "lease://" + Realm() + "/r/";
            using (var s = await c.CreateSessionAsync("worker-1", Sec(10)))
            using (var other = await c.CreateSessionAsync("worker-2", Sec(10)))
            {
                var taken = await other.AcquireAsync(p + "taken", Sec(5));
                var held = await s.AcquireAsync(p + "held", Sec(5));

                var b = s.Batch();
                for (var i = 0; i < 5; i++) b.Acquire(p + "d" + i, Sec(5));
                b.Acquire(p + "taken", Sec(5)).Acquire(p + "held", Sec(5));
                Assert.AreEqual(7, b.Count);
                var res = await b.DoAsync();
                Assert.AreEqual(7, res.Count);
                var mine = new List<Lease>();
                for (var i = 0; i < 5; i++)
                {
                    Assert.IsNull(res[i].Error, "result " + i);
                    Assert.AreEqual("acquire", res[i].Op);
                    Assert.AreEqual(p + "d" + i, res[i].Route);
                    Assert.That(res[i].Lease != null && res[i].Lease.FencingToken > 0);
                    mine.Add(res[i].Lease);
                }
                var e = res[5].Error as MusterException;
                Assert.IsNotNull(e, "taken: " + res[5].Error);
                Assert.AreEqual(ErrorCode.LeaseHeld, e.Code);
                Assert.AreEqual(RetryAdvice.Backoff, ErrorCodes.Advice(e));
                Assert.AreEqual(409, e.Status);
                Assert.IsNotEmpty(e.Detail);
                Assert.IsNull(res[5].Lease);
                Assert.IsNull(res[6].Error);
                Assert.AreSame(held, res[6].Lease, "already held: the same handle");
                var st = await c.GetAsync(p + "d3");
                Assert.IsTrue(st.Held);
                Assert.AreEqual("worker-1", st.Item.OwnerId);

                // One request extends them all.
                var ext = s.Batch();
                foreach (var l in mine) ext.Extend(l, Sec(8));
                res = await ext.DoAsync();
                for (var i = 0; i < mine.Count; i++)
                {
                    Assert.IsNull(res[i].Error);
                    Assert.AreSame(mine[i], res[i].Lease);
                    Assert.AreEqual(1, mine[i].Renewals);
                }

                // A handle of the same route whose token is not the current one is fenced
                // and lost; the current one extends.
                var stale = new Lease(s, held.ParsedRoute, new LeaseBody
                {
                    Route = held.Route, FencingToken = held.FencingToken + 1000,
                    AcquiredAt = held.AcquiredAt, ExpiresAt = held.ExpiresAt,
                });
                res = await s.Batch().Extend(stale, Sec(1)).Extend(held, Sec(5)).DoAsync();
                Assert.IsInstanceOf<LeaseLostException>(res[0].Error);
                Assert.AreEqual(ErrorCode.Fenced, ((MusterException)res[0].Error.InnerException).Code);
                Assert.IsTrue(stale.Lost.IsCancellationRequested);
                Assert.IsNull(res[1].Error);
                Assert.IsNull(held.Error);

                // The other session releases its own.
                res = await other.Batch().Release(taken).DoAsync();
                Assert.IsNull(res[0].Error);
                Assert.IsInstanceOf<LeaseReleasedException>(taken.Error);

                // Release them all; the second release of mine[0] is settled locally.
                var rel = s.Batch();
                foreach (var l in mine) rel.Release(l);
                rel.Release(mine[0]);
                foreach (var r in await rel.DoAsync())
                {
                    Assert.IsNull(r.Error);
                    Assert.AreEqual("release", r.Op);
                }
                foreach (var l in mine) Assert.IsInstanceOf<LeaseReleasedException>(l.Error);
                Assert.IsFalse((await c.GetAsync(p + "d0")).Held);
            }
        }

        [Test]
        public async Task BadBatchesAreRefusedWhole()
        {
            var p = "lease://" + Realm() + "/r/";
            using (var s = await c.CreateSessionAsync("worker-1", Sec(10)))
            using (var other = await c.CreateSessionAsync("worker-2", Sec(10)))
            {
                var theirs = await other.AcquireAsync(p + "theirs", Sec(5));
                var tooMany = s.Batch();
                for (var i = 0; i <= Batch.MaxBatchOps; i++) tooMany.Acquire(p + "x" + i, Sec(1));
                var cases = new[]
                {
                    Tuple.Create("empty", s.Batch(), ErrorCode.InvalidRequest),
                    Tuple.Create("too many", tooMany, ErrorCode.InvalidRequest),
                    Tuple.Create("bad route", s.Batch().Acquire(p + "x", Sec(1)).Acquire("lease://acme/*/x", Sec(1)), ErrorCode.InvalidRoute),
                    Tuple.Create("another session's lease", s.Batch().Release(theirs), ErrorCode.InvalidRequest),
                    Tuple.Create("TTL out of range", s.Batch().Acquire(p + "x", TimeSpan.FromHours(1)), ErrorCode.InvalidRequest),
                };
                foreach (var k in cases)
                {
                    try
                    {
                        var got = await k.Item2.DoAsync();
                        Assert.Fail(k.Item1 + ": " + got.Count + " results");
                    }
                    catch (MusterException e)
                    {
                        Assert.AreEqual(k.Item3, e.Code, k.Item1);
                    }
                }
                Assert.IsFalse((await c.GetAsync(p + "x")).Held, "a refused batch acquired");
                Assert.IsNull(theirs.Error);

                // A lease of a session that ended at the broker is lost, as with ExtendAsync.
                var l = await s.AcquireAsync(p + "mine", Sec(5));
                await c.CallAsync<object>(System.Net.Http.HttpMethod.Delete, "/v1/sessions/" + s.Id, null, 204, CancellationToken.None);
                try
                {
                    await s.Batch().Extend(l, Sec(1)).DoAsync();
                    Assert.Fail("a batch of an ended session");
                }
                catch (SessionLostException) { } // the keepalive saw it first
                catch (MusterException e)
                {
                    Assert.AreEqual(ErrorCode.SessionNotFound, e.Code);
                }
                Assert.IsInstanceOf<LeaseLostException>(l.Error);

                // Families are separate universes: the route held in fam-a is free in fam-b.
                using (var cb = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["b"] }))
                using (var sb = await cb.CreateSessionAsync("worker-b", Sec(10)))
                {
                    var res = await sb.Batch().Acquire(p + "theirs", Sec(1)).DoAsync();
                    Assert.IsNull(res[0].Error);
                }
            }
        }

        [Test]
        public async Task ForbiddenIsPerOperation()
        {
            // narrow: read-only on lease://acme/renderers/*.
            using (var narrow = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["narrow"] }))
            using (var s = await narrow.CreateSessionAsync("reader", Sec(10)))
            {
                var res = await s.Batch().Acquire("lease://acme/renderers/a", Sec(1)).Acquire("lease://acme/other/a", Sec(1)).DoAsync();
                Assert.AreEqual(2, res.Count);
                foreach (var r in res)
                {
                    var e = r.Error as MusterException;
                    Assert.IsNotNull(e, "" + r.Error);
                    Assert.AreEqual(ErrorCode.Forbidden, e.Code);
                    Assert.AreEqual(403, e.Status);
                    Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(e));
                    Assert.IsNull(r.Lease);
                }
            }
        }
    }
}
