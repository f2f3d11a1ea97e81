using System;
using System.Collections.Generic;
using System.Linq;

namespace Muster.Client
{
    /// <summary>Configures Observe; invalid values make Observe throw InvalidRequest
    /// (the Go SDK's option names and messages).</summary>
    public sealed class ObserveOptions
    {
        public ObserveOptions()
        {
            ReconcileJitter = Reconcile.DefaultReconcileJitter;
            PageSize = 500;
        }

        /// <summary>The shortest lease TTL the observed fleet uses; the default
        /// reconciliation interval is derived from it (Reconcile.Interval). Must not be
        /// negative; zero means unknown.</summary>
        public TimeSpan ShortestTtl { get; set; }

        /// <summary>The periodic reconciliation interval instead of the default formula.
        /// Must be at least 10 ms; null: the default.</summary>
        public TimeSpan? ReconcileInterval { get; set; }

        /// <summary>Each period is drawn uniformly from interval·[1-j, 1+j]. Must be in [0, 1);
        /// default 0.2. 0 makes every period exact (tests); a fleet should keep some jitter
        /// so that its observers do not relist in lockstep.</summary>
        public double ReconcileJitter { get; set; }

        /// <summary>The LIST page size used to read the rest of a snapshot, 1..500 (default 500).</summary>
        public int PageSize { get; set; }

        /// <summary>The reasons these options are invalid, empty when valid.</summary>
        internal List<string> Problems()
        {
            var errs = new List<string>();
            if (ShortestTtl < TimeSpan.Zero) errs.Add("the shortest TTL must not be negative");
            if (ReconcileInterval.HasValue && ReconcileInterval.Value < TimeSpan.FromMilliseconds(10))
                errs.Add("the reconciliation interval must be at least 10ms");
            if (!(ReconcileJitter >= 0 && ReconcileJitter < 1)) errs.Add("the reconciliation jitter must be in [0, 1)");
            if (PageSize < 1 || PageSize > 500) errs.Add("the page size must be in 1..500");
            return errs;
        }

        internal void Validate()
        {
            var errs = Problems();
            if (errs.Count > 0) throw new MusterException(ErrorCode.InvalidRequest, "Observe: " + string.Join("; ", errs));
        }
    }

    /// <summary>A copy of an observer's view.</summary>
    public sealed class ObserverView
    {
        /// <summary>True once a bootstrap completed, until the next event that may have made
        /// the view stale (then Items is the last known state).</summary>
        public bool Ready { get; internal set; }
        /// <summary>The broker lifetime the items belong to.</summary>
        public string Epoch { get; internal set; }
        /// <summary>The broker revision the items are at.</summary>
        public long Revision { get; internal set; }
        /// <summary>Sorted by Route (ordinal).</summary>
        public IReadOnlyList<Item> Items { get; internal set; }
    }

    /// <summary>What an observer did.</summary>
    public sealed class ObserverStats
    {
        /// <summary>Bootstraps started.</summary>
        public long Attempts { get; internal set; }
        /// <summary>Bootstraps that completed and installed a view.</summary>
        public long Bootstraps { get; internal set; }
        /// <summary>Times the view became not ready.</summary>
        public long Recoveries { get; internal set; }
        /// <summary>Periodic reconciliations started.</summary>
        public long Reconciliations { get; internal set; }

        internal ObserverStats Copy() { return (ObserverStats)MemberwiseClone(); }
    }

    /// <summary>Deliberate faults for tests that prove each conformance scenario able to
    /// fail (the Go SDK's brokenMode). Never set outside tests.</summary>
    [Flags]
    internal enum ObserverFaults
    {
        None = 0,
        /// <summary>Install an empty snapshot: the marker's page and the LIST pages are read but dropped.</summary>
        IgnoreSnapshot = 1,
        /// <summary>Install the snapshot without applying the changes buffered while paging.</summary>
        SkipBufferedChanges = 2,
        /// <summary>Apply no change once the view is ready.</summary>
        IgnoreLive = 4,
        /// <summary>When the stream ends (overflow, restart, …) keep the view ready and do not recover.</summary>
        IgnoreStreamEnd = 8,
        /// <summary>Merge a new bootstrap into the old view instead of replacing it.</summary>
        MergeViews = 16,
        /// <summary>Drop changes of kind expired.</summary>
        IgnoreExpired = 32,
        /// <summary>Drop changes of kind session_closed.</summary>
        IgnoreSessionClosed = 64,
        /// <summary>Never start a periodic reconciliation.</summary>
        NoReconcile = 128,
        /// <summary>Page the snapshot with requests that Dispose does not cancel.</summary>
        UncancellablePages = 256,
        /// <summary>Retry errors no retry fixes (forbidden, …) instead of stopping.</summary>
        RetryFatal = 512,
        /// <summary>The runner builds its clients with WithoutFollow: wrong_broker is an error, not a redirect.</summary>
        NoFollow = 1024,
        /// <summary>The runner's clients follow wrong_broker but keep an owner that stopped answering.</summary>
        StickyOwner = 2048,
        /// <summary>The runner's clients never report a lease's loss (Lost is never cancelled).</summary>
        NeverLost = 4096,
        /// <summary>The runner's clients give a grant the old local deadline, send + TTL.</summary>
        SendPlusTtl = 8192,
        /// <summary>The runner's clients lose a session at its keepalive only (MusterClient.LateLoss): a
        /// new epoch, family_unavailable or session_not_found to another request end nothing at once.</summary>
        LateLoss = 16384,
        /// <summary>The runner's clients use only the first of their base URLs (MusterClient.SingleBroker):
        /// a dead first broker is never left.</summary>
        SingleBroker = 32768,
        /// <summary>The runner's clients keep sending to a broker that answers family_unavailable
        /// (MusterClient.StayOnUnavailable); its sessions are still lost at once.</summary>
        StayOnUnavailable = 65536,
        /// <summary>The runner's clients judge prompt loss against the broker that created a
        /// session (MusterClient.CreatorLoss), never against the one that last answered it (a
        /// planned move): the creator answering under a new epoch ends the session.</summary>
        CreatorLoss = 131072,
    }
}
