using System;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>The README's five-minute example written out with checks on what it sees (the
    /// README's own block runs as it stands in ReadmeTests).</summary>
    [TestFixture, Category("Broker")]
    public class ExampleTests
    {
        [Test]
        public async Task FiveMinutes()
        {
            var h = SharedHarness.Get();
            var ct = CancellationToken.None;
            long rendered = 0;
            Func<string, long, CancellationToken, Task> Render = async (doc, token, leaseCt) =>
            {
                await Task.Delay(10, leaseCt);
                rendered = token;
            };

            // --- as in README.md ---
            using (var c = new MusterClient(h.Broker,
                new MusterClientOptions { Token = h.Tokens["a"] }))
            {
                using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(30), ct))
                {
                    await s.WithLeaseAsync("lease://acme/example/doc-123", TimeSpan.FromSeconds(15),
                        async (lease, leaseCt) =>
                        {
                            await Render("doc-123", lease.FencingToken, leaseCt);
                        }, ct: ct);

                    await s.AcquireAsync("lease://acme/example/doc-456", TimeSpan.FromSeconds(15), null, ct);
                    int changed = 0;
                    using (var o = c.Observe("lease://acme/example/*",
                        new ObserveOptions { ShortestTtl = TimeSpan.FromSeconds(15) }))
                    {
                        o.Changed += (_, __) => Interlocked.Increment(ref changed); // may miss the bootstrap's
                        await o.ReadyAsync(ct);
                        CollectionAssert.AreEqual(new[] { "lease://acme/example/doc-456" }, o.View.Items.Select(it => it.Route).ToList());
                        Assert.AreEqual(s.HolderIncarnation, o.View.Items[0].HolderIncarnation);
                        Assert.AreEqual(TimeSpan.FromSeconds(7.5), o.ReconcileEvery);
                    }
                }
            }
            Assert.That(rendered > 0);
        }

        [Test]
        public async Task DisposeFromAChangedHandlerDoesNotDeadlock()
        {
            var h = SharedHarness.Get();
            using (var c = new MusterClient(h.Broker, new MusterClientOptions { Token = h.Tokens["a"] }))
            {
                var o = c.Observe("lease://acme/example-dispose/*");
                o.Changed += (_, __) => o.Dispose();
                // A change after the handler is attached (the bootstrap may have raised
                // Changed before): whichever comes first disposes the observer.
                using (var s = await c.CreateSessionAsync("worker-1", TimeSpan.FromSeconds(10)))
                {
                    await s.AcquireAsync("lease://acme/example-dispose/x", TimeSpan.FromSeconds(10));
                }
                var done = await Task.WhenAny(o.Stopped, Task.Delay(5000));
                Assert.AreSame(o.Stopped, done, "the observer did not stop");
                Assert.IsInstanceOf<MusterClosedException>(o.Error);
                o.Dispose(); // twice: fine
            }
        }
    }
}
