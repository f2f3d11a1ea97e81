using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Reflection;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// The .NET idioms of the SDK against a fake broker: transport failures wrapped in
    /// MusterTransportException, IAsyncEnumerable over listings and watch streams,
    /// IAsyncDisposable that does not block a thread, and no JSON library type in the
    /// public API. C# 8's await foreach / await using are written out as the compiler
    /// lowers them (mcs speaks C# 7).
    /// </summary>
    [TestFixture]
    public class IdiomTests
    {
        /// <summary>Answers every request with Answer(request).</summary>
        private sealed class Fake : HttpMessageHandler
        {
            internal Func<HttpRequestMessage, CancellationToken, Task<HttpResponseMessage>> Answer;
            internal int Requests;

            protected override Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, CancellationToken ct)
            {
                Interlocked.Increment(ref Requests);
                return Answer(req, ct);
            }
        }

        private static HttpResponseMessage Json(int status, string body, string type = "application/json")
        {
            var m = new HttpResponseMessage((HttpStatusCode)status) { Content = new StringContent(body, Encoding.UTF8, type) };
            m.Headers.Add("Muster-Epoch", "e1");
            return m;
        }

        private static string ItemJson(string route)
        {
            return "{\"route\":\"" + route + "\",\"owner_id\":\"w\",\"holder_incarnation\":\"h\",\"acquired_at\":\"2030-01-01T00:00:00Z\"," +
                "\"expires_at\":\"2030-01-01T00:01:00Z\",\"remaining_ms\":60000,\"renewals\":0}";
        }

        private const string SessionBody = "{\"session_id\":\"0123456789abcdef0123456789abcdef\",\"holder_incarnation\":\"h\",\"owner_id\":\"w\"," +
            "\"ttl_ms\":30000,\"expires_at\":\"2030-01-01T00:00:00Z\",\"epoch\":\"e1\"}";

        private static MusterClient Client(Fake f) { return new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(f) }); }

        /// <summary>What `await foreach (var x in e.WithCancellation(ct))` does.</summary>
        private static async Task<List<T>> AwaitForeach<T>(IAsyncEnumerable<T> e, CancellationToken ct = default(CancellationToken))
        {
            var got = new List<T>();
            var it = e.GetAsyncEnumerator(ct);
            try
            {
                while (await it.MoveNextAsync()) got.Add(it.Current);
            }
            finally
            {
                await it.DisposeAsync();
            }
            return got;
        }

        [Test]
        public void TransportFailuresAreMusterTransportExceptions()
        {
            var f = new Fake { Answer = (req, ct) => { throw new HttpRequestException("reset", new IOException("Connection reset by peer")); } };
            using (var c = Client(f))
            {
                var e = Assert.Throws<MusterTransportException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                Assert.IsInstanceOf<HttpRequestException>(e.InnerException);
                Assert.AreEqual(RetryAdvice.Backoff, e.Advice);
                Assert.IsTrue(e.IsRetryable);
                StringAssert.Contains("reset", e.Message);
            }
            // A body cut short while it is read.
            f.Answer = (req, ct) => Task.FromResult(new HttpResponseMessage(HttpStatusCode.OK) { Content = new StreamContent(new BrokenStream()) });
            using (var c = Client(f))
            {
                var e = Assert.Throws<MusterTransportException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                Assert.IsInstanceOf<IOException>(e.InnerException);
            }
            // The HttpClient's Timeout.
            f.Answer = async (req, ct) => { await Task.Delay(5000, ct); return Json(200, "{}"); };
            using (var c = new MusterClient("http://a:1", new MusterClientOptions { HttpClient = new HttpClient(f) { Timeout = TimeSpan.FromMilliseconds(50) } }))
            {
                var e = Assert.Throws<MusterTransportException>(() => c.ListPageAsync("lease://acme/**").GetAwaiter().GetResult());
                Assert.IsInstanceOf<TimeoutException>(e.InnerException);
            }
        }

        private sealed class BrokenStream : MemoryStream
        {
            public override int Read(byte[] buffer, int offset, int count) { throw new IOException("connection reset"); }
            public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken ct) { throw new IOException("connection reset"); }
        }

        [Test]
        public async Task ListIsAnAsyncEnumerable()
        {
            var f = new Fake
            {
                Answer = (req, ct) =>
                {
                    var page2 = req.RequestUri.Query.Contains("cursor=c2");
                    return Task.FromResult(Json(200, page2
                        ? "{\"items\":[" + ItemJson("lease://acme/jobs/c") + "],\"snapshot\":{\"epoch\":\"e1\",\"revision\":1}}"
                        : "{\"items\":[" + ItemJson("lease://acme/jobs/a") + "," + ItemJson("lease://acme/jobs/b") + "],\"next_cursor\":\"c2\",\"snapshot\":{\"epoch\":\"e1\",\"revision\":1}}"));
                },
            };
            using (var c = Client(f))
            {
                IAsyncEnumerable<Item> list = c.List("lease://acme/jobs/*");
                var want = new[] { "lease://acme/jobs/a", "lease://acme/jobs/b", "lease://acme/jobs/c" };
                CollectionAssert.AreEqual(want, (await AwaitForeach(list)).Select(i => i.Route).ToList());
                Assert.AreEqual(2, f.Requests);
                // Each enumeration lists afresh; WithCancellation's token bounds it.
                CollectionAssert.AreEqual(want, (await AwaitForeach(list, new CancellationTokenSource().Token)).Select(i => i.Route).ToList());
                Assert.AreEqual(4, f.Requests);
                var cfg = list.WithCancellation(CancellationToken.None).GetAsyncEnumerator();
                Assert.IsTrue(await cfg.MoveNextAsync());
                Assert.AreEqual("lease://acme/jobs/a", cfg.Current.Route);
                await cfg.DisposeAsync();
                // Disposing (await using) sends no further request.
                var it = list.GetAsyncEnumerator();
                Assert.IsTrue(await it.MoveNextAsync());
                await it.DisposeAsync();
                Assert.IsFalse(await it.MoveNextAsync());
                Assert.AreEqual(6, f.Requests);
                // A cancelled token stops it before any request.
                var cancelled = new CancellationTokenSource();
                cancelled.Cancel();
                Assert.Throws<OperationCanceledException>(() => AwaitForeach(list, cancelled.Token).GetAwaiter().GetResult());
                Assert.AreEqual(6, f.Requests);
            }
        }

        /// <summary>A watch stream whose body the test writes event by event.</summary>
        private sealed class Pipe : Stream
        {
            private readonly AsyncQueueFeed feed = new AsyncQueueFeed();
            internal void Write(string s) { feed.Add(Encoding.UTF8.GetBytes(s)); }
            internal void End() { feed.Add(null); }
            public override async Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken ct)
            {
                var b = await feed.TakeAsync(ct);
                if (b == null) { feed.Add(null); return 0; }
                Array.Copy(b, 0, buffer, offset, b.Length); // the test writes small events
                return b.Length;
            }
            public override int Read(byte[] buffer, int offset, int count) { return ReadAsync(buffer, offset, count, CancellationToken.None).GetAwaiter().GetResult(); }
            public override bool CanRead { get { return true; } }
            public override bool CanSeek { get { return false; } }
            public override bool CanWrite { get { return false; } }
            public override long Length { get { throw new NotSupportedException(); } }
            public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
            public override void Flush() { }
            public override long Seek(long o, SeekOrigin s) { throw new NotSupportedException(); }
            public override void SetLength(long v) { throw new NotSupportedException(); }
            public override void Write(byte[] b, int o, int n) { throw new NotSupportedException(); }
        }

        private sealed class AsyncQueueFeed
        {
            private readonly Queue<byte[]> q = new Queue<byte[]>();
            private readonly SemaphoreSlim n = new SemaphoreSlim(0);
            internal void Add(byte[] b) { lock (q) q.Enqueue(b); n.Release(); }
            internal async Task<byte[]> TakeAsync(CancellationToken ct) { await n.WaitAsync(ct); lock (q) return q.Dequeue(); }
        }

        private static string ChangeEvent(string route, long rev)
        {
            return "event: change\ndata: {\"subscription_id\":\"s1\",\"route\":\"" + route + "\",\"kind\":\"released\",\"revision\":" + rev + "}\n\n";
        }

        [Test]
        public async Task WatchChangesAreAnAsyncEnumerable()
        {
            var pipe = new Pipe();
            pipe.Write("event: snapshot\ndata: {\"epoch\":\"e1\",\"revision\":1,\"subscriptions\":[{\"id\":\"s1\",\"selector\":\"lease://acme/**\",\"items\":[]}]}\n\n");
            var f = new Fake
            {
                Answer = (req, ct) =>
                {
                    var m = new HttpResponseMessage(HttpStatusCode.OK) { Content = new StreamContent(pipe) };
                    m.Content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("text/event-stream");
                    return Task.FromResult(m);
                },
            };
            using (var c = Client(f))
            {
                var sub = await c.WatchAsync("lease://acme/**");
                pipe.Write(ChangeEvent("lease://acme/jobs/a", 2));
                pipe.Write(ChangeEvent("lease://acme/jobs/b", 3));
                pipe.Write("event: overflow\ndata: {\"revision\":3}\n\n");
                var got = await AwaitForeach(sub.ReadAllAsync());
                CollectionAssert.AreEqual(new long[] { 2, 3 }, got.Select(ch => ch.Revision).ToList());
                Assert.AreEqual("lease://acme/**", got[0].Selector);
                Assert.AreEqual("overflow", ((StreamEndedException)sub.Error).Reason);
                var sw = Stopwatch.StartNew();
                await sub.DisposeAsync();
                Assert.Less(sw.ElapsedMilliseconds, 2000);
                Assert.IsInstanceOf<StreamEndedException>(sub.Error);
            }
        }

        [Test]
        public async Task WaitingOnAWatchHoldsNoThreadAndHonoursItsToken()
        {
            var pipe = new Pipe();
            pipe.Write("event: snapshot\ndata: {\"epoch\":\"e1\",\"revision\":1,\"subscriptions\":[{\"id\":\"s1\",\"selector\":\"lease://acme/**\",\"items\":[]}]}\n\n");
            var f = new Fake
            {
                Answer = (req, ct) =>
                {
                    var m = new HttpResponseMessage(HttpStatusCode.OK) { Content = new StreamContent(pipe) };
                    m.Content.Headers.ContentType = new System.Net.Http.Headers.MediaTypeHeaderValue("text/event-stream");
                    return Task.FromResult(m);
                },
            };
            using (var c = Client(f))
            {
                var sub = await c.WatchAsync("lease://acme/**");
                using (var cts = new CancellationTokenSource())
                {
                    var it = sub.ReadAllAsync().GetAsyncEnumerator(cts.Token);
                    var next = it.MoveNextAsync().AsTask();
                    Assert.IsFalse(next.IsCompleted, "a change before any was sent");
                    pipe.Write(ChangeEvent("lease://acme/jobs/a", 2));
                    Assert.IsTrue(await next);
                    Assert.AreEqual(2, it.Current.Revision);
                    next = it.MoveNextAsync().AsTask();
                    cts.Cancel();
                    Assert.Throws<OperationCanceledException>(() => next.GetAwaiter().GetResult());
                    await it.DisposeAsync();
                }
                Assert.IsNull(sub.Error, "cancelling the enumeration leaves the stream open");
                pipe.Write(ChangeEvent("lease://acme/jobs/b", 3));
                Assert.AreEqual(3, (await sub.ReadAsync()).Revision);
                await sub.DisposeAsync();
                Assert.IsInstanceOf<MusterClosedException>(sub.Error);
            }
        }

        [Test]
        public async Task SessionDisposeAsyncBlocksNoThread()
        {
            var release = new TaskCompletionSource<bool>();
            var f = new Fake
            {
                Answer = async (req, ct) =>
                {
                    if (req.Method == HttpMethod.Delete)
                    {
                        await release.Task; // a broker that hangs
                        var m = new HttpResponseMessage(HttpStatusCode.NoContent);
                        m.Headers.Add("Muster-Epoch", "e1");
                        return m;
                    }
                    return Json(201, SessionBody);
                },
            };
            using (var c = Client(f))
            {
                var s = await c.CreateSessionAsync("w", TimeSpan.FromSeconds(30));
                IAsyncDisposable d = s;
                var sw = Stopwatch.StartNew();
                var done = d.DisposeAsync().AsTask();
                Assert.Less(sw.ElapsedMilliseconds, 1000, "DisposeAsync blocked its caller");
                Assert.IsFalse(done.IsCompleted, "DisposeAsync finished before the broker answered");
                Assert.IsTrue(SpinWait.SpinUntil(() => s.Ended.IsCancellationRequested, 2000), "the session ends locally before the broker answers");
                Assert.IsFalse(done.IsCompleted, "DisposeAsync finished before the broker answered");
                release.SetResult(true);
                Assert.AreSame(done, await Task.WhenAny(done, Task.Delay(5000)));
                Assert.IsInstanceOf<MusterClosedException>(s.Error);
            }
        }

        /// <summary>Newtonsoft.Json is how the SDK reads JSON, not part of its API: no public
        /// or protected member takes or gives one of its types.</summary>
        [Test]
        public void NoJsonLibraryTypeInThePublicApi()
        {
            var bad = new List<string>();
            var asm = typeof(MusterClient).Assembly;
            const BindingFlags all = BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Instance | BindingFlags.Static | BindingFlags.DeclaredOnly;
            Func<Type, bool> leaks = null;
            leaks = t => t != null && (t.Assembly.GetName().Name == "Newtonsoft.Json" ||
                (t.IsGenericType && t.GetGenericArguments().Any(a => leaks(a))) || (t.HasElementType && leaks(t.GetElementType())));
            foreach (var t in asm.GetExportedTypes())
            {
                if (leaks(t.BaseType) || t.GetInterfaces().Any(i => leaks(i))) bad.Add(t.Name);
                foreach (var m in t.GetMembers(all))
                {
                    var mb = m as MethodBase;
                    var visible = mb != null ? (mb.IsPublic || mb.IsFamily || mb.IsFamilyOrAssembly) : false;
                    var p = m as PropertyInfo;
                    if (p != null) visible = p.GetAccessors(false).Any(a => a.IsPublic || a.IsFamily);
                    var fi = m as FieldInfo;
                    if (fi != null) visible = fi.IsPublic || fi.IsFamily;
                    if (!visible) continue;
                    var types = new List<Type>();
                    if (mb != null) types.AddRange(mb.GetParameters().Select(x => x.ParameterType));
                    var mi = m as MethodInfo;
                    if (mi != null) types.Add(mi.ReturnType);
                    if (p != null) types.Add(p.PropertyType);
                    if (fi != null) types.Add(fi.FieldType);
                    if (types.Any(x => leaks(x) || (x.IsGenericType && x.GetGenericArguments().Any(a => a.IsGenericType && leaks(a)))) ||
                        types.Any(x => typeof(Delegate).IsAssignableFrom(x) && x.IsGenericType && x.GetGenericArguments().Any(a => leaks(a))))
                    {
                        bad.Add(t.Name + "." + m.Name);
                    }
                }
            }
            CollectionAssert.IsEmpty(bad);
        }

        [Test]
        public void RegisterJsonRefusesWhatIsNotJson()
        {
            var f = new Fake { Answer = (req, ct) => Task.FromResult(Json(201, "{\"name\":\"repo-1\",\"spec\":{\"url\":\"u\",\"at\":\"2026-01-01T00:00:00Z\"}}")) };
            using (var c = Client(f))
            {
                Assert.Throws<FormatException>(() => c.RegisterJsonAsync("fleet", "repo", "{\"url\":").GetAwaiter().GetResult());
                Assert.Throws<FormatException>(() => c.RegisterJsonAsync("fleet", "repo", "{} {}").GetAwaiter().GetResult());
                Assert.AreEqual(0, f.Requests, "nothing is sent");
                var s = c.RegisterJsonAsync("fleet", "repo", "{\"url\":\"u\",\"at\":\"2026-01-01T00:00:00Z\"}").GetAwaiter().GetResult();
                Assert.AreEqual("{\"url\":\"u\",\"at\":\"2026-01-01T00:00:00Z\"}", s.Json);
                Assert.AreEqual("2026-01-01T00:00:00Z", s.As<Dictionary<string, string>>()["at"]);
                Assert.AreEqual("2026-01-01T00:00:00Z", (string)s.As<Newtonsoft.Json.Linq.JObject>()["at"]); // dates stay strings
                Assert.Throws<FormatException>(() => s.As<List<int>>());
            }
        }
    }
}

namespace Muster.Client.Tests
{
    /// <summary>The observer's views as an async stream, against the real broker.</summary>
    [TestFixture, Category("Broker")]
    public class ObserverIdiomTests
    {
        [Test]
        public async Task ViewsAreAnAsyncEnumerable()
        {
            var h = SharedHarness.Get();
            using (var c = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["a"] }))
            {
                var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10));
                var o = c.Observe("lease://acme/idioms-views/*");
                using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(30)))
                {
                    var views = o.ViewsAsync().GetAsyncEnumerator(cts.Token);
                    bool acquired = false;
                    while (await views.MoveNextAsync())
                    {
                        var v = views.Current;
                        if (!v.Ready) continue;
                        if (!acquired)
                        {
                            await s.AcquireAsync("lease://acme/idioms-views/x", TimeSpan.FromSeconds(10));
                            acquired = true;
                            continue;
                        }
                        if (v.Items.Count == 1)
                        {
                            Assert.AreEqual("lease://acme/idioms-views/x", v.Items[0].Route);
                            break;
                        }
                    }
                    Assert.IsTrue(acquired);
                    // Disposing the observer ends the enumeration without an exception.
                    var rest = views.MoveNextAsync().AsTask();
                    var sw = System.Diagnostics.Stopwatch.StartNew();
                    await o.DisposeAsync();
                    Assert.Less(sw.ElapsedMilliseconds, 5000);
                    while (await rest) rest = views.MoveNextAsync().AsTask();
                    await views.DisposeAsync();
                    Assert.IsInstanceOf<MusterClosedException>(o.Error);
                }
                await s.DisposeAsync();
            }
        }
    }
}
