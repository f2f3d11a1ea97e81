using System;
using System.Diagnostics;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>A lease's local deadline (docs/client-operations.md, "The local deadline")
    /// against a fake broker whose acquire answers come after a delay, as a grant after a
    /// wait in the queue does: send + expires_after_request_ms when the answer has it,
    /// send + TTL when it does not.</summary>
    [TestFixture]
    public class DeadlineTests
    {
        private const string Route = "lease://acme/jobs/nightly";

        /// <summary>A broker that creates sessions, accepts keepalives and answers every
        /// acquire (single or batch) after Delay with Lease (a Lease JSON object).</summary>
        private sealed class FakeBroker : HttpMessageHandler
        {
            internal TimeSpan Delay;
            internal string Lease;

            protected override async Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, CancellationToken ct)
            {
                var path = req.RequestUri.AbsolutePath;
                if (req.Method == HttpMethod.Delete) return new HttpResponseMessage(HttpStatusCode.NoContent);
                if (path == "/v1/sessions")
                {
                    return Json(201, "{\"session_id\":\"0123456789abcdef0123456789abcdef\",\"holder_incarnation\":\"h\",\"owner_id\":\"w\"," +
                        "\"ttl_ms\":10000,\"expires_at\":\"2030-01-01T00:00:00Z\",\"epoch\":\"e\"}");
                }
                if (path.EndsWith("/keepalive", StringComparison.Ordinal)) return Json(200, "{}");
                await Task.Delay(Delay, ct).ConfigureAwait(false);
                if (path == "/v1/leases/batch")
                {
                    return Json(200, "{\"results\":[{\"op\":\"acquire\",\"route\":\"" + Route + "\",\"ok\":true,\"lease\":" + Lease + "}],\"revision\":9}");
                }
                if (path.EndsWith("/acquire", StringComparison.Ordinal)) return Json(200, Lease);
                return Json(404, "{\"type\":\"about:blank\",\"title\":\"Not Found\",\"status\":404,\"code\":\"not_found\"}");
            }

            private static HttpResponseMessage Json(int status, string body)
            {
                return new HttpResponseMessage((HttpStatusCode)status) { Content = new StringContent(body, Encoding.UTF8, "application/json") };
            }
        }

        /// <summary>A Lease answer: outcome, the broker's expiry (wall clock) and, unless
        /// null, expires_after_request_ms.</summary>
        private static string LeaseJson(string outcome, TimeSpan expiresIn, long? expiresAfterRequestMs)
        {
            var now = DateTimeOffset.UtcNow;
            return "{\"route\":\"" + Route + "\",\"fencing_token\":7,\"acquired_at\":\"" + now.ToString("o") + "\"," +
                "\"expires_at\":\"" + (now + expiresIn).ToString("o") + "\",\"renewals\":0,\"outcome\":\"" + outcome + "\"" +
                (expiresAfterRequestMs.HasValue ? ",\"expires_after_request_ms\":" + expiresAfterRequestMs.Value : "") + "}";
        }

        /// <summary>Acquires through a fake broker (single or batch), times it from just
        /// before the send, and checks the lease still holds at heldAt and is lost
        /// (LeaseExpired, from the local deadline) at lostAt, within slack after it.</summary>
        private static async Task CheckDeadline(FakeBroker b, bool batch, TimeSpan ttl, int heldAtMs, int lostAtMs)
        {
            using (var c = new MusterClient("http://broker:1", new MusterClientOptions { HttpClient = new HttpClient(b) }))
            using (var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(10)))
            {
                var sw = Stopwatch.StartNew();
                Lease l;
                if (batch)
                {
                    var res = await s.Batch().Acquire(Route, ttl).DoAsync();
                    Assert.IsNull(res[0].Error);
                    l = res[0].Lease;
                }
                else
                {
                    l = await s.AcquireAsync(Route, ttl);
                }
                var lost = new TaskCompletionSource<TimeSpan>();
                using (l.Lost.Register(() => lost.TrySetResult(sw.Elapsed)))
                {
                    if (heldAtMs > 0)
                    {
                        var left = TimeSpan.FromMilliseconds(heldAtMs) - sw.Elapsed;
                        if (left > TimeSpan.Zero) await Task.Delay(left);
                        Assert.IsNull(l.Error, "lost " + (lost.Task.IsCompleted ? lost.Task.Result.TotalMilliseconds + " ms" : "") +
                            " after the send, before " + heldAtMs + " ms");
                    }
                    // Generous slack after the deadline: the machine may be loaded.
                    var limit = TimeSpan.FromMilliseconds(lostAtMs + 1500);
                    Assert.AreSame(lost.Task, await Task.WhenAny(lost.Task, Task.Delay(limit - sw.Elapsed)),
                        "not lost within " + limit.TotalMilliseconds + " ms of the send");
                    var at = lost.Task.Result;
                    Assert.That(at >= TimeSpan.FromMilliseconds(lostAtMs - 50), "lost " + at.TotalMilliseconds + " ms after the send, before the deadline " + lostAtMs);
                }
                var e = (LeaseLostException)l.Error;
                Assert.AreEqual(ErrorCode.LeaseExpired, ((MusterException)e.InnerException).Code);
            }
        }

        /// <summary>The grant came 1.2 s after the send with a 1 s TTL: the broker's expiry is
        /// 2.2 s after it took the request up. send + TTL would lose the lease on arrival.</summary>
        [Test]
        public async Task AGrantAfterAWaitHoldsUntilSendPlusExpiresAfterRequest()
        {
            var b = new FakeBroker { Delay = TimeSpan.FromMilliseconds(1200), Lease = LeaseJson("acquired", TimeSpan.FromMilliseconds(1000), 2200) };
            await CheckDeadline(b, false, TimeSpan.FromMilliseconds(1000), 1900, 2200);
        }

        /// <summary>The same rule for a lease a batch acquired.</summary>
        [Test]
        public async Task ABatchGrantHoldsUntilSendPlusExpiresAfterRequest()
        {
            var b = new FakeBroker { Delay = TimeSpan.FromMilliseconds(1200), Lease = LeaseJson("acquired", TimeSpan.FromMilliseconds(1000), 2200) };
            await CheckDeadline(b, true, TimeSpan.FromMilliseconds(1000), 1900, 2200);
        }

        /// <summary>already_held: what is left of the existing grant, as the member says,
        /// however long the requested TTL and the broker's wall-clock expiry.</summary>
        [Test]
        public async Task AlreadyHeldHoldsWhatTheMemberLeaves()
        {
            var b = new FakeBroker { Delay = TimeSpan.Zero, Lease = LeaseJson("already_held", TimeSpan.FromMinutes(5), 600) };
            await CheckDeadline(b, false, TimeSpan.FromSeconds(30), 0, 600);
        }

        /// <summary>An older broker, without the member: send + TTL.</summary>
        [Test]
        public async Task WithoutTheMemberAGrantHoldsUntilSendPlusTtl()
        {
            var b = new FakeBroker { Delay = TimeSpan.FromMilliseconds(300), Lease = LeaseJson("acquired", TimeSpan.FromSeconds(1), null) };
            await CheckDeadline(b, false, TimeSpan.FromMilliseconds(1000), 700, 1000);
        }

        /// <summary>An older broker, already_held: send + TTL, but never more than what the
        /// broker's expiry leaves.</summary>
        [Test]
        public async Task WithoutTheMemberAlreadyHeldHoldsWhatTheExpiryLeaves()
        {
            var b = new FakeBroker { Delay = TimeSpan.Zero, Lease = LeaseJson("already_held", TimeSpan.FromMilliseconds(800), null) };
            await CheckDeadline(b, false, TimeSpan.FromSeconds(30), 0, 700);
        }
    }
}
