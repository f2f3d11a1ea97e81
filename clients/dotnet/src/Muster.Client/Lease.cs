using System;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>
    /// A lease held by a Session: the only ownership handle of this SDK, and only
    /// Session.AcquireAsync makes one. Safe for concurrent use.
    ///
    /// Lost is cancelled when the lease is no longer held, and Error says why:
    /// LeaseReleasedException after its own release; otherwise a LeaseLostException
    /// whose InnerException is the cause: NotOwner, Fenced or LeaseExpired from the
    /// broker, LeaseExpired when the local deadline passed without a successful
    /// extension, or the session's end (a SessionLostException, or MusterClosedException
    /// after the session's own close; a session is lost at once when its broker shows it
    /// ended, see Session). The local deadline is a lower bound of the
    /// broker's expiry, on a monotonic clock: the acquire's send time plus the answer's
    /// expires_after_request_ms (the wait in the queue plus the TTL), then each
    /// successful extension's send time plus its TTL.
    /// </summary>
    public sealed class Lease
    {
        private readonly Session s;
        private readonly Route r;
        private readonly object mu = new object();
        private readonly CancellationTokenSource lost = new CancellationTokenSource();
        private Timer timer;
        private Exception error;

        internal Lease(Session s, Route r, LeaseBody o)
        {
            this.s = s; this.r = r;
            Route = r.ToString();
            FencingToken = o.FencingToken;
            AcquiredAt = o.AcquiredAt; ExpiresAt = o.ExpiresAt; Renewals = o.Renewals;
        }

        /// <summary>The lease's exact route.</summary>
        public string Route { get; private set; }

        /// <summary>The broker revision at which the lease was granted: strictly increasing
        /// per route, stable across renewals. Pass it to the guarded resource, which must
        /// refuse a token lower than the highest it has seen. Meaningless across routes or
        /// broker lifetimes.</summary>
        public long FencingToken { get; private set; }

        public DateTimeOffset AcquiredAt { get; private set; }

        /// <summary>The broker's expiry as of the last grant or extension.</summary>
        public DateTimeOffset ExpiresAt { get { lock (mu) return expiresAt; } private set { lock (mu) expiresAt = value; } }
        private DateTimeOffset expiresAt;

        /// <summary>The successful extensions, as the broker reports them.</summary>
        public long Renewals { get { lock (mu) return renewals; } private set { lock (mu) renewals = value; } }
        private long renewals;

        /// <summary>Cancelled when the lease is no longer held (or released).</summary>
        public CancellationToken Lost { get { return lost.Token; } }

        /// <summary>Null while the lease is held, then why it is not.</summary>
        public Exception Error { get { lock (mu) return error; } }

        /// <summary>Arms the local deadline (a MonoClock reading): past it, the lease is
        /// lost unless an extension moved it.</summary>
        internal void Arm(TimeSpan deadline)
        {
            lock (mu)
            {
                var due = deadline - MonoClock.Now;
                if (due < TimeSpan.Zero) due = TimeSpan.Zero;
                if (timer == null) timer = new Timer(_ => Expired(), null, due, Timeout.InfiniteTimeSpan);
                else timer.Change(due, Timeout.InfiniteTimeSpan);
            }
        }

        /// <summary>Extends the lease to now + ttl. When the broker answers that the lease is
        /// no longer this session's (NotOwner, Fenced, LeaseExpired, SessionNotFound) the
        /// lease is lost and the LeaseLostException is thrown; SessionNotFound loses the
        /// whole session, and every lease of it, at once. Any other failure (a
        /// transport error, Unavailable) leaves the lease as it was: retry before the
        /// deadline.</summary>
        public async Task ExtendAsync(TimeSpan ttl, CancellationToken ct = default(CancellationToken))
        {
            var err = Error;
            if (err != null) throw err;
            var t0 = MonoClock.Now;
            LeaseBody o;
            try
            {
                o = await s.Client.CallAsync<LeaseBody>(HttpMethod.Post, r.Path("/extend"),
                    new ExtendRequest { SessionId = s.Id, FencingToken = FencingToken, TtlMs = MusterClient.Ms(ttl) }, 200, ct, session: s).ConfigureAwait(false);
            }
            catch (MusterException e) when (OwnershipGone(e))
            {
                s.NotFound(e); // session_not_found: the session and all its leases
                End(new LeaseLostException(e));
                throw Error;
            }
            Extended(o, t0, ttl);
        }

        /// <summary>Records a successful extension sent at t0 (MonoClock) for ttl: the local
        /// deadline moves to t0 + ttl. Throws the lease's error when it was lost
        /// meanwhile.</summary>
        internal void Extended(LeaseBody o, TimeSpan t0, TimeSpan ttl)
        {
            lock (mu)
            {
                if (error != null) throw error;
                expiresAt = o.ExpiresAt;
                renewals = o.Renewals;
                Arm(t0 + ttl);
            }
        }

        /// <summary>The session holding this lease.</summary>
        internal Session Owner { get { return s; } }

        /// <summary>The parsed route.</summary>
        internal Route ParsedRoute { get { return r; } }

        /// <summary>Releases the lease; the next FIFO waiter (if any) is granted. Completes
        /// once the lease is known not to be held by this session any more, including when
        /// it was already lost; throws only when that is unknown (a transport failure):
        /// the lease then ends at its TTL at the latest.</summary>
        public async Task ReleaseAsync(CancellationToken ct = default(CancellationToken))
        {
            if (Error is LeaseReleasedException) return;
            var serr = s.Error;
            if (serr != null)
            {
                End(new LeaseLostException(serr)); // the broker released it when the session ended
                return;
            }
            try
            {
                await s.Client.CallAsync<object>(HttpMethod.Post, r.Path("/release"),
                    new ReleaseRequest { SessionId = s.Id, FencingToken = FencingToken }, 204, ct, session: s).ConfigureAwait(false);
                End(new LeaseReleasedException());
            }
            catch (MusterException e) when (OwnershipGone(e))
            {
                s.NotFound(e); // session_not_found: the session and all its leases
                End(new LeaseLostException(e));
            }
        }

        internal static bool OwnershipGone(MusterException e)
        {
            return e.Code == ErrorCode.NotOwner || e.Code == ErrorCode.Fenced ||
                e.Code == ErrorCode.LeaseExpired || e.Code == ErrorCode.SessionNotFound;
        }

        private void Expired()
        {
            End(new LeaseLostException(new MusterException(ErrorCode.LeaseExpired, "the local deadline passed without a successful extension")));
        }

        /// <summary>Records why the lease is not held, once.</summary>
        internal void End(Exception cause)
        {
            if (s.Client.NeverLost && !(cause is LeaseReleasedException)) return;
            lock (mu)
            {
                if (error != null) return;
                error = cause;
                if (timer != null) timer.Dispose();
            }
            lost.Cancel();
            s.Untrack(this);
        }

        /// <summary>Extends every ttl/3 until ct ends or the lease is lost; a failed
        /// extension is retried at the next tick (the local deadline decides the loss).</summary>
        internal async Task RenewAsync(TimeSpan ttl, CancellationToken ct)
        {
            var every = TimeSpan.FromTicks(ttl.Ticks / 3);
            while (await Tasks.SleepAsync(every, ct).ConfigureAwait(false))
            {
                using (var ects = CancellationTokenSource.CreateLinkedTokenSource(ct))
                {
                    ects.CancelAfter(every);
                    try { await ExtendAsync(ttl, ects.Token).ConfigureAwait(false); }
                    catch (Exception) { if (Error != null) return; }
                }
            }
        }
    }
}
