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
    /// stopping) sends no further request. The shape of IAsyncEnumerator, for
    /// .NET Standard 2.0:
    /// <code>
    /// using (var it = client.List("lease://acme/renderers/*"))
    ///     while (await it.MoveNextAsync(ct)) Console.WriteLine(it.Current.Route);
    /// </code>
    /// A failed page throws from MoveNextAsync; CursorExpired and EpochChanged mean
    /// "list again from the start". Not safe for concurrent use.
    /// </summary>
    public sealed class ListIterator : IDisposable
    {
        private readonly MusterClient c;
        private readonly string selector;
        private readonly ListOptions opts;
        private IReadOnlyList<Item> page = new List<Item>();
        private int next;
        private bool last, disposed;

        internal ListIterator(MusterClient c, string selector, ListOptions options)
        {
            this.c = c;
            this.selector = selector;
            opts = new ListOptions { Limit = options != null ? options.Limit : 0, Cursor = options != null ? options.Cursor : null };
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
