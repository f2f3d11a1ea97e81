using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using Newtonsoft.Json.Linq;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>The SDK's surfaces against the real broker the shared harness runs
    /// (straight at its broker URL, no proxy).</summary>
    [TestFixture, Category("Broker")]
    public class BrokerTests
    {
        private Harness h;
        private MusterClient c;
        private static int unique;

        [OneTimeSetUp]
        public void Start()
        {
            h = SharedHarness.Get();
            Assert.IsNull(h.PostAsync("/reset", "", 204).GetAwaiter().GetResult());
            c = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["a"] });
        }

        [OneTimeTearDown]
        public void Stop() { c.Dispose(); }

        private static string Area() { return "t" + Interlocked.Increment(ref unique); }

        private static T Throws<T>(Func<Task> f) where T : Exception
        {
            try
            {
                f().GetAwaiter().GetResult();
            }
            catch (T e)
            {
                return e;
            }
            Assert.Fail("no " + typeof(T).Name);
            return null;
        }

        [Test]
        public async Task AcquireExtendReleaseAndFencing()
        {
            var area = Area();
            var route = "lease://acme/" + area + "/doc-1";
            using (var s1 = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            using (var s2 = await c.CreateSessionAsync("worker-2", TimeSpan.FromSeconds(10)))
            {
                Assert.AreEqual(32, s1.Id.Length);
                Assert.AreEqual("worker-1", s1.OwnerId);
                Assert.AreEqual(c.Epoch, s1.Epoch);
                var l1 = await s1.AcquireAsync(route, TimeSpan.FromSeconds(5));
                Assert.AreEqual(route, l1.Route);
                Assert.That(l1.FencingToken > 0);
                Assert.AreSame(l1, await s1.AcquireAsync(route, TimeSpan.FromSeconds(5)), "already held: the same handle");

                var held = Throws<MusterException>(() => s2.AcquireAsync(route, TimeSpan.FromSeconds(5)));
                Assert.AreEqual(ErrorCode.LeaseHeld, held.Code);
                Assert.AreEqual(409, held.Status);
                Assert.IsTrue(held.IsRetryable);

                var st = await c.GetAsync(route);
                Assert.IsTrue(st.Held);
                Assert.AreEqual("worker-1", st.Item.OwnerId);
                Assert.AreEqual(s1.HolderIncarnation, st.Item.HolderIncarnation);

                await l1.ExtendAsync(TimeSpan.FromSeconds(5));
                Assert.AreEqual(1, l1.Renewals);

                // A waiter is granted at the release, with a higher fencing token.
                var waiting = s2.AcquireAsync(route, TimeSpan.FromSeconds(5), new AcquireOptions { Wait = TimeSpan.FromSeconds(5) });
                await Task.Delay(200);
                Assert.IsFalse(waiting.IsCompleted);
                await l1.ReleaseAsync();
                Assert.IsInstanceOf<LeaseReleasedException>(l1.Error);
                Assert.IsTrue(l1.Lost.IsCancellationRequested);
                var l2 = await waiting;
                Assert.That(l2.FencingToken > l1.FencingToken);
                await l1.ReleaseAsync(); // released twice: still fine

                // A released handle refuses to extend; the holder's token is not ours.
                Throws<LeaseReleasedException>(() => l1.ExtendAsync(TimeSpan.FromSeconds(5)));
                var stale = new Lease(s1, Route.Parse(route), new Wire.LeaseBody { FencingToken = l1.FencingToken });
                var fenced = Throws<LeaseLostException>(() => stale.ExtendAsync(TimeSpan.FromSeconds(5)));
                var cause = (MusterException)fenced.InnerException;
                Assert.That(cause.Code == ErrorCode.NotOwner || cause.Code == ErrorCode.Fenced, cause.Message);
                Assert.AreEqual(RetryAdvice.Restart, cause.Advice);
                Assert.IsTrue(stale.Lost.IsCancellationRequested);
            }
        }

        [Test]
        public async Task LocalDeadlineLosesTheLease()
        {
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                var l = await s.AcquireAsync("lease://acme/" + Area() + "/x", TimeSpan.FromMilliseconds(300));
                var lost = new TaskCompletionSource<bool>();
                using (l.Lost.Register(() => lost.TrySetResult(true)))
                {
                    Assert.AreSame(lost.Task, await Task.WhenAny(lost.Task, Task.Delay(3000)));
                }
                var e = (LeaseLostException)l.Error;
                Assert.AreEqual(ErrorCode.LeaseExpired, ((MusterException)e.InnerException).Code);
                Assert.AreEqual(RetryAdvice.Restart, ErrorCodes.Advice(e));
            }
        }

        [Test]
        public async Task ClosingTheSessionLosesItsLeases()
        {
            var route = "lease://acme/" + Area() + "/x";
            var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10));
            var l = await s.AcquireAsync(route, TimeSpan.FromSeconds(10));
            await s.CloseAsync();
            Assert.IsTrue(s.Ended.IsCancellationRequested);
            Assert.IsInstanceOf<MusterClosedException>(s.Error);
            Assert.IsTrue(l.Lost.IsCancellationRequested);
            Assert.IsInstanceOf<MusterClosedException>(l.Error.InnerException);
            Assert.IsFalse((await c.GetAsync(route)).Held);
            Throws<MusterClosedException>(() => s.AcquireAsync(route, TimeSpan.FromSeconds(1)));
        }

        [Test]
        public async Task KeepaliveKeepsTheSessionAlive()
        {
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(2)))
            {
                var l = await s.AcquireAsync("lease://acme/" + Area() + "/x", TimeSpan.FromSeconds(10));
                await Task.Delay(4500); // more than twice the TTL
                Assert.IsNull(s.Error);
                await l.ExtendAsync(TimeSpan.FromSeconds(10));
            }
        }

        [Test]
        public async Task ABrokerRestartLosesTheSessionAndItsLeases()
        {
            var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(1));
            var l = await s.AcquireAsync("lease://acme/" + Area() + "/x", TimeSpan.FromSeconds(30));
            var epoch = s.Epoch;
            Assert.IsNull(await h.PostAsync("/reset", "", 204)); // a fresh broker on the same address
            var ended = new TaskCompletionSource<bool>();
            // Disposing from a callback on Ended (run on the keepalive's thread) must not deadlock.
            using (s.Ended.Register(() => { s.Dispose(); ended.TrySetResult(true); }))
            {
                Assert.AreSame(ended.Task, await Task.WhenAny(ended.Task, Task.Delay(5000)), "the session was not lost");
            }
            // The keepalive's answer comes from the new lifetime: its epoch loses the session
            // before its session_not_found is read (prompt loss).
            var lost = (SessionLostException)s.Error;
            StringAssert.Contains("another lifetime", lost.Message);
            Assert.IsTrue(l.Lost.IsCancellationRequested);
            Assert.AreSame(lost, l.Error.InnerException);
            Assert.AreEqual(RetryAdvice.Restart, ErrorCodes.Advice(l.Error));
            s.Dispose(); // after the loss: only stops the keepalive
            using (var s2 = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                Assert.AreNotEqual(epoch, s2.Epoch);
            }
        }

        [Test]
        public async Task WithLeaseExtendsWhileRunningAndReleasesAfter()
        {
            var route = "lease://acme/" + Area() + "/x";
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                Lease seen = null;
                await s.WithLeaseAsync(route, TimeSpan.FromMilliseconds(1500), async (l, ct) =>
                {
                    seen = l;
                    await Task.Delay(3500, ct); // more than twice the TTL
                    Assert.IsNull(l.Error);
                    Assert.That(l.Renewals >= 2, "renewals " + l.Renewals);
                });
                Assert.IsInstanceOf<LeaseReleasedException>(seen.Error);
                Assert.IsFalse((await c.GetAsync(route)).Held);

            }
            // A lost lease cancels fn and is what WithLeaseAsync throws: here the session
            // is ended behind the SDK's back, so the next extension answers session_not_found.
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                bool cancelled = false;
                var lost = Throws<LeaseLostException>(() => s.WithLeaseAsync(route, TimeSpan.FromSeconds(3), async (l, ct) =>
                {
                    await c.CallAsync<object>(System.Net.Http.HttpMethod.Delete, "/v1/sessions/" + s.Id, null, 204, CancellationToken.None);
                    try { await Task.Delay(5000, ct); }
                    catch (OperationCanceledException) { cancelled = true; throw; }
                }));
                Assert.IsTrue(cancelled, "fn's token was not cancelled by the loss");
                // session_not_found to the extension lost the whole session (prompt loss).
                var sl = (SessionLostException)lost.InnerException;
                Assert.AreSame(sl, s.Error);
                Assert.AreEqual(ErrorCode.SessionNotFound, ((MusterException)sl.InnerException).Code);
            }
        }

        [Test]
        public async Task ListPagesOneSnapshot()
        {
            var area = Area();
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                for (int i = 0; i < 23; i++) await s.AcquireAsync("lease://acme/" + area + "/doc-" + i, TimeSpan.FromSeconds(30));
                var sel = "lease://acme/" + area + "/*";
                var p = await c.ListPageAsync(sel, new ListOptions { Limit = 5 });
                Assert.AreEqual(5, p.Items.Count);
                Assert.IsNotNull(p.NextCursor);
                Assert.AreEqual(c.Epoch, p.Epoch);
                var all = await c.ListAsync(sel, new ListOptions { Limit = 7 });
                Assert.AreEqual(23, all.Count);
                Assert.AreEqual(23, all.Select(i => i.Route).Distinct().Count());
                Assert.That(all.All(i => i.OwnerId == "worker-1" && i.HolderIncarnation == s.HolderIncarnation && i.Remaining > TimeSpan.Zero));
                // The lazy iterator: one request per page, none after Dispose.
                var seen = new List<string>();
                using (var it = c.List(sel, new ListOptions { Limit = 10 }))
                {
                    Assert.AreEqual(0, it.Requests);
                    while (await it.MoveNextAsync())
                    {
                        seen.Add(it.Current.Route);
                        if (seen.Count == 12)
                        {
                            Assert.AreEqual(2, it.Requests);
                            it.Dispose();
                        }
                    }
                    Assert.AreEqual(12, seen.Count);
                    Assert.AreEqual(2, it.Requests);
                }
                using (var it = c.List(sel, new ListOptions { Limit = 10 }))
                {
                    int n = 0;
                    while (await it.MoveNextAsync()) n++;
                    Assert.AreEqual(23, n);
                    Assert.AreEqual(3, it.Requests);
                    Assert.IsFalse(await it.MoveNextAsync());
                }
                var e = Throws<MusterException>(() => c.ListPageAsync("lease://acme/other/*", new ListOptions { Cursor = p.NextCursor }));
                Assert.AreEqual(ErrorCode.InvalidCursor, e.Code);
                var bad = Throws<MusterException>(() => c.ListPageAsync("lease://acme/renderers/doc*"));
                Assert.AreEqual(ErrorCode.InvalidSelector, bad.Code);
            }
        }

        [Test]
        public async Task WatchDeliversMarkerThenChanges()
        {
            var area = Area();
            var sel = "lease://acme/" + area + "/*";
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                await s.AcquireAsync("lease://acme/" + area + "/before", TimeSpan.FromSeconds(30));
                using (var sub = await c.WatchAsync(sel))
                {
                    Assert.AreEqual(1, sub.Marker.Selectors.Count);
                    Assert.AreEqual("lease://acme/" + area + "/before", sub.Marker.Selectors[0].Items.Single().Route);
                    var l = await s.AcquireAsync("lease://acme/" + area + "/after", TimeSpan.FromSeconds(30));
                    await l.ReleaseAsync();
                    using (var cts = new CancellationTokenSource(5000))
                    {
                        var a = await sub.ReadAsync(cts.Token);
                        Assert.AreEqual(ChangeKinds.Acquired, a.Kind);
                        Assert.AreEqual(sel, a.Selector);
                        Assert.AreEqual("worker-1", a.Item.OwnerId);
                        Assert.That(a.Revision > sub.Marker.Revision);
                        var r = await sub.ReadAsync(cts.Token);
                        Assert.AreEqual(ChangeKinds.Released, r.Kind);
                        Assert.IsNull(r.Item);
                        Assert.That(r.Revision > a.Revision);
                    }
                    Assert.IsNull(sub.Error);
                }
            }
        }

        [Test]
        public async Task SessionWatchIsSupersededAndUnsubscribed()
        {
            var sel = "lease://acme/" + Area() + "/*";
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                var first = await s.WatchAsync(new[] { sel });
                var second = await s.WatchAsync(new[] { sel });
                using (var cts = new CancellationTokenSource(5000))
                {
                    Assert.IsNull(await first.ReadAsync(cts.Token));
                    Assert.AreEqual("superseded", ((StreamEndedException)first.Error).Reason);
                    await second.UnsubscribeAsync(sel);
                    Assert.IsNull(await second.ReadAsync(cts.Token));
                    Assert.AreEqual("unsubscribed", ((StreamEndedException)second.Error).Reason);
                }
                first.Dispose();
                second.Dispose();
                using (var free = await c.WatchAsync(sel))
                {
                    Throws<MusterException>(() => free.UnsubscribeAsync(sel));
                }
            }
        }

        [Test]
        public async Task ManyStreamsOnOneClientDoNotStarveRequests()
        {
            // .NET Framework and Mono allow 2 connections per server by default; a client
            // whose streams held them all would hang every other request.
            var subs = new List<Subscription>();
            try
            {
                for (int i = 0; i < 8; i++) subs.Add(await c.WatchAsync("lease://acme/" + Area() + "/*"));
                using (var cts = new CancellationTokenSource(5000))
                {
                    var p = await c.ListPageAsync("lease://acme/nothing/*", null, cts.Token);
                    Assert.AreEqual(0, p.Items.Count);
                }
            }
            finally
            {
                foreach (var s in subs) s.Dispose();
            }
        }

        [Test]
        public async Task BrokerRefusalsAreTyped()
        {
            using (var anon = new MusterClient(h.Broker))
            {
                var e = Throws<MusterException>(() => anon.ListPageAsync("lease://acme/x/*"));
                Assert.AreEqual(ErrorCode.Unauthenticated, e.Code);
                Assert.AreEqual(401, e.Status);
                Assert.IsFalse(e.IsRetryable);
            }
            using (var narrow = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["narrow"] }))
            {
                var e = Throws<MusterException>(() => narrow.ListPageAsync("lease://acme/*/*"));
                Assert.AreEqual(ErrorCode.Forbidden, e.Code);
                var w = Throws<MusterException>(() => narrow.WatchAsync("lease://acme/*/*"));
                Assert.AreEqual(ErrorCode.Forbidden, w.Code);
            }
            var nf = Throws<MusterException>(() => c.CreateSessionAsync("w", TimeSpan.FromMilliseconds(10)));
            Assert.AreEqual(ErrorCode.InvalidRequest, nf.Code);
            await Task.FromResult(0);
        }

        [Test]
        public async Task FleetHelpers()
        {
            var root = "fleet-" + Area();
            var a = await c.RegisterAsync(root, "repo", new JObject { ["url"] = "https://example.com/a", ["at"] = "2026-01-01T00:00:00Z" });
            var b = await c.RegisterAsync(root, "repo", new JObject { ["broken"] = true });
            Assert.AreEqual("repo-1", a.Name);
            Assert.AreEqual("repo-2", b.Name);
            var got = await c.GetSpecAsync(root, "repo-1");
            Assert.AreEqual("2026-01-01T00:00:00Z", (string)got.As<JObject>()["at"]);
            StringAssert.Contains("\"at\":\"2026-01-01T00:00:00Z\"", got.Json); // the text as registered
            var desired = await c.DesiredAsync(root);
            CollectionAssert.AreEqual(new[] { "repo-1", "repo-2" }, desired.Select(x => x.Name).ToList());

            var swept = await c.SweepAsync(root, json =>
            {
                var url = (string)JObject.Parse(json)["url"];
                if (url == null) throw new FormatException("no url");
                return new Uri(url);
            });
            CollectionAssert.AreEqual(new[] { "repo-2" }, swept.Dropped);
            Assert.AreEqual("repo-1", swept.Kept.Single().Name);
            Assert.AreEqual("example.com", swept.Kept.Single().Spec.Host);
            var nf = Throws<MusterException>(() => c.GetSpecAsync(root, "repo-2"));
            Assert.AreEqual(ErrorCode.SpecNotFound, nf.Code);

            await c.ForgetAsync(root, "repo-9"); // absent: fine
            var bad = Throws<MusterException>(() => c.ForgetAsync(root, "Repo-1"));
            Assert.AreEqual(ErrorCode.InvalidName, bad.Code);

            var plan = await c.PlanAsync(new[] { "b", "a" }, new[] { "c", "a" });
            CollectionAssert.AreEqual(new[] { "b" }, plan.Missing);
            CollectionAssert.AreEqual(new[] { "c" }, plan.Orphans);

            var area = Area();
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                await s.AcquireAsync("lease://acme/" + area + "/stray", TimeSpan.FromSeconds(30));
                var gap = await c.GapAsync(root, "lease://acme/" + area + "/*");
                CollectionAssert.AreEqual(new[] { "repo-1" }, gap.Missing);
                CollectionAssert.AreEqual(new[] { "stray" }, gap.Orphans);
                Assert.That(gap.Revision > 0);
            }
        }

        [Test]
        public async Task GapReadsEveryPage()
        {
            var root = "fleet-" + Area();
            for (int i = 0; i < 5; i++) await c.RegisterAsync(root, "repo", new JObject { ["n"] = i });
            var area = Area();
            var sel = "lease://acme/" + area + "/*";
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                foreach (var r in new[] { "repo-1", "repo-3", "stray-a", "stray-b", "stray-c" })
                {
                    await s.AcquireAsync("lease://acme/" + area + "/" + r, TimeSpan.FromSeconds(30));
                }
                // The broker does page at this size: the first page is partial and has a cursor.
                var first = await c.CallAsync<Muster.Client.Wire.GapPage>(System.Net.Http.HttpMethod.Get,
                    "/v1/fleets/" + root + "/gap" + MusterClient.Query("live", sel, "limit", "2"), null, 200, CancellationToken.None);
                Assert.IsFalse(string.IsNullOrEmpty(first.NextCursor), "a gap of 7 names in pages of 2 has a next page");
                Assert.That(first.Missing.Count + first.Orphans.Count < 6);

                var whole = await c.GapAsync(root, sel);
                CollectionAssert.AreEqual(new[] { "repo-2", "repo-4", "repo-5" }, whole.Missing);
                CollectionAssert.AreEqual(new[] { "stray-a", "stray-b", "stray-c" }, whole.Orphans);
                foreach (var limit in new[] { 1, 2, 3 })
                {
                    var paged = await c.GapAsync(root, sel, limit, CancellationToken.None);
                    CollectionAssert.AreEqual(whole.Missing, paged.Missing, "pages of " + limit);
                    CollectionAssert.AreEqual(whole.Orphans, paged.Orphans, "pages of " + limit);
                    Assert.That(paged.Revision > 0);
                }
            }
        }

        [Test]
        public async Task LimitErrorsCarryTheirScope()
        {
            // A session holds at most 128 wildcard registrations: the 129th is refused
            // with 429 subscription_limit, scope "session".
            var area = Area();
            var subs = new List<Subscription>();
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                try
                {
                    for (int k = 0; k < 4; k++)
                    {
                        subs.Add(await s.WatchAsync(Enumerable.Range(32 * k, 32).Select(i => "lease://acme/" + area + "-" + i + "/*")));
                    }
                    var e = Throws<MusterException>(() => s.WatchAsync(new[] { "lease://acme/" + area + "-extra/*" }));
                    Assert.AreEqual(ErrorCode.SubscriptionLimit, e.Code);
                    Assert.AreEqual(429, e.Status);
                    Assert.AreEqual("session", e.Scope);
                    Assert.AreEqual(RetryAdvice.No, e.Advice);
                }
                finally
                {
                    foreach (var sub in subs) sub.Dispose();
                }
            }
        }

        [Test]
        public async Task ObserverFollowsAndDisposesPromptly()
        {
            var area = Area();
            var sel = "lease://acme/" + area + "/*";
            using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
            {
                await s.AcquireAsync("lease://acme/" + area + "/a", TimeSpan.FromSeconds(30));
                var obs = c.Observe(sel, new ObserveOptions { PageSize = 1 });
                int changes = 0;
                obs.Changed += (o, e) => Interlocked.Increment(ref changes);
                using (var cts = new CancellationTokenSource(5000)) await obs.ReadyAsync(cts.Token);
                Assert.AreEqual(1, obs.View.Items.Count);
                await s.AcquireAsync("lease://acme/" + area + "/b", TimeSpan.FromSeconds(30));
                var deadline = DateTime.UtcNow.AddSeconds(5);
                while (obs.View.Items.Count != 2 && DateTime.UtcNow < deadline) await Task.Delay(20);
                CollectionAssert.AreEqual(new[] { "lease://acme/" + area + "/a", "lease://acme/" + area + "/b" }, obs.View.Items.Select(i => i.Route).ToList());
                Assert.That(Volatile.Read(ref changes) >= 1); // the change of b; the bootstrap's may precede the handler
                Assert.AreEqual(1, obs.Stats.Bootstraps);
                var sw = System.Diagnostics.Stopwatch.StartNew();
                obs.Dispose();
                Assert.That(sw.ElapsedMilliseconds < 1000);
                Assert.IsInstanceOf<MusterClosedException>(obs.Error);
                Assert.IsFalse(obs.Ready);
                Throws<MusterClosedException>(() => obs.ReadyAsync());
            }
        }
    }
}
