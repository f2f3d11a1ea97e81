using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// Prompt loss (docs/client-operations.md, "Prompt loss") against fake brokers: a
    /// session, and every lease it holds, is lost at once, in the same call that
    /// reveals it, when the broker that holds it (the one that last answered one of its
    /// requests with success) answers with another
    /// Muster-Epoch (any answer or stream), answers family_unavailable, or answers
    /// session_not_found to one of the session's requests. Nothing else does: not the
    /// same answers from another broker, not a connection error.
    /// </summary>
    [TestFixture]
    public class PromptLossTests
    {
        private const string A = "lease://acme/jobs/a";
        private const string B = "lease://acme/jobs/b";

        /// <summary>Brokers by host. The session's broker is "a:1" (the base URL) in epoch
        /// "e1": it creates sessions, accepts keepalives, grants every acquire and lists
        /// nothing. Answer,
        /// when set, answers any other request (and may answer those too: null falls back
        /// to the defaults).</summary>
        private sealed class Brokers : HttpMessageHandler
        {
            internal long SessionTtlMs = 30000;
            internal Func<string, HttpRequestMessage, HttpResponseMessage> Answer;
            internal int Keepalives;
            private long token = 10;

            protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, CancellationToken ct)
            {
                var host = req.RequestUri.Authority;
                var path = req.RequestUri.AbsolutePath;
                if (path.EndsWith("/keepalive", StringComparison.Ordinal)) Interlocked.Increment(ref Keepalives);
                var ans = Answer == null ? null : Answer(host, req);
                if (ans != null) return Task.FromResult(ans);
                if (req.Method == HttpMethod.Delete) return Task.FromResult(Answered(new HttpResponseMessage(HttpStatusCode.NoContent), "e1"));
                if (path == "/v1/sessions")
                {
                    return Task.FromResult(Json(201, "{\"session_id\":\"0123456789abcdef0123456789abcdef\",\"holder_incarnation\":\"h\",\"owner_id\":\"w\"," +
                        "\"ttl_ms\":" + SessionTtlMs + ",\"expires_at\":\"2030-01-01T00:00:00Z\",\"epoch\":\"e1\"}", "e1"));
                }
                if (path.EndsWith("/keepalive", StringComparison.Ordinal)) return Task.FromResult(Json(200, "{}", "e1"));
                if (path.EndsWith("/acquire", StringComparison.Ordinal))
                {
                    var seg = path.Substring("/v1/leases/".Length, path.Length - "/v1/leases/".Length - "/acquire".Length);
                    return Task.FromResult(Json(200, LeaseJson("lease://" + Uri.UnescapeDataString(seg), Interlocked.Increment(ref token)), "e1"));
                }
                if (IsList(req)) return Task.FromResult(ListPage("e1"));
                return Task.FromResult(Problem(404, "not_found", "e1"));
            }
        }

        private static HttpResponseMessage Answered(HttpResponseMessage m, string epoch)
        {
            if (epoch != null) m.Headers.Add("Muster-Epoch", epoch);
            return m;
        }

        private static HttpResponseMessage Json(int status, string body, string epoch, string type = "application/json")
        {
            return Answered(new HttpResponseMessage((HttpStatusCode)status) { Content = new StringContent(body, Encoding.UTF8, type) }, epoch);
        }

        private static HttpResponseMessage Problem(int status, string code, string epoch)
        {
            return Json(status, "{\"type\":\"about:blank\",\"title\":\"x\",\"status\":" + status + ",\"code\":\"" + code + "\",\"detail\":\"fake\"}",
                epoch, "application/problem+json");
        }

        private static HttpResponseMessage Misdirect(string owner)
        {
            return Json(421, "{\"type\":\"about:blank\",\"title\":\"Misdirected Request\",\"status\":421,\"code\":\"wrong_broker\",\"owner\":\"" + owner + "\"}",
                null, "application/problem+json");
        }

        /// <summary>A page of LIST, as a broker of epoch answers it.</summary>
        private static HttpResponseMessage ListPage(string epoch)
        {
            return Json(200, "{\"items\":[],\"snapshot\":{\"epoch\":\"" + epoch + "\",\"revision\":1}}", epoch);
        }

        private static string LeaseJson(string route, long token)
        {
            var now = DateTimeOffset.UtcNow;
            return "{\"route\":\"" + route + "\",\"fencing_token\":" + token + ",\"acquired_at\":\"" + now.ToString("o") + "\"," +
                "\"expires_at\":\"" + now.AddMinutes(5).ToString("o") + "\",\"renewals\":0,\"outcome\":\"acquired\",\"expires_after_request_ms\":300000}";
        }

        private static bool IsList(HttpRequestMessage req)
        {
            return req.Method == HttpMethod.Get && req.RequestUri.AbsolutePath == "/v1/leases";
        }

        private static MusterClient Client(Brokers b)
        {
            return new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(b) });
        }

        /// <summary>The session and both leases are lost, right now (no wait), the leases
        /// with the session's loss as their cause, whose message names why.</summary>
        private static void AssertLostNow(Session s, string why, params Lease[] leases)
        {
            Assert.IsInstanceOf<SessionLostException>(s.Error, "the session is not lost at once");
            StringAssert.Contains(why, s.Error.Message);
            Assert.IsTrue(s.Ended.IsCancellationRequested, "Ended is not cancelled");
            foreach (var l in leases)
            {
                Assert.IsTrue(l.Lost.IsCancellationRequested, l.Route + ": Lost is not cancelled at once");
                Assert.IsInstanceOf<LeaseLostException>(l.Error, l.Route);
                Assert.AreSame(s.Error, l.Error.InnerException, l.Route + ": the cause is not the session's loss");
            }
        }

        private static void AssertHeld(Session s, params Lease[] leases)
        {
            Assert.IsNull(s.Error, "the session was lost");
            foreach (var l in leases) Assert.IsNull(l.Error, l.Route + " was lost");
        }

        [Test]
        public async Task AnotherEpochFromTheSessionsBrokerLosesItAtOnce()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                var lb = await s.AcquireAsync(B, TimeSpan.FromMinutes(5));
                await c.ListPageAsync("lease://acme/**"); // same epoch: nothing
                AssertHeld(s, la, lb);
                b.Answer = (host, req) => IsList(req) ? ListPage("e2") : null; // the broker restarted
                await c.ListPageAsync("lease://acme/**");
                AssertLostNow(s, "e2", la, lb);
                s.Dispose();
            }
        }

        [Test]
        public async Task AnotherEpochOnAWatchStreamOfTheSessionsBrokerLosesIt()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => req.RequestUri.AbsolutePath == "/v1/leases/watch"
                    ? Json(200, "event: snapshot\ndata: {\"epoch\":\"e2\",\"revision\":1,\"subscriptions\":[]}\n\n", "e2", "text/event-stream")
                    : null;
                using (var sub = await c.WatchAsync("lease://acme/**"))
                {
                    AssertLostNow(s, "e2", la);
                }
                s.Dispose();
            }
        }

        [Test]
        public async Task AnotherEpochFromAnotherBrokerChangesNothing()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                // a:1 sends the listing to b:2, which answers in its own epoch.
                b.Answer = (host, req) => !IsList(req) ? null : host == "a:1" ? Misdirect("http://b:2") : ListPage("x9");
                await c.ListPageAsync("lease://acme/**");
                Assert.AreEqual("x9", c.Epoch);
                AssertHeld(s, la);
                s.Dispose();
            }
        }

        /// <summary>The session's broker is the one that answered its creation after
        /// following wrong_broker, not the base URL.</summary>
        [Test]
        public async Task TheSessionsBrokerIsTheOneItsCreationWasFollowedTo()
        {
            var b = new Brokers();
            int lists = 0;
            b.Answer = (host, req) =>
            {
                if (req.RequestUri.AbsolutePath == "/v1/sessions" && host == "a:1") return Misdirect("http://b:2");
                if (!IsList(req)) return null;
                switch (Interlocked.Increment(ref lists))
                {
                    case 1: throw new HttpRequestException("connection refused"); // b:2: the client goes back to a:1
                    case 2: return ListPage("e9"); // a:1, in its own lifetime
                    case 3: return Misdirect("http://b:2"); // a:1 sends it to b:2 …
                    default: return ListPage("e2"); // … which restarted
                }
            };
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                Assert.AreEqual("b:2", s.Host);
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                Assert.Throws<MusterTransportException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                AssertHeld(s, la);
                await c.ListPageAsync("lease://acme/**");
                Assert.AreEqual("e9", c.Epoch);
                AssertHeld(s, la);
                await c.ListPageAsync("lease://acme/**");
                AssertLostNow(s, "b:2", la);
                StringAssert.Contains("e2", s.Error.Message);
                s.Dispose();
            }
        }

        [Test]
        public async Task FamilyUnavailableFromTheSessionsBrokerLosesIt()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => IsList(req) ? Problem(503, "family_unavailable", "e1") : null;
                var e = Assert.Throws<MusterException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                Assert.AreEqual(ErrorCode.FamilyUnavailable, e.Code);
                AssertLostNow(s, "family_unavailable", la);
                s.Dispose();
            }
        }

        /// <summary>The list is sent to b:2, which answers family_unavailable: the client
        /// forgets that owner and asks its base URL again, which answers. The session of
        /// a:1 is untouched.</summary>
        [Test]
        public async Task FamilyUnavailableFromAnotherBrokerChangesNothing()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                int misdirects = 0;
                b.Answer = (host, req) => !IsList(req) ? null
                    : host == "a:1" ? (Interlocked.Increment(ref misdirects) == 1 ? Misdirect("http://b:2") : null)
                    : Problem(503, "family_unavailable", "x9");
                await c.ListPageAsync("lease://acme/**");
                Assert.AreEqual(2, misdirects, "the list was not sent to the base URL again");
                AssertHeld(s, la);
                s.Dispose();
            }
        }

        /// <summary>Several brokers: a family_unavailable that the client moved on from (the
        /// request was answered by the next broker) still loses the sessions of the broker
        /// that answered it, at once.</summary>
        [Test]
        public async Task FamilyUnavailableSentOnToTheNextBrokerStillLosesTheSession()
        {
            var b = new Brokers();
            using (var c = new MusterClient(new[] { "http://a:1", "http://b:2" }, new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                var hosts = new List<string>();
                b.Answer = (host, req) =>
                {
                    if (!IsList(req)) return null;
                    lock (hosts) hosts.Add(host);
                    return host == "a:1" ? Problem(503, "family_unavailable", "e1") : ListPage("f1");
                };
                var page = await c.ListPageAsync("lease://acme/**");
                Assert.AreEqual("f1", page.Epoch);
                Assert.AreEqual(new[] { "a:1", "b:2" }, hosts.ToArray());
                AssertLostNow(s, "family_unavailable", la);
                s.Dispose();
            }
        }

        /// <summary>session_not_found to one of the session's own requests: the session and
        /// every lease it holds, not only the one the request was about.</summary>
        [TestCase("acquire")]
        [TestCase("extend")]
        [TestCase("release")]
        [TestCase("batch")]
        public async Task SessionNotFoundToOneOfItsRequestsLosesIt(string op)
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                var lb = await s.AcquireAsync(B, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => req.RequestUri.AbsolutePath.EndsWith("/keepalive", StringComparison.Ordinal) || req.Method == HttpMethod.Delete
                    ? null : Problem(404, "session_not_found", "e1");
                Exception thrown = null;
                try
                {
                    switch (op)
                    {
                        case "acquire": await s.AcquireAsync("lease://acme/jobs/c", TimeSpan.FromMinutes(5)); break;
                        case "extend": await la.ExtendAsync(TimeSpan.FromMinutes(5)); break;
                        case "release": await la.ReleaseAsync(); break;
                        default: await s.Batch().Extend(la, TimeSpan.FromMinutes(5)).DoAsync(); break;
                    }
                }
                catch (Exception e)
                {
                    thrown = e;
                }
                if (op != "release") Assert.IsNotNull(thrown, op + " did not throw");
                AssertLostNow(s, "session_not_found", la, lb);
                s.Dispose();
            }
        }

        [Test]
        public async Task AConnectionErrorChangesNothing()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) =>
                {
                    if (req.RequestUri.AbsolutePath.EndsWith("/keepalive", StringComparison.Ordinal) || req.Method == HttpMethod.Delete) return null;
                    throw new HttpRequestException("connection refused");
                };
                Assert.Throws<MusterTransportException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                Assert.Throws<MusterTransportException>(() => la.ExtendAsync(TimeSpan.FromMinutes(5)).GetAwaiter().GetResult());
                Assert.Throws<MusterTransportException>(() => s.AcquireAsync(B, TimeSpan.FromMinutes(5)).GetAwaiter().GetResult());
                AssertHeld(s, la);
                s.Dispose();
            }
        }

        /// <summary>The keepalive's own answer may carry the new epoch: the session is lost
        /// inside the keepalive's request, and a callback on Ended that disposes it there
        /// must not wait for the keepalive loop (a deadlock).</summary>
        [Test]
        public async Task AKeepaliveAnswerOfAnotherEpochLosesItAndACallbackMayDisposeIt()
        {
            var b = new Brokers { SessionTtlMs = 1500 }; // a keepalive every 500 ms
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromMilliseconds(1500));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => req.RequestUri.AbsolutePath.EndsWith("/keepalive", StringComparison.Ordinal) ? Problem(404, "session_not_found", "e2") : null;
                var disposed = new TaskCompletionSource<bool>();
                using (s.Ended.Register(() => { s.Dispose(); disposed.TrySetResult(true); }))
                {
                    Assert.AreSame(disposed.Task, await Task.WhenAny(disposed.Task, Task.Delay(5000)), "not lost, or Dispose hangs in the callback");
                }
                AssertLostNow(s, "e2", la);
            }
        }

        /// <summary>A planned move: the session's broker is the one that last answered one of
        /// its own requests with success, with that answer's epoch. Created at a:1 (e1), moved
        /// to b:2 (x1: a:1 names it); a:1 restarts (e2) and gets the family back (b:2 names
        /// it): its success under e2 keeps the session, a later answer of a:1 under e3 ends
        /// it. The conformance tests' broken client (CreatorLoss, the old rule) loses it at
        /// a:1's success under e2.</summary>
        [TestCase(false)]
        [TestCase(true)]
        public async Task APlannedMoveMakesTheAnsweringBrokerTheSessions(bool broken)
        {
            var b = new Brokers();
            var owner = "a:1";
            var epochs = new Dictionary<string, string> { { "a:1", "e1" }, { "b:2", "x1" } };
            b.Answer = (host, req) =>
            {
                var path = req.RequestUri.AbsolutePath;
                if (path == "/v1/sessions" || path.EndsWith("/acquire", StringComparison.Ordinal)) return null;
                if (host != owner) return Answered(Misdirect("http://" + owner), epochs[host]);
                if (path.EndsWith("/extend", StringComparison.Ordinal)) return Json(200, LeaseJson(A, 11), epochs[host]);
                return IsList(req) ? ListPage(epochs[host]) : null;
            };
            using (var c = Client(b))
            {
                c.CreatorLoss = broken;
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                owner = "b:2";
                await la.ExtendAsync(TimeSpan.FromMinutes(5)); // a:1 names b:2, which answers
                AssertHeld(s, la);
                Assert.AreEqual(broken ? "e1" : "x1", s.Epoch);
                epochs["a:1"] = "e2";
                owner = "a:1";
                if (broken)
                {
                    Assert.Throws<LeaseLostException>(() => la.ExtendAsync(TimeSpan.FromMinutes(5)).GetAwaiter().GetResult());
                    AssertLostNow(s, "a:1 answered for another lifetime (epoch e2, the session's e1)", la);
                    return;
                }
                await la.ExtendAsync(TimeSpan.FromMinutes(5)); // b:2 names a:1, which answers under e2
                AssertHeld(s, la);
                Assert.AreEqual("e2", s.Epoch);
                epochs["a:1"] = "e3";
                await c.ListPageAsync("lease://acme/**");
                AssertLostNow(s, "a:1 answered for another lifetime (epoch e3, the session's e2)", la);
            }
        }

        /// <summary>A success of one of the session's requests is recorded before that same
        /// answer is judged: the creator answering under a new epoch (the family moved away and
        /// back while the session sent nothing) keeps it; a failure under yet another epoch is
        /// no success of the session: it ends it.</summary>
        [Test]
        public async Task ASuccessOfTheSessionIsRecordedBeforeItIsJudged()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => req.RequestUri.AbsolutePath.EndsWith("/extend", StringComparison.Ordinal) ? Json(200, LeaseJson(A, 11), "e2") : null;
                await la.ExtendAsync(TimeSpan.FromMinutes(5));
                AssertHeld(s, la);
                Assert.AreEqual("e2", s.Epoch);
                b.Answer = (host, req) => req.RequestUri.AbsolutePath.EndsWith("/extend", StringComparison.Ordinal) ? Problem(503, "unavailable", "e3") : null;
                Assert.Throws<MusterException>(() => la.ExtendAsync(TimeSpan.FromMinutes(5)).GetAwaiter().GetResult());
                AssertLostNow(s, "another lifetime (epoch e3, the session's e2)", la);
            }
        }

        /// <summary>The conformance tests' broken client (LateLoss) loses nothing at once.</summary>
        [Test]
        public async Task TheLateLossHookTurnsEveryRuleOff()
        {
            var b = new Brokers();
            using (var c = Client(b))
            {
                c.LateLoss = true;
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => IsList(req) ? ListPage("e2") : null;
                await c.ListPageAsync("lease://acme/**");
                b.Answer = (host, req) => IsList(req) ? Problem(503, "family_unavailable", "e1") : null;
                Assert.Throws<MusterException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                b.Answer = (host, req) => req.RequestUri.AbsolutePath.EndsWith("/acquire", StringComparison.Ordinal) ? Problem(404, "session_not_found", "e1") : null;
                Assert.Throws<MusterException>(() => s.AcquireAsync(B, TimeSpan.FromMinutes(5)).GetAwaiter().GetResult());
                AssertHeld(s, la);
                s.Dispose();
            }
        }

        /// <summary>A session lost this way sends no more keepalives.</summary>
        [Test]
        public async Task TheKeepaliveStopsWithThePromptLoss()
        {
            var b = new Brokers { SessionTtlMs = 1500 }; // a keepalive every 500 ms
            using (var c = Client(b))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromMilliseconds(1500));
                var la = await s.AcquireAsync(A, TimeSpan.FromMinutes(5));
                b.Answer = (host, req) => IsList(req) ? ListPage("e2") : null;
                await c.ListPageAsync("lease://acme/**");
                AssertLostNow(s, "e2", la);
                await Task.Delay(100); // a keepalive already under way when the loss came
                var sent = Volatile.Read(ref b.Keepalives);
                await Task.Delay(1300);
                Assert.AreEqual(sent, Volatile.Read(ref b.Keepalives), "keepalives after the loss");
                s.Dispose();
            }
        }
    }
}
