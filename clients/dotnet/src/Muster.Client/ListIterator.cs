using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    /// <summary>
    /// A lazy, closable iterator over the held leases matching a selector: one request
    /// per page, sent only when the previous page is used up, every item from one
    /// snapshot (no duplicate, no omission while leases change). Dispose (or just
    /// stopping) sends no further request. It is an IAsyncEnumerable&lt;Item&gt; (C# 8):
    /// <code>
    /// await foreach (var it in client.List("lease://acme/renderers/*").WithCancellation(ct))
    ///     Console.WriteLine(it.Route);
    /// </code>
    /// each enumeration lists afresh from the options' cursor. With a C# 7 compiler
    /// (Mono's mcs), iterate the ListIterator itself:
    /// <code>
    /// using (var it = client.List("lease://acme/renderers/*"))
    ///     while (await it.MoveNextAsync(ct)) Console.WriteLine(it.Current.Route);
    /// </code>
    /// A failed page throws from MoveNextAsync; CursorExpired and EpochChanged mean
    /// "list again from the start". Not safe for concurrent use.
    /// </summary>
    public sealed class ListIterator : IDisposable, IAsyncDisposable, IAsyncEnumerable<Item>, IAsyncEnumerator<Item>
    {
        private readonly MusterClient c;
        private readonly string selector;
        private readonly ListOptions start;
        private readonly ListOptions opts;
        private readonly CancellationToken enumCt;
        private IReadOnlyList<Item> page = new List<Item>();
        private int next;
        private bool last, disposed;

        internal ListIterator(MusterClient c, string selector, ListOptions options)
            : this(c, selector, options, CancellationToken.None)
        {
        }

        private ListIterator(MusterClient c, string selector, ListOptions options, CancellationToken ct)
        {
            this.c = c;
            this.selector = selector;
            start = new ListOptions { Limit = options != null ? options.Limit : 0, Cursor = options != null ? options.Cursor : null };
            opts = new ListOptions { Limit = start.Limit, Cursor = start.Cursor };
            enumCt = ct;
        }

        /// <summary>A new enumeration of the same listing, from the options' cursor, whose
        /// MoveNextAsync() is bounded by ct (what await foreach and WithCancellation
        /// call).</summary>
        public IAsyncEnumerator<Item> GetAsyncEnumerator(CancellationToken ct = default(CancellationToken))
        {
            return new ListIterator(c, selector, start, ct);
        }

        ValueTask<bool> IAsyncEnumerator<Item>.MoveNextAsync()
        {
            return new ValueTask<bool>(MoveNextAsync(enumCt));
        }

        /// <summary>Dispose, as IAsyncDisposable: no further request is sent.</summary>
        public ValueTask DisposeAsync()
        {
            Dispose();
            return default(ValueTask);
        }

        /// <summary>The current item (after MoveNextAsync answered true).</summary>
        public Item Current { get; private set; }

        /// <summary>The number of page requests sent so far.</summary>
        public int Requests { get; private set; }

        /// <summary>Advances to the next item, reading the next page when the current one is
        /// used up; false after the last item or once disposed.</summary>
        public async Task<bool> MoveNextAsync(CancellationToken ct = default(CancellationToken))
        {
            while (!disposed)
            {
                if (next < page.Count)
                {
                    Current = page[next++];
                    return true;
                }
                if (last) break;
                Requests++;
                var p = await c.ListPageAsync(selector, opts, ct).ConfigureAwait(false);
                page = p.Items;
                next = 0;
                last = p.NextCursor == null;
                opts.Cursor = p.NextCursor;
            }
            Current = null;
            return false;
        }

        /// <summary>Stops the iteration: no further request is sent.</summary>
        public void Dispose() { disposed = true; }
    }

    public sealed partial class MusterClient
    {
        /// <summary>A lazy, closable iterator over the held leases matching selector (see
        /// ListIterator); nothing is sent before the first MoveNextAsync.</summary>
        public ListIterator List(string selector, ListOptions options = null)
        {
            return new ListIterator(this, selector, options);
        }
    }
}
