using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    /// <summary>
    /// Keeps an advisory view of the held leases matching one selector. It owns the
    /// bootstrap (open a watch stream and read its marker, buffer the changes, page
    /// the rest of the marker's snapshot, install it, apply the buffered changes newer
    /// than the marker, then report ready) and every recovery. See MusterClient.Observe
    /// and docs/client-operations.md.
    /// </summary>
    public sealed partial class InventoryObserver : IDisposable
    {
        private static readonly TimeSpan RecoverMin = TimeSpan.FromMilliseconds(50);
        private static readonly TimeSpan RecoverMax = TimeSpan.FromSeconds(2);
        /// <summary>Bounds the changes buffered while paging a snapshot; beyond it the bootstrap starts over.</summary>
        internal const int MaxBuffered = 100000;

        [ThreadStatic] private static bool raising;

        private readonly MusterClient c;
        private readonly int pageSize;
        private readonly double jitter;
        private readonly ObserverFaults faults;
        private readonly CancellationTokenSource life;
        private readonly AsyncQueue<Msg> inbox = new AsyncQueue<Msg>(int.MaxValue);
        private readonly TaskCompletionSource<bool> stopped = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly object mu = new object();
        private readonly object raiseMu = new object();

        // Guarded by mu.
        private Dictionary<string, Item> items = new Dictionary<string, Item>(StringComparer.Ordinal);
        private bool ready, closed;
        private string epoch = "";
        private long revision;
        private Exception error, stopErr;
        private Subscription cur;
        private TaskCompletionSource<bool> changed = NewTcs();
        private readonly ObserverStats stats = new ObserverStats();

        internal InventoryObserver(MusterClient c, string selector, ObserveOptions o, ObserverFaults faults, CancellationToken ct)
        {
            this.c = c;
            this.faults = faults;
            Selector = selector;
            pageSize = o.PageSize;
            jitter = o.ReconcileJitter;
            ReconcileEvery = o.ReconcileInterval ?? Reconcile.Interval(o.ShortestTtl);
            life = CancellationTokenSource.CreateLinkedTokenSource(ct);
            Task.Run(() => RunAsync(life.Token));
        }

        /// <summary>The observed selector.</summary>
        public string Selector { get; private set; }

        /// <summary>The (unjittered) periodic reconciliation interval.</summary>
        public TimeSpan ReconcileEvery { get; private set; }

        /// <summary>
        /// Raised after every change of the view, of its readiness or of Error, on a
        /// background thread (one at a time). Keep handlers short; read View for the
        /// state. An exception from a handler is ignored.
        /// </summary>
        public event EventHandler Changed;

        /// <summary>True when the view is bootstrapped and followed live.</summary>
        public bool Ready { get { lock (mu) return ready; } }

        /// <summary>Null while the view is ready. Otherwise why it is not: the end of the
        /// stream, or the last failed bootstrap; once the observer stopped, why it stopped
        /// (MusterClosedException after Dispose).</summary>
        public Exception Error { get { lock (mu) return error; } }

        /// <summary>Completes when the observer has stopped for good (Dispose, its token, or
        /// an error no retry can fix; Error says which).</summary>
        public Task Stopped { get { return stopped.Task; } }

        /// <summary>A copy of the current view.</summary>
        public ObserverView View
        {
            get
            {
                lock (mu)
                {
                    var l = items.Values.ToList();
                    l.Sort((a, b) => string.CompareOrdinal(a.Route, b.Route));
                    return new ObserverView { Ready = ready, Epoch = epoch, Revision = revision, Items = l };
                }
            }
        }

        /// <summary>What the observer did so far.</summary>
        public ObserverStats Stats { get { lock (mu) return stats.Copy(); } }

        /// <summary>Waits until the view is ready. Throws the observer's Error when it
        /// stopped, OperationCanceledException when ct ends first.</summary>
        public async Task ReadyAsync(CancellationToken ct = default(CancellationToken))
        {
            while (true)
            {
                Task next;
                lock (mu)
                {
                    if (ready) return;
                    if (closed) throw error;
                    next = changed.Task;
                }
                await Tasks.WaitAsync(next, ct).ConfigureAwait(false);
            }
        }

        /// <summary>A task that completes at the next change (view, readiness or Error).</summary>
        internal Task NextChange() { lock (mu) return changed.Task; }

        /// <summary>Stops the observer and waits for it: its stream is closed and any request
        /// in flight is cancelled, so Dispose returns promptly even while the broker hangs.
        /// Error is MusterClosedException afterwards. Called from a Changed handler, it
        /// stops the observer without waiting.</summary>
        public void Dispose()
        {
            Close();
            if (!raising) stopped.Task.Wait();
        }

        private void Close()
        {
            lock (mu) if (stopErr == null) stopErr = new MusterClosedException();
            life.Cancel();
        }

        // ---- the loop ----

        private abstract class Msg { }
        private sealed class RetryDue : Msg { internal int Gen; }
        private sealed class ReconcileDue : Msg { internal int Gen; }
        private sealed class StreamEnded : Msg { internal Subscription Sub; }
        private sealed class BootDone : Msg { internal BootResult R; }

        private sealed class BootResult
        {
            internal Subscription Sub;
            internal Dictionary<string, Item> Items;
            internal string Epoch;
            internal long Revision;
            internal Exception Error;
        }

        private void Post(Msg m) { inbox.WriteAsync(m, CancellationToken.None).GetAwaiter().GetResult(); }

        private void After(TimeSpan d, Msg m, CancellationToken ct)
        {
            if (d <= TimeSpan.Zero)
            {
                Post(m);
                return;
            }
            Task.Delay(d, ct).ContinueWith(t => { if (!t.IsCanceled) Post(m); }, TaskContinuationOptions.ExecuteSynchronously);
        }

        /// <summary>The observer's single loop: it owns the current stream and starts at
        /// most one bootstrap at a time. Timers are generations: a stale one is ignored.</summary>
        private async Task RunAsync(CancellationToken ct)
        {
            Task<BootResult> pending = null;
            Subscription current = null;
            var readyAt = Stopwatch.StartNew();
            var bo = new Backoff(RecoverMin, RecoverMax);
            int retryGen = 0, reconcileGen = 0;
            try
            {
                Action start = () =>
                {
                    lock (mu) stats.Attempts++;
                    var t = Task.Run(() => BootstrapAsync(ct));
                    pending = t;
                    t.ContinueWith(x => Post(new BootDone { R = x.Result }), TaskContinuationOptions.ExecuteSynchronously);
                };
                Post(new RetryDue { Gen = retryGen }); // the first bootstrap starts at once
                while (true)
                {
                    Msg m;
                    if (!inbox.TryRead(out m))
                    {
                        await inbox.WaitToReadAsync(ct).ConfigureAwait(false);
                        continue;
                    }
                    if (ct.IsCancellationRequested) return;
                    var retry = m as RetryDue;
                    if (retry != null)
                    {
                        if (retry.Gen == retryGen && pending == null) start();
                        continue;
                    }
                    var rec = m as ReconcileDue;
                    if (rec != null)
                    {
                        if (rec.Gen == reconcileGen && pending == null)
                        {
                            lock (mu) stats.Reconciliations++;
                            start();
                        }
                        continue;
                    }
                    var end = m as StreamEnded;
                    if (end != null)
                    {
                        if (end.Sub != current) continue;
                        if ((faults & ObserverFaults.IgnoreStreamEnd) != 0) continue;
                        current = null;
                        reconcileGen++;
                        NotReady(end.Sub.Error, end.Sub);
                        if (pending == null)
                        {
                            retryGen++;
                            if (readyAt.Elapsed >= RecoverMax)
                            {
                                bo.Reset(); // it was stable: recover at once
                                After(TimeSpan.Zero, new RetryDue { Gen = retryGen }, ct);
                            }
                            else
                            {
                                After(bo.Next(), new RetryDue { Gen = retryGen }, ct);
                            }
                        }
                        continue;
                    }
                    var done = (BootDone)m;
                    pending = null;
                    var r = done.R;
                    if (ct.IsCancellationRequested)
                    {
                        if (r.Sub != null) r.Sub.Dispose();
                        return;
                    }
                    if (r.Error != null)
                    {
                        if (Fatal(r.Error) && (faults & ObserverFaults.RetryFatal) == 0)
                        {
                            lock (mu) if (stopErr == null) stopErr = r.Error;
                            return;
                        }
                        if (current == null) NotReady(r.Error, null);
                        retryGen++;
                        After(bo.Next(), new RetryDue { Gen = retryGen }, ct);
                        continue;
                    }
                    var old = current;
                    current = r.Sub;
                    Install(r);
                    if (old != null) old.Dispose();
                    readyAt.Restart();
                    reconcileGen++;
                    if ((faults & ObserverFaults.NoReconcile) == 0)
                    {
                        After(Reconcile.Jittered(ReconcileEvery, jitter), new ReconcileDue { Gen = reconcileGen }, ct);
                    }
                    var sub = r.Sub;
                    Tasks.Forget(Task.Run(() => PumpAsync(sub, ct)));
                }
            }
            catch (OperationCanceledException)
            {
            }
            catch (Exception e)
            {
                lock (mu) if (stopErr == null) stopErr = e; // a bug of this SDK: stop visibly
            }
            finally
            {
                life.Cancel();
                if (pending != null)
                {
                    try
                    {
                        var r = await pending.ConfigureAwait(false);
                        if (r.Sub != null) r.Sub.Dispose();
                    }
                    catch (Exception) { }
                }
                if (current != null) current.Dispose();
                Stop(ct.IsCancellationRequested ? new OperationCanceledException(ct) : null);
            }
        }

        /// <summary>Errors no retry fixes.</summary>
        private static bool Fatal(Exception e)
        {
            var m = e as MusterException;
            if (m == null) return false;
            switch (m.Code)
            {
                case ErrorCode.InvalidSelector: case ErrorCode.InvalidRequest: case ErrorCode.Unauthenticated:
                case ErrorCode.Forbidden: case ErrorCode.NotFound: case ErrorCode.MethodNotAllowed: case ErrorCode.NotImplemented:
                    return true;
                default:
                    return false;
            }
        }

        /// <summary>Applies the live changes of sub while it is the current stream, then
        /// reports its end to the loop.</summary>
        private async Task PumpAsync(Subscription sub, CancellationToken ct)
        {
            try
            {
                while (await sub.WaitToReadAsync(ct).ConfigureAwait(false))
                {
                    Change ch;
                    while (sub.TryRead(out ch)) Apply(sub, ch);
                }
                Post(new StreamEnded { Sub = sub });
            }
            catch (OperationCanceledException)
            {
            }
        }

        private void Apply(Subscription sub, Change ch)
        {
            lock (mu)
            {
                if (sub != cur || ch.Revision <= revision) return;
                if ((faults & ObserverFaults.IgnoreLive) != 0 || Dropped(ch)) return;
                ApplyTo(items, ch);
                revision = ch.Revision;
                Notify();
            }
            Raise();
        }

        private void Install(BootResult r)
        {
            lock (mu)
            {
                if ((faults & ObserverFaults.MergeViews) != 0)
                {
                    foreach (var kv in items) if (!r.Items.ContainsKey(kv.Key)) r.Items[kv.Key] = kv.Value;
                }
                items = r.Items;
                epoch = r.Epoch;
                revision = r.Revision;
                cur = r.Sub;
                ready = true;
                error = null;
                stats.Bootstraps++;
                Notify();
            }
            Raise();
        }

        private void NotReady(Exception e, Subscription ended)
        {
            lock (mu)
            {
                if (ended != null && cur == ended) cur = null;
                if (ready) stats.Recoveries++;
                ready = false;
                error = e;
                Notify();
            }
            Raise();
        }

        /// <summary>Marks the observer stopped: by Dispose, by a fatal error, or by the end
        /// of its token (cause).</summary>
        private void Stop(Exception cause)
        {
            lock (mu)
            {
                if (stopErr == null) stopErr = cause ?? new MusterClosedException();
                error = stopErr;
                ready = false;
                closed = true;
                cur = null;
                Notify();
            }
            Raise();
            stopped.TrySetResult(true);
        }

        /// <summary>Wakes the waiters of the current change; mu is held.</summary>
        private void Notify()
        {
            changed.TrySetResult(true);
            changed = NewTcs();
        }

        private void Raise()
        {
            var h = Changed;
            if (h == null) return;
            lock (raiseMu)
            {
                raising = true;
                try { h(this, EventArgs.Empty); }
                catch (Exception) { }
                finally { raising = false; }
            }
        }

        private static TaskCompletionSource<bool> NewTcs()
        {
            return new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        }
    }
}
