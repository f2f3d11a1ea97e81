using System;
using System.Collections.Generic;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>Following wrong_broker (docs/placement.md) against fake brokers: an
    /// HttpMessageHandler that answers per host.</summary>
    [TestFixture]
    public class FollowTests
    {
        private sealed class Brokers : HttpMessageHandler
        {
            internal readonly List<string> Seen = new List<string>(); // "host METHOD body auth"
            internal Func<string, HttpResponseMessage> Answer;
            internal Func<string, TimeSpan> Hang; // how long a host takes to answer (optional; cancellable)

            protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, CancellationToken ct)
            {
                var body = req.Content == null ? "" : await req.Content.ReadAsStringAsync().ConfigureAwait(false);
                var auth = req.Headers.Authorization == null ? "" : req.Headers.Authorization.ToString();
                var host = req.RequestUri.Authority;
                lock (Seen) Seen.Add(host + " " + req.Method + " " + body + " " + auth);
                if (req.Method == HttpMethod.Delete) return new HttpResponseMessage(HttpStatusCode.NoContent);
                if (Hang != null) await Task.Delay(Hang(host), ct).ConfigureAwait(false);
                return Answer(host);
            }
        }

        private static HttpResponseMessage Json(int status, string body, string type = "application/json")
        {
            return new HttpResponseMessage((HttpStatusCode)status) { Content = new StringContent(body, Encoding.UTF8, type) };
        }

        private static HttpResponseMessage Misdirect(string owner)
        {
            return Json(421, "{\"type\":\"about:blank\",\"title\":\"Misdirected Request\",\"status\":421,\"code\":\"wrong_broker\",\"owner\":\"" + owner + "\"}",
                "application/problem+json");
        }

        private const string SessionBody = "{\"session_id\":\"0123456789abcdef0123456789abcdef\",\"holder_incarnation\":\"h\",\"owner_id\":\"w\"," +
            "\"ttl_ms\":10000,\"expires_at\":\"2030-01-01T00:00:00Z\",\"epoch\":\"e\"}";

        [Test]
        public void FollowsWithTheBodyAndTokenThenGoesStraightToTheOwner()
        {
            var b = new Brokers { Answer = host => host == "owner:2" ? Json(201, SessionBody) : Misdirect("http://owner:2") };
            using (var c = new MusterClient("http://first:1", new MusterClientOptions { Token = "t", HttpClient = new HttpClient(b) }))
            {
                var s = c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult();
                Assert.AreEqual("0123456789abcdef0123456789abcdef", s.Id);
                s.CloseAsync().GetAwaiter().GetResult();
            }
            var hosts = b.Seen.Select(x => x.Split(' ')[0]).ToList();
            Assert.AreEqual(new[] { "first:1", "owner:2", "owner:2" }, hosts.Take(3).ToArray(), string.Join("\n", b.Seen));
            Assert.AreEqual(b.Seen[0].Substring("first:1".Length), b.Seen[1].Substring("owner:2".Length), "the body and token are sent again");
            StringAssert.Contains("\"owner_id\":\"w\"", b.Seen[1]);
            StringAssert.Contains("Bearer t", b.Seen[1]);
        }

        [Test]
        public void GivesUpAfterMaxFollowsAndWithoutFollowDoesNotFollow()
        {
            var b = new Brokers { Answer = host => Misdirect(host == "a:1" ? "http://b:2" : "http://a:1") };
            using (var c = new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                var e = Assert.Throws<MusterException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                Assert.AreEqual(ErrorCode.WrongBroker, e.Code);
                Assert.IsNotEmpty(e.Owner);
                Assert.AreEqual(1 + MusterClient.MaxFollows, b.Seen.Count);
            }
            var b2 = new Brokers { Answer = host => Misdirect("http://b:2") };
            using (var c = new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(b2), WithoutFollow = true }))
            {
                var e = Assert.Throws<MusterException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                Assert.AreEqual(ErrorCode.WrongBroker, e.Code);
                Assert.AreEqual("http://b:2", e.Owner);
                Assert.AreEqual(1, b2.Seen.Count);
            }
        }

        [Test]
        public void AnOwnerThatStopsAnsweringIsForgotten()
        {
            bool up = true;
            var b = new Brokers
            {
                Answer = host =>
                {
                    if (host != "owner:2") return Misdirect("http://owner:2");
                    if (!up) throw new HttpRequestException("refused");
                    return Json(201, SessionBody);
                },
            };
            using (var c = new MusterClient("http://first:1", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
                lock (b.Seen) b.Seen.Clear();
                up = false;
                for (int i = 0; i < 2; i++)
                {
                    Assert.Throws<MusterTransportException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                }
            }
            var hosts = b.Seen.Where(x => !x.Contains(" DELETE ")).Select(x => x.Split(' ')[0]).ToArray();
            Assert.AreEqual(new[] { "owner:2", "first:1", "owner:2" }, hosts, string.Join("\n", b.Seen));
        }

        private static Exception Refused()
        {
            return new HttpRequestException("Connection refused", new System.Net.Sockets.SocketException((int)System.Net.Sockets.SocketError.ConnectionRefused));
        }

        private static HttpResponseMessage Unavailable()
        {
            return Json(503, "{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503,\"code\":\"family_unavailable\"}",
                "application/problem+json");
        }

        private static string[] Hosts(Brokers b)
        {
            lock (b.Seen) return b.Seen.Where(x => !x.Contains(" DELETE ")).Select(x => x.Split(' ')[0]).ToArray();
        }

        /// <summary>Several brokers: a first base URL whose connection is refused is left
        /// for the next one, the request resent there at once, and later requests go
        /// straight there.</summary>
        [Test]
        public void ARefusedFirstBaseUrlIsLeftForTheNext()
        {
            var b = new Brokers
            {
                Answer = host =>
                {
                    if (host == "dead:1") throw Refused();
                    return Json(201, SessionBody);
                },
            };
            using (var c = new MusterClient(new[] { "http://dead:1", "http://b:2" }, new MusterClientOptions { Token = "t", HttpClient = new HttpClient(b) }))
            {
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "dead:1", "b:2", "b:2" }, Hosts(b), string.Join("\n", b.Seen));
            Assert.AreEqual(b.Seen[0].Substring("dead:1".Length), b.Seen[1].Substring("b:2".Length), "the body and token are sent again");
        }

        /// <summary>family_unavailable moves the client on (the comma-separated form here)
        /// and the request is resent at once; the next request starts at the new broker.</summary>
        [Test]
        public void FamilyUnavailableMovesOnAndResends()
        {
            var b = new Brokers { Answer = host => host == "a:1" ? Unavailable() : Json(201, SessionBody) };
            using (var c = new MusterClient("http://a:1,http://b:2", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "a:1", "b:2", "b:2" }, Hosts(b), string.Join("\n", b.Seen));
        }

        /// <summary>With one base URL, family_unavailable from it is returned (there is
        /// nowhere else to go); from an owner, the owner is forgotten and the base URL
        /// asked again.</summary>
        [Test]
        public void OneBaseUrlFamilyUnavailableIsReturnedAndAnOwnersIsLeft()
        {
            var b = new Brokers { Answer = host => Unavailable() };
            using (var c = new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                var e = Assert.Throws<MusterException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                Assert.AreEqual(ErrorCode.FamilyUnavailable, e.Code);
            }
            Assert.AreEqual(new[] { "a:1" }, Hosts(b));
            int n = 0;
            var b2 = new Brokers
            {
                Answer = host => host == "owner:2" ? Unavailable() : Interlocked.Increment(ref n) == 1 ? Misdirect("http://owner:2") : Json(201, SessionBody),
            };
            using (var c = new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(b2) }))
            {
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "a:1", "owner:2", "a:1" }, Hosts(b2), string.Join("\n", b2.Seen));
        }

        /// <summary>A failure after the request may have been sent (here a reset, not a
        /// refusal) is returned, not resent; it still moves the client on, so the caller's
        /// retry goes to the next broker.</summary>
        [Test]
        public void AFailureAfterSendingIsReturnedButMovesOn()
        {
            var b = new Brokers
            {
                Answer = host =>
                {
                    if (host == "a:1") throw new HttpRequestException("reset", new System.IO.IOException("Connection reset by peer"));
                    return Json(201, SessionBody);
                },
            };
            using (var c = new MusterClient("http://a:1,http://b:2", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                Assert.Throws<MusterTransportException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "a:1", "b:2" }, Hosts(b), string.Join("\n", b.Seen));
        }

        /// <summary>Every broker refusing: one request is sent at most to every base URL
        /// once plus MaxFollows more, then the connection error is returned.</summary>
        [Test]
        public void RefusalsEverywhereAreBounded()
        {
            var b = new Brokers { Answer = host => { throw Refused(); } };
            using (var c = new MusterClient(new[] { "http://a:1", "http://b:2" }, new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                var e = Assert.Throws<MusterTransportException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                Assert.IsTrue(MusterClient.NotSent(e));
            }
            Assert.AreEqual(new[] { "a:1", "b:2", "a:1", "b:2" }, Hosts(b));
        }

        /// <summary>Requests failing at the same broker at the same time move the client
        /// once: after two concurrent failures at a:1 the next request goes to b:2, not
        /// c:3.</summary>
        [Test]
        public void ConcurrentFailuresMoveOnOnce()
        {
            var both = new CountdownEvent(2);
            var b = new Brokers
            {
                Answer = host =>
                {
                    if (host != "a:1") return Json(201, SessionBody);
                    both.Signal();
                    both.Wait(TimeSpan.FromSeconds(5));
                    throw new HttpRequestException("reset");
                },
            };
            using (var c = new MusterClient("http://a:1,http://b:2,http://c:3", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            {
                var two = new[] { 0, 1 }.Select(_ => Task.Run(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)))).ToArray();
                foreach (var t in two) Assert.Throws<MusterTransportException>(() => t.GetAwaiter().GetResult());
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "a:1", "a:1", "b:2" }, Hosts(b), string.Join("\n", b.Seen));
        }

        /// <summary>The caller's own cancellation is no broker's failure: the client stays.</summary>
        [Test]
        public void TheCallersCancellationMovesNothing()
        {
            int slow = 0;
            var b = new Brokers
            {
                Answer = host => Json(201, SessionBody),
                Hang = host => host == "a:1" && Interlocked.Exchange(ref slow, 1) == 0 ? TimeSpan.FromSeconds(30) : TimeSpan.Zero,
            };
            using (var c = new MusterClient("http://a:1,http://b:2", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            using (var cts = new CancellationTokenSource(TimeSpan.FromMilliseconds(100)))
            {
                Assert.Catch<OperationCanceledException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10), cts.Token).GetAwaiter().GetResult());
                c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult().Dispose();
            }
            Assert.AreEqual(new[] { "a:1", "a:1" }, Hosts(b), string.Join("\n", b.Seen));
        }

        [Test]
        public void SeveralBaseUrlsAreParsedAndValidated()
        {
            using (var c = new MusterClient(" http://a:1/ ,https://b.example:7420"))
            {
                Assert.AreEqual(new[] { "http://a:1", "https://b.example:7420" }, c.BaseUrls.ToArray());
                Assert.AreEqual("http://a:1", c.BaseUrl);
            }
            using (var c = new MusterClient(new List<string> { "http://a:1", "http://b:2/" }))
            {
                Assert.AreEqual(new[] { "http://a:1", "http://b:2" }, c.BaseUrls.ToArray());
            }
            foreach (var bad in new[] { "http://a:1,", ",http://a:1", "http://a:1,ftp://b", "http://a:1,b:2", "http://a:1,,http://b:2" })
            {
                var e = Assert.Throws<ArgumentException>(() => new MusterClient(bad), bad);
                StringAssert.Contains("want http(s)://host[:port], or several separated by commas", e.Message);
            }
            foreach (var bad in new[] { new string[0], new[] { "http://a:1", null }, new[] { "http://a:1", "http://" } })
            {
                var e = Assert.Throws<ArgumentException>(() => new MusterClient(bad));
                StringAssert.Contains("want http(s)://host[:port]", e.Message);
            }
            Assert.Throws<ArgumentException>(() => new MusterClient((IEnumerable<string>)null));
        }

        [TestCase("{\"code\":\"wrong_broker\",\"owner\":\"http://10.0.0.2:7420\"}", "application/problem+json", true)]
        [TestCase("{\"code\":\"wrong_broker\",\"owner\":\"javascript:alert(1)\"}", "application/problem+json", false)]
        [TestCase("{\"code\":\"wrong_broker\"}", "application/problem+json", false)]
        [TestCase("{\"code\":\"not_owner\",\"owner\":\"http://x\"}", "application/problem+json", false)]
        [TestCase("not json", "text/plain", false)]
        public void MisdirectedToFollowsOnlyAnHttpOwnerOfWrongBroker(string body, string type, bool ok)
        {
            Assert.AreEqual(ok, MusterClient.MisdirectedTo(type, body) != null);
        }
    }
}
