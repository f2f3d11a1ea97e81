using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    // The bootstrap of design §9: one attempt, run by the observer's loop at most one
    // at a time.
    public sealed partial class InventoryObserver
    {
        /// <summary>
        /// Opens a stream, pages the rest of its marker's snapshot while buffering the
        /// stream's changes, and builds the view. On success the stream stays open for
        /// the caller. Never throws: failures are in the result.
        /// </summary>
        private async Task<BootResult> BootstrapAsync(CancellationToken ct)
        {
            Subscription sub;
            try
            {
                sub = await c.WatchAsync(null, new[] { Selector }, ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                return new BootResult { Error = e };
            }
            Task pages = null;
            CancellationTokenSource pcts = null;
            try
            {
                var m = sub.Marker;
                if (m.Selectors.Count != 1)
                {
                    throw new System.IO.InvalidDataException(string.Format("muster: the marker has {0} subscriptions, want 1", m.Selectors.Count));
                }
                var its = new Dictionary<string, Item>(StringComparer.Ordinal);
                foreach (var it in m.Selectors[0].Items) its[it.Route] = it;
                var buf = new List<Change>();
                pcts = CancellationTokenSource.CreateLinkedTokenSource(ct);
                pages = PageRestAsync(m, its, (faults & ObserverFaults.UncancellablePages) != 0 ? CancellationToken.None : pcts.Token);
                while (true)
                {
                    var readable = sub.WaitToReadAsync(ct);
                    await Task.WhenAny(readable, pages).ConfigureAwait(false);
                    if (pages.IsCompleted)
                    {
                        var p = pages;
                        pages = null;
                        await p.ConfigureAwait(false); // throws the paging error
                        break;
                    }
                    if (!await readable.ConfigureAwait(false))
                    {
                        throw sub.Error ?? new StreamEndedException("the connection ended", null);
                    }
                    Change ch;
                    while (sub.TryRead(out ch))
                    {
                        buf.Add(ch);
                        if (buf.Count > MaxBuffered)
                        {
                            throw new System.IO.InvalidDataException(string.Format("muster: more than {0} changes while paging a snapshot", MaxBuffered));
                        }
                    }
                }
                pcts.Dispose();
                if ((faults & ObserverFaults.IgnoreSnapshot) != 0) its.Clear();
                var rev = m.Revision;
                if ((faults & ObserverFaults.SkipBufferedChanges) == 0)
                {
                    foreach (var ch in buf)
                    {
                        if (ch.Revision > m.Revision && !Dropped(ch))
                        {
                            ApplyTo(its, ch);
                            if (ch.Revision > rev) rev = ch.Revision;
                        }
                    }
                }
                return new BootResult { Sub = sub, Items = its, Epoch = m.Epoch, Revision = rev };
            }
            catch (Exception e)
            {
                if (pages != null)
                {
                    // The pager owns its until it returns: stop it and wait for it.
                    pcts.Cancel();
                    try { await pages.ConfigureAwait(false); } catch (Exception) { }
                }
                if (pcts != null) pcts.Dispose();
                sub.Dispose();
                return new BootResult { Error = e };
            }
        }

        /// <summary>A change a broken test variant drops.</summary>
        private bool Dropped(Change ch)
        {
            return (ch.Kind == ChangeKinds.Expired && (faults & ObserverFaults.IgnoreExpired) != 0) ||
                (ch.Kind == ChangeKinds.SessionClosed && (faults & ObserverFaults.IgnoreSessionClosed) != 0);
        }

        /// <summary>Reads the rest of the marker's snapshot into its (owned by the caller
        /// only once this completed).</summary>
        private async Task PageRestAsync(Marker m, Dictionary<string, Item> its, CancellationToken ct)
        {
            var cursor = m.Selectors[0].NextCursor;
            while (!string.IsNullOrEmpty(cursor))
            {
                var p = await c.ListPageAsync(Selector, new ListOptions { Limit = pageSize, Cursor = cursor }, ct).ConfigureAwait(false);
                if (p.Epoch != m.Epoch) throw new MusterException(ErrorCode.EpochChanged, "the broker restarted during the bootstrap");
                foreach (var it in p.Items) its[it.Route] = it;
                cursor = p.NextCursor;
            }
        }

        private static void ApplyTo(Dictionary<string, Item> its, Change ch)
        {
            if (ch.Kind == ChangeKinds.Acquired && ch.Item != null) its[ch.Route] = ch.Item;
            else its.Remove(ch.Route);
        }
    }

    public sealed partial class MusterClient
    {
        /// <summary>
        /// Starts an observer of selector and returns at once; use ReadyAsync, Ready and
        /// Changed to learn when its view is usable.
        ///
        /// The view is advisory: it can be stale at any moment, and it never grants
        /// anything (its items are plain values; only Session.AcquireAsync makes a Lease).
        /// It becomes not ready, and a fresh bootstrap starts at once, when the stream
        /// ends for any reason: overflow (this process read too slowly), supersede, a
        /// dropped connection, a broker restart (a new epoch: the new view replaces the
        /// old one entirely). Failed bootstraps are retried with backoff from 50 ms
        /// doubling to 2 s, jittered; only one bootstrap runs at a time. While ready, the
        /// observer also re-bootstraps in the background every reconciliation interval
        /// (by default clamp(shortest TTL / 2, 5 s, 60 s) ±20%), replacing the view when
        /// the new one is installed, because changes are hints that a broker does not
        /// replay.
        ///
        /// An error no retry can fix (InvalidSelector, Forbidden, Unauthenticated,
        /// NotFound, NotImplemented, …) stops the observer: Stopped completes and Error
        /// says why. ct bounds the observer's life like Dispose. Invalid options throw
        /// a MusterException with InvalidRequest.
        /// </summary>
        public InventoryObserver Observe(string selector, ObserveOptions options = null, CancellationToken ct = default(CancellationToken))
        {
            return Observe(selector, options, ObserverFaults.None, ct);
        }

        internal InventoryObserver Observe(string selector, ObserveOptions options, ObserverFaults faults, CancellationToken ct)
        {
            options = options ?? new ObserveOptions();
            options.Validate();
            return new InventoryObserver(this, selector, options, faults, ct);
        }
    }
}
