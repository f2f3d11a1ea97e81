using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    // IAsyncEnumerable and IAsyncDisposable over the SDK's streams: a listing, a watch
    // stream and an observer's views. C# 8 consumers write `await foreach` and
    // `await using`; older compilers (Mono's mcs is C# 7) call GetAsyncEnumerator,
    // MoveNextAsync and DisposeAsync by hand (README, "Idioms"). The interfaces come
    // from netstandard2.1 or, for netstandard2.0, from Microsoft.Bcl.AsyncInterfaces.

    /// <summary>An IAsyncEnumerable whose enumerators pull one item at a time from a step
    /// function (null: the end). start makes the step function of one enumeration.</summary>
    internal sealed class PullEnumerable<T> : IAsyncEnumerable<T> where T : class
    {
        private readonly CancellationToken ct;
        private readonly Func<Func<CancellationToken, Task<T>>> start;

        internal PullEnumerable(CancellationToken ct, Func<Func<CancellationToken, Task<T>>> start)
        {
            this.ct = ct;
            this.start = start;
        }

        public IAsyncEnumerator<T> GetAsyncEnumerator(CancellationToken ct = default(CancellationToken))
        {
            return new PullEnumerator<T>(this.ct, ct, start());
        }
    }

    /// <summary>One enumeration of a PullEnumerable: the step function under both tokens
    /// (the one the enumerable was made with and the one given to GetAsyncEnumerator,
    /// e.g. by WithCancellation).</summary>
    internal sealed class PullEnumerator<T> : IAsyncEnumerator<T> where T : class
    {
        private readonly Func<CancellationToken, Task<T>> step;
        private readonly CancellationTokenSource linked;
        private readonly CancellationToken ct;
        private bool done;

        internal PullEnumerator(CancellationToken a, CancellationToken b, Func<CancellationToken, Task<T>> step)
        {
            this.step = step;
            if (a.CanBeCanceled && b.CanBeCanceled)
            {
                linked = CancellationTokenSource.CreateLinkedTokenSource(a, b);
                ct = linked.Token;
            }
            else
            {
                ct = a.CanBeCanceled ? a : b;
            }
        }

        public T Current { get; private set; }

        public ValueTask<bool> MoveNextAsync()
        {
            return new ValueTask<bool>(NextAsync());
        }

        private async Task<bool> NextAsync()
        {
            if (done) return false;
            ct.ThrowIfCancellationRequested();
            var v = await step(ct).ConfigureAwait(false);
            Current = v;
            done = v == null;
            return !done;
        }

        public ValueTask DisposeAsync()
        {
            done = true;
            Current = null;
            if (linked != null) linked.Dispose();
            return default(ValueTask);
        }
    }

    public sealed partial class Subscription : IAsyncDisposable
    {
        /// <summary>
        /// The changes as an async stream, in revision order, ending (without an
        /// exception) when the stream ends: Error then says why, e.g. a
        /// StreamEndedException "overflow". ct (and the token given to
        /// GetAsyncEnumerator, e.g. by WithCancellation) stops the waiting with
        /// OperationCanceledException and leaves the stream open. C# 8:
        /// <c>await foreach (var ch in sub.ReadAllAsync(ct)) …</c>. One reader at a time:
        /// every change is delivered once, to whichever enumeration reads it.
        /// </summary>
        public IAsyncEnumerable<Change> ReadAllAsync(CancellationToken ct = default(CancellationToken))
        {
            return new PullEnumerable<Change>(ct, () => ReadAsync);
        }

        /// <summary>Dispose without blocking a thread: ends the stream and completes when its
        /// reader stopped. Never throws.</summary>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(CloseAsync());
        }
    }

    public sealed partial class InventoryObserver : IAsyncDisposable
    {
        /// <summary>
        /// The observer's views as an async stream: the current View at once, then a new
        /// one after each change (of the items, of Ready or of Error). Changes that come
        /// faster than the consumer reads are coalesced: it gets the latest view, never a
        /// backlog. A view may be not Ready (check View.Ready before relying on it). The
        /// stream ends when the observer is disposed (or its token ends) and throws the
        /// observer's Error when it stopped on an error no retry fixes (as ReadyAsync). C# 8:
        /// <c>await foreach (var v in o.ViewsAsync(ct)) if (v.Ready) …</c>.
        /// </summary>
        public IAsyncEnumerable<ObserverView> ViewsAsync(CancellationToken ct = default(CancellationToken))
        {
            return new PullEnumerable<ObserverView>(ct, () =>
            {
                Task next = null;
                return async t =>
                {
                    if (next != null) await Tasks.WaitAsync(next, t).ConfigureAwait(false);
                    lock (mu)
                    {
                        if (closed)
                        {
                            if (error is MusterClosedException || error is OperationCanceledException) return null;
                            throw error;
                        }
                        next = changed.Task;
                        return View;
                    }
                };
            });
        }

        /// <summary>Dispose without blocking a thread: stops the observer (its stream is
        /// closed and any request in flight cancelled) and completes when it has stopped.
        /// Never throws.</summary>
        public ValueTask DisposeAsync()
        {
            Close();
            return new ValueTask(raising ? Task.CompletedTask : stopped.Task);
        }
    }

    public sealed partial class Session : IAsyncDisposable
    {
        /// <summary>Dispose without blocking a thread: CloseAsync bounded by 5 s, errors
        /// swallowed (the broker ends the session at its TTL at the latest). C# 8:
        /// <c>await using (var s = await c.CreateSessionAsync(…))</c>.</summary>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(CloseQuietlyAsync());
        }

        private async Task CloseQuietlyAsync()
        {
            using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(5)))
            {
                try { await CloseAsync(cts.Token).ConfigureAwait(false); } catch (Exception) { }
            }
        }
    }
}
