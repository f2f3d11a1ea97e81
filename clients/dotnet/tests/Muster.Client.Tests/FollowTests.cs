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

            protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, CancellationToken ct)
            {
                var body = req.Content == null ? "" : await req.Content.ReadAsStringAsync().ConfigureAwait(false);
                var auth = req.Headers.Authorization == null ? "" : req.Headers.Authorization.ToString();
                var host = req.RequestUri.Authority;
                lock (Seen) Seen.Add(host + " " + req.Method + " " + body + " " + auth);
                if (req.Method == HttpMethod.Delete) return new HttpResponseMessage(HttpStatusCode.NoContent);
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
                    Assert.Throws<HttpRequestException>(() => c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult());
                }
            }
            var hosts = b.Seen.Where(x => !x.Contains(" DELETE ")).Select(x => x.Split(' ')[0]).ToArray();
            Assert.AreEqual(new[] { "owner:2", "first:1", "owner:2" }, hosts, string.Join("\n", b.Seen));
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
