using System;
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>
    /// The outcome of one operation of a batch, in the order of the batch. Error is null
    /// on success; otherwise it is what the operation on its own (AcquireAsync,
    /// Lease.ExtendAsync, Lease.ReleaseAsync) would have thrown: a MusterException with
    /// the broker's code for that operation (ErrorCode.LeaseHeld, ErrorCodes.Advice), or
    /// the lease's loss (a LeaseLostException).
    /// </summary>
    public sealed class BatchResult
    {
        internal BatchResult(string op, string route, Lease lease, Exception error)
        {
            Op = op; Route = route; Lease = lease; Error = error;
        }

        /// <summary>"acquire", "extend" or "release".</summary>
        public string Op { get; private set; }
        public string Route { get; private set; }
        /// <summary>The handle: after a successful acquire the new one (or the same one,
        /// when this session already held the route); for an extend or a release the
        /// lease it was given. Null after a failed acquire.</summary>
        public Lease Lease { get; private set; }
        public Exception Error { get; private set; }
    }

    /// <summary>
    /// Lease operations of one session (acquisitions, which never wait, extensions and
    /// releases) applied by the broker in one request and one step, in the order they
    /// were added. Build it with Session.Batch(), send it with DoAsync. Adding never
    /// throws: the first local refusal is what DoAsync throws. Not safe for concurrent
    /// use.
    /// </summary>
    public sealed class Batch
    {
        /// <summary>The most operations one batch may carry (the contract's
        /// BatchRequest.ops maxItems).</summary>
        public const int MaxBatchOps = 256;

        private sealed class Entry
        {
            internal string Op;
            internal string Route;
            internal Route? Parsed; // null after a malformed route (the batch is refused)
            internal TimeSpan Ttl;
            internal Lease Lease; // extend and release
        }

        private readonly Session s;
        private readonly List<Entry> ops = new List<Entry>();
        private Exception err;

        internal Batch(Session s) { this.s = s; }

        /// <summary>The number of operations added so far.</summary>
        public int Count { get { return ops.Count; } }

        /// <summary>Adds an acquisition of the exact route for ttl (100 ms .. 10 min). It
        /// never waits: when another session holds the route, its result is
        /// LeaseHeld.</summary>
        public Batch Acquire(string route, TimeSpan ttl)
        {
            Route? r = null;
            try { r = Muster.Client.Route.Parse(route); }
            catch (MusterException e) { Refuse(e); }
            return Add(new Entry { Op = "acquire", Route = route, Parsed = r, Ttl = ttl });
        }

        /// <summary>Adds an extension of lease to now + ttl, as Lease.ExtendAsync.</summary>
        public Batch Extend(Lease lease, TimeSpan ttl)
        {
            if (Own(lease)) Add(new Entry { Op = "extend", Route = lease.Route, Parsed = lease.ParsedRoute, Ttl = ttl, Lease = lease });
            return this;
        }

        /// <summary>Adds a release of lease, as Lease.ReleaseAsync.</summary>
        public Batch Release(Lease lease)
        {
            if (Own(lease)) Add(new Entry { Op = "release", Route = lease.Route, Parsed = lease.ParsedRoute, Lease = lease });
            return this;
        }

        /// <summary>
        /// Sends the batch and answers one result per operation, in order.
        ///
        /// It throws, and nothing was applied, when the batch was refused locally (no
        /// operation, more than MaxBatchOps, a malformed route, a lease of another
        /// session: InvalidRequest or InvalidRoute) or by the broker (SessionNotFound: the
        /// session and all its leases are then lost at once, as with ExtendAsync). On a transport error or a
        /// cancellation nothing is known: the leases stay as they were (retry before their
        /// deadline), and grants the broker made for a request that left are rolled back
        /// by the broker. Operations on leases already known to be lost are not sent:
        /// their results are what ExtendAsync and ReleaseAsync would give (the error, and
        /// null for a release).
        /// </summary>
        public async Task<IReadOnlyList<BatchResult>> DoAsync(CancellationToken ct = default(CancellationToken))
        {
            if (err != null) throw err;
            if (ops.Count == 0) throw new MusterException(ErrorCode.InvalidRequest, "a batch has at least one operation");
            var serr = s.Error;
            if (serr != null) throw serr;
            var output = new BatchResult[ops.Count];
            var body = new BatchRequest { SessionId = s.Id, Ops = new List<BatchOp>() };
            var sent = new List<int>();
            for (var i = 0; i < ops.Count; i++)
            {
                var e = ops[i];
                Exception local;
                var done = SettledLocally(e, out local);
                output[i] = new BatchResult(e.Op, e.Route, e.Lease, local);
                if (done) continue;
                var op = new BatchOp { Op = e.Op, Route = e.Route };
                if (e.Op != "release") op.TtlMs = MusterClient.Ms(e.Ttl);
                if (e.Lease != null) op.FencingToken = e.Lease.FencingToken;
                body.Ops.Add(op);
                sent.Add(i);
            }
            if (sent.Count == 0) return output;
            var t0 = MonoClock.Now;
            BatchResponse resp;
            try
            {
                resp = await s.Client.CallAsync<BatchResponse>(HttpMethod.Post, "/v1/leases/batch", body, 200, ct, session: s).ConfigureAwait(false);
            }
            catch (MusterException e) when (e.Code == ErrorCode.SessionNotFound)
            {
                s.NotFound(e); // the session and all its leases
                foreach (var i in sent)
                {
                    if (ops[i].Lease != null) ops[i].Lease.End(new LeaseLostException(e));
                }
                throw;
            }
            if (resp.Results == null || resp.Results.Count != sent.Count)
            {
                throw new MusterException(ErrorCode.Internal, string.Format("the broker answered {0} results for {1} operations",
                    resp.Results == null ? 0 : resp.Results.Count, sent.Count));
            }
            for (var k = 0; k < sent.Count; k++)
            {
                var i = sent[k];
                output[i] = Settle(ops[i], resp.Results[k], t0, output[i]);
            }
            return output;
        }

        private Batch Add(Entry e)
        {
            if (ops.Count == MaxBatchOps) Refuse(new MusterException(ErrorCode.InvalidRequest, "a batch has at most " + MaxBatchOps + " operations"));
            ops.Add(e);
            return this;
        }

        /// <summary>Checks that lease is a lease of the batch's session.</summary>
        private bool Own(Lease lease)
        {
            if (lease == null || lease.Owner != s)
            {
                Refuse(new MusterException(ErrorCode.InvalidRequest, "a batch takes only leases of its own session"));
                return false;
            }
            return true;
        }

        private void Refuse(Exception e)
        {
            if (err == null) err = e;
        }

        /// <summary>Whether the operation's outcome is already known without asking the
        /// broker, as ExtendAsync and ReleaseAsync know it.</summary>
        private static bool SettledLocally(Entry e, out Exception error)
        {
            error = null;
            var l = e.Lease;
            if (l == null) return false;
            var lerr = l.Error;
            if (e.Op == "extend" && lerr != null) { error = lerr; return true; }
            if (e.Op == "release" && lerr != null) return true;
            var serr = l.Owner.Error;
            if (e.Op == "release" && serr != null)
            {
                l.End(new LeaseLostException(serr)); // the broker released it when the session ended
                return true;
            }
            return false;
        }

        /// <summary>Applies one broker result to the SDK's handles, as the single operation
        /// would.</summary>
        private BatchResult Settle(Entry e, BatchResultBody r, TimeSpan t0, BatchResult output)
        {
            var error = r.Ok ? null : ResultError(r);
            switch (e.Op)
            {
                case "acquire":
                    if (error == null && r.Lease != null && e.Parsed.HasValue)
                        return new BatchResult(e.Op, e.Route, s.Adopt(e.Parsed.Value, r.Lease, t0, e.Ttl), null);
                    return new BatchResult(e.Op, e.Route, null, error);
                case "extend":
                    if (error == null && r.Lease != null)
                    {
                        try { e.Lease.Extended(r.Lease, t0, e.Ttl); }
                        catch (Exception lost) { return new BatchResult(e.Op, e.Route, e.Lease, lost); }
                        return output;
                    }
                    if (error != null && Lease.OwnershipGone(error))
                    {
                        e.Lease.End(new LeaseLostException(error));
                        return new BatchResult(e.Op, e.Route, e.Lease, e.Lease.Error);
                    }
                    return new BatchResult(e.Op, e.Route, e.Lease, error);
                default:
                    if (error == null) e.Lease.End(new LeaseReleasedException());
                    else if (Lease.OwnershipGone(error)) e.Lease.End(new LeaseLostException(error));
                    else return new BatchResult(e.Op, e.Route, e.Lease, error);
                    return output;
            }
        }

        /// <summary>The MusterException of a failed result, as a problem body with the same
        /// code would make it.</summary>
        private static MusterException ResultError(BatchResultBody r)
        {
            var status = r.Status ?? 0;
            var title = status == 0 ? "" : ((HttpStatusCode)status).ToString();
            return new MusterException(string.IsNullOrEmpty(r.Code) ? "internal" : r.Code, status, title, r.Detail);
        }
    }
}
