using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    [TestFixture]
    public class AsyncQueueTests
    {
        [Test]
        public async Task AnAbandonedWaitLosesNothing()
        {
            var q = new AsyncQueue<int>(4);
            using (var cts = new CancellationTokenSource())
            {
                var wait = q.WaitToReadAsync(cts.Token);
                cts.Cancel();
                Assert.Throws<OperationCanceledException>(() => wait.GetAwaiter().GetResult());
            }
            var abandoned = q.WaitToReadAsync(CancellationToken.None); // never awaited
            Assert.IsTrue(await q.WriteAsync(1, CancellationToken.None));
            Assert.IsTrue(await q.WriteAsync(2, CancellationToken.None));
            Assert.IsTrue(await abandoned);
            int v;
            Assert.IsTrue(q.TryRead(out v));
            Assert.AreEqual(1, v);
            Assert.IsTrue(q.TryRead(out v));
            Assert.AreEqual(2, v);
            Assert.IsFalse(q.TryRead(out v));
        }

        [Test]
        public async Task AFullQueueMakesTheWriterWait()
        {
            var q = new AsyncQueue<int>(2);
            await q.WriteAsync(1, CancellationToken.None);
            await q.WriteAsync(2, CancellationToken.None);
            var third = q.WriteAsync(3, CancellationToken.None);
            await Task.Delay(50);
            Assert.IsFalse(third.IsCompleted, "wrote past the capacity");
            int v;
            Assert.IsTrue(q.TryRead(out v));
            Assert.IsTrue(await third);
            using (var cts = new CancellationTokenSource(50))
            {
                try
                {
                    await q.WriteAsync(4, cts.Token);
                    Assert.Fail("wrote past the capacity");
                }
                catch (OperationCanceledException) { }
            }
        }

        [Test]
        public async Task CompleteDrainsThenEnds()
        {
            var q = new AsyncQueue<int>(8);
            await q.WriteAsync(1, CancellationToken.None);
            q.Complete();
            Assert.IsFalse(await q.WriteAsync(2, CancellationToken.None));
            Assert.IsTrue(await q.WaitToReadAsync(CancellationToken.None));
            int v;
            Assert.IsTrue(q.TryRead(out v));
            Assert.IsFalse(await q.WaitToReadAsync(CancellationToken.None));
        }

        [Test]
        public void ConcurrentProducerAndConsumerKeepOrder()
        {
            var q = new AsyncQueue<int>(3);
            const int n = 20000;
            var producer = Task.Run(async () =>
            {
                for (int i = 0; i < n; i++) await q.WriteAsync(i, CancellationToken.None);
                q.Complete();
            });
            var got = new List<int>();
            var consumer = Task.Run(async () =>
            {
                while (await q.WaitToReadAsync(CancellationToken.None))
                {
                    int v;
                    while (q.TryRead(out v)) got.Add(v);
                }
            });
            Assert.IsTrue(Task.WaitAll(new[] { producer, consumer }, 20000));
            Assert.AreEqual(n, got.Count);
            for (int i = 0; i < n; i++) Assert.AreEqual(i, got[i]);
        }
    }
}
