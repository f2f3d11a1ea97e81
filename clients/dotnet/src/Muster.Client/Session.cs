using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>
    /// A worker's liveness on one broker: it keeps itself alive in the background (a
    /// keepalive every TTL/3) until disposed, or until it is lost. Every lease is
    /// acquired through a session and is lost with it. Safe for concurrent use.
    /// Ended is cancelled when the session ends, and Error says why:
    /// MusterClosedException after CloseAsync/Dispose, SessionLostException
    /// otherwise. A lost session is never revived: create a new one.
    ///
    /// The session is lost when its keepalive gets session_not_found, when no keepalive
    /// got through by its local deadline, and at once (in the call that shows it, not at
    /// the next keepalive) when the broker that holds it (the one that last answered one of
    /// its requests with success: its creator, or the broker a planned move took its
    /// family to) answers any request or watch stream of the same MusterClient with
    /// another Muster-Epoch (it restarted), answers family_unavailable (it stopped
    /// serving the family), or answers session_not_found to one of the session's own
    /// requests (acquire, extend, release, batch). A connection error alone changes
    /// nothing: the local deadline decides then. The SessionLostException says why;
    /// every lease of the session is lost with it, with that exception as the cause.
    /// </summary>
    public sealed partial class Session : IDisposable
    {
        private readonly MusterClient c;
        private readonly CancellationTokenSource stop = new CancellationTokenSource();
        private readonly CancellationTokenSource ended = new CancellationTokenSource();
        private readonly Dictionary<string, Lease> leases = new Dictionary<string, Lease>();
        private readonly object mu = new object();
        private Exception error;
        // The broker (host:port) that last answered one of the session's requests with
        // success, and its epoch: it holds the session (Loss.cs).
        private string host, epoch;
        // Completed when the keepalive loop stopped sending, before it ends a lost session:
        // CloseAsync of a live session waits for this, never for the loop, so a callback on
        // Ended or Lost (run on the loop's thread) may dispose the session without a
        // deadlock. A session that ended already is not waited for: a prompt loss may end
        // it inside the keepalive's own request (its answer carries another epoch), and a
        // callback disposing it there runs before the loop can stop.
        private readonly TaskCompletionSource<bool> loopStopped = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);

        internal Session(MusterClient c, SessionBody b, string host)
        {
            this.c = c;
            this.host = host;
            Id = b.SessionId; OwnerId = b.OwnerId; HolderIncarnation = b.HolderIncarnation; epoch = b.Epoch;
            Ttl = TimeSpan.FromMilliseconds(b.TtlMs);
        }

        /// <summary>The session id: a secret (whoever has it can release this session's leases).</summary>
        public string Id { get; private set; }
        public string OwnerId { get; private set; }
        /// <summary>The public, opaque id of this session, as shown in inventory items.</summary>
        public string HolderIncarnation { get; private set; }
        /// <summary>The lifetime (Muster-Epoch) of the broker that holds the session: the one
        /// that created it, or the one a planned move took its family to.</summary>
        public string Epoch { get { lock (mu) return epoch; } }
        public TimeSpan Ttl { get; private set; }
        /// <summary>Cancelled when the session has ended.</summary>
        public CancellationToken Ended { get { return ended.Token; } }
        /// <summary>Null while the session lives, then why it ended.</summary>
        public Exception Error { get { lock (mu) return error; } }

        internal MusterClient Client { get { return c; } }

        /// <summary>The broker (host:port) that holds the session: the one that last answered
        /// one of its requests with success.</summary>
        internal string Host { get { lock (mu) return host; } }

        /// <summary>Starts the keepalive loop of a session whose creating request was sent
        /// at t0 (MonoClock).</summary>
        internal void Start(TimeSpan t0) { Tasks.Forget(Task.Run(() => KeepaliveAsync(t0 + Ttl))); }

        /// <summary>Ends the session at the broker (its leases are released there) and
        /// locally (every Lease is lost). Closing a session that already ended only stops
        /// its keepalive.</summary>
        public async Task CloseAsync(CancellationToken ct = default(CancellationToken))
        {
            stop.Cancel();
            if (Error == null) await loopStopped.Task.ConfigureAwait(false); // nothing to wait for once ended (End stopped it)
            bool wasLive = Error == null;
            End(new MusterClosedException());
            if (!wasLive) return;
            try
            {
                await c.CallAsync<object>(HttpMethod.Delete, "/v1/sessions/" + MusterClient.Seg(Id), null, 204, ct, session: this).ConfigureAwait(false);
            }
            catch (MusterException e) when (e.Code == ErrorCode.SessionNotFound)
            {
            }
        }

        /// <summary>CloseAsync bounded by 5 s; errors are swallowed (the broker ends the
        /// session at its TTL at the latest). It blocks the calling thread meanwhile:
        /// from async code use DisposeAsync (C# 8: await using).</summary>
        public void Dispose()
        {
            CloseQuietlyAsync().GetAwaiter().GetResult();
        }

        /// <summary>Acquires the exact route for ttl (100 ms .. 10 min). When this session
        /// already holds it, answers the same Lease without resetting its TTL.</summary>
        public async Task<Lease> AcquireAsync(string route, TimeSpan ttl, AcquireOptions options = null, CancellationToken ct = default(CancellationToken))
        {
            var r = Route.Parse(route);
            var err = Error;
            if (err != null) throw err;
            var body = new AcquireRequest { SessionId = Id, TtlMs = MusterClient.Ms(ttl) };
            if (options != null && options.Wait > TimeSpan.Zero) body.WaitMs = MusterClient.Ms(options.Wait);
            var t0 = MonoClock.Now;
            LeaseBody o;
            try
            {
                o = await c.CallAsync<LeaseBody>(HttpMethod.Post, r.Path("/acquire"), body, 200, ct, session: this).ConfigureAwait(false);
            }
            catch (MusterException e) when (e.Code == ErrorCode.SessionNotFound)
            {
                NotFound(e);
                throw;
            }
            return Adopt(r, o, t0, ttl);
        }

        /// <summary>Starts an empty batch of this session's lease operations: up to
        /// Batch.MaxBatchOps acquisitions (never waiting), extensions and releases sent in
        /// one request by Batch.DoAsync, one BatchResult per operation.</summary>
        public Batch Batch()
        {
            return new Batch(this);
        }

        /// <summary>The handle of a lease the broker granted (or answered already_held for)
        /// to a request sent at t0 (MonoClock) for ttl: the tracked handle when it is the
        /// same grant, otherwise a new one armed with LocalDeadline.</summary>
        internal Lease Adopt(Route r, LeaseBody o, TimeSpan t0, TimeSpan ttl)
        {
            if (o.Outcome == "already_held")
            {
                lock (mu)
                {
                    Lease l0;
                    if (leases.TryGetValue(r.ToString(), out l0) && l0.FencingToken == o.FencingToken) return l0;
                }
            }
            var deadline = c.SendPlusTtl ? t0 + ttl : LocalDeadline(o, t0, ttl);
            var l = new Lease(this, r, o);
            l.Arm(deadline);
            if (!Track(l)) l.End(new LeaseLostException(Error));
            return l;
        }

        /// <summary>
        /// The local deadline (a MonoClock reading) of a lease an acquire sent at t0 for
        /// ttl was answered with: t0 + expires_after_request_ms, the broker's expiry
        /// counted from the moment it took the request up, which came after t0. So it is
        /// never later than the broker's expiry, and after a wait in the queue it stays as
        /// close to it as the round trip allows (t0 + ttl would be the whole wait early).
        /// A broker that does not send the member gets t0 + ttl, and for already_held
        /// never more than what the answer's expiry leaves (read against the wall clock:
        /// the best such a broker says).
        /// </summary>
        internal static TimeSpan LocalDeadline(LeaseBody o, TimeSpan t0, TimeSpan ttl)
        {
            if (o.ExpiresAfterRequestMs.HasValue) return t0 + TimeSpan.FromMilliseconds(o.ExpiresAfterRequestMs.Value);
            var deadline = t0 + ttl;
            if (o.Outcome == "already_held")
            {
                var rem = o.ExpiresAt - DateTimeOffset.UtcNow;
                if (rem < ttl) deadline = MonoClock.Now + rem;
            }
            return deadline;
        }

        /// <summary>
        /// Acquires route for ttl, runs fn while holding it and releases it when fn
        /// returns. The lease is extended every ttl/3; when it is lost, fn's token is
        /// cancelled. Throws fn's exception; when fn completed (or was cancelled by the
        /// loss) but the lease was lost while it ran, throws the LeaseLostException: work
        /// done without the lease must not be taken as done.
        /// </summary>
        public async Task WithLeaseAsync(string route, TimeSpan ttl, Func<Lease, CancellationToken, Task> fn,
            AcquireOptions options = null, CancellationToken ct = default(CancellationToken))
        {
            var l = await AcquireAsync(route, ttl, options, ct).ConfigureAwait(false);
            using (var work = CancellationTokenSource.CreateLinkedTokenSource(ct, l.Lost))
            {
                var renew = Task.Run(() => l.RenewAsync(ttl, work.Token));
                Exception ferr = null;
                try
                {
                    await fn(l, work.Token).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    ferr = e;
                }
                var lost = l.Error;
                work.Cancel();
                try { await renew.ConfigureAwait(false); } catch (Exception) { }
                using (var rcts = new CancellationTokenSource(TimeSpan.FromSeconds(5)))
                {
                    try { await l.ReleaseAsync(rcts.Token).ConfigureAwait(false); } catch (Exception) { }
                }
                if (ferr != null && !(ferr is OperationCanceledException && lost != null)) System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(ferr).Throw();
                if (lost != null) throw lost;
            }
        }

        /// <summary>Opens a watch stream whose registrations belong to this session: they
        /// end with it, a duplicate open of the same selector supersedes the older stream,
        /// and Subscription.UnsubscribeAsync can remove one of them.</summary>
        public Task<Subscription> WatchAsync(IEnumerable<string> selectors, CancellationToken ct = default(CancellationToken))
        {
            return c.WatchAsync(this, selectors, ct);
        }

        /// <summary>Records why the session ended, once, stops its keepalive and loses its
        /// leases. Called with no lock held.</summary>
        internal void End(Exception cause)
        {
            List<Lease> ls;
            lock (mu)
            {
                if (error != null) return;
                error = cause;
                ls = new List<Lease>(leases.Values);
                leases.Clear();
            }
            c.UntrackSession(this);
            stop.Cancel();
            foreach (var l in ls) l.End(new LeaseLostException(cause));
            ended.Cancel(); // after the leases: when Ended fires, every lease is lost already
        }

        /// <summary>Keeps the session alive every TTL/3 until stopped. A failed keepalive
        /// is retried with backoff; when none got through by the local deadline (a lower
        /// bound of the broker's, on the MonoClock), the session is lost.</summary>
        private async Task KeepaliveAsync(TimeSpan deadline)
        {
            Exception lost = null;
            try
            {
                lost = await KeepaliveLoopAsync(deadline).ConfigureAwait(false);
            }
            finally
            {
                loopStopped.TrySetResult(true);
            }
            if (lost != null) End(lost);
        }

        /// <summary>Runs until stopped (null) or until the session is lost (the cause).</summary>
        private async Task<Exception> KeepaliveLoopAsync(TimeSpan deadline)
        {
            var ct = stop.Token;
            var interval = TimeSpan.FromTicks(Ttl.Ticks / 3);
            var backoff = new Backoff(TimeSpan.FromMilliseconds(100), interval);
            var wait = interval;
            Exception lastErr = null;
            while (true)
            {
                if (!await Tasks.SleepAsync(wait, ct).ConfigureAwait(false) || Error != null) return null;
                if (lastErr != null && MonoClock.Now >= deadline)
                {
                    return new SessionLostException("no keepalive got through within the TTL: " + lastErr.Message, lastErr);
                }
                var t0 = MonoClock.Now;
                try
                {
                    using (var rcts = CancellationTokenSource.CreateLinkedTokenSource(ct))
                    {
                        var left = deadline - MonoClock.Now;
                        rcts.CancelAfter(left > TimeSpan.Zero ? left : TimeSpan.FromMilliseconds(1));
                        await c.CallAsync<object>(HttpMethod.Post, "/v1/sessions/" + MusterClient.Seg(Id) + "/keepalive", null, 200, rcts.Token, session: this).ConfigureAwait(false);
                    }
                    deadline = t0 + Ttl;
                    lastErr = null;
                    backoff.Reset();
                    wait = interval;
                }
                catch (Exception) when (ct.IsCancellationRequested)
                {
                    return null;
                }
                catch (MusterException e) when (e.Code == ErrorCode.SessionNotFound)
                {
                    return new SessionLostException(e.Message, e);
                }
                catch (Exception e)
                {
                    if (lastErr == null || !(e is OperationCanceledException)) lastErr = e;
                    var b = backoff.Next();
                    var left = deadline - MonoClock.Now;
                    wait = b < left ? b : (left > TimeSpan.Zero ? left : TimeSpan.Zero);
                }
            }
        }

        private bool Track(Lease l)
        {
            lock (mu)
            {
                if (error != null) return false;
                leases[l.Route] = l;
                return true;
            }
        }

        internal void Untrack(Lease l)
        {
            lock (mu)
            {
                Lease cur;
                if (leases.TryGetValue(l.Route, out cur) && cur == l) leases.Remove(l.Route);
            }
        }
    }

    /// <summary>Tunes AcquireAsync.</summary>
    public sealed class AcquireOptions
    {
        /// <summary>Wait up to this long (at most 30 s) in the route's FIFO queue when
        /// another session holds the lease, instead of failing at once with LeaseHeld.
        /// When the wait ends without a grant AcquireAsync fails with WaitTimeout.
        /// Cancelling the token leaves the queue.</summary>
        public TimeSpan Wait { get; set; }
    }

    public sealed partial class MusterClient
    {
        /// <summary>Creates a session for ownerId (the application's logical owner, shown in
        /// inventory items) with the given TTL (1 s .. 10 min). ct bounds the creating
        /// request only.</summary>
        public async Task<Session> CreateSessionAsync(string ownerId, TimeSpan ttl, CancellationToken ct = default(CancellationToken))
        {
            var t0 = MonoClock.Now;
            var host = new System.Runtime.CompilerServices.StrongBox<string>();
            var b = await CallAsync<SessionBody>(HttpMethod.Post, "/v1/sessions",
                new CreateSessionRequest { OwnerId = ownerId, TtlMs = Ms(ttl) }, 201, ct, host).ConfigureAwait(false);
            var s = new Session(this, b, host.Value);
            TrackSession(s);
            s.Start(t0);
            return s;
        }
    }
}
