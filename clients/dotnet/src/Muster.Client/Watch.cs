using System;
using System.Collections.Generic;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>
    /// One open watch stream. ReadAsync delivers the changes in revision order and
    /// answers null once the stream ended; Error then says why. The stream is never
    /// resumed: after an end, open a new one and rebuild from its marker (or use
    /// Observe, which does all of this). A consumer that stops reading makes the
    /// broker end the stream with an "overflow" StreamEndedException once its queue
    /// fills; nothing is skipped silently.
    /// </summary>
    public sealed partial class Subscription : IDisposable
    {
        private readonly MusterClient c;
        private readonly Session session;
        private readonly Dictionary<string, string> bySub = new Dictionary<string, string>();
        private readonly AsyncQueue<Change> events = new AsyncQueue<Change>(64);
        private readonly CancellationTokenSource cts;
        private readonly HttpResponseMessage resp;
        private Task reader = Task.CompletedTask;
        private Exception error;

        internal Subscription(MusterClient c, Session session, HttpResponseMessage resp, CancellationTokenSource cts)
        {
            this.c = c; this.session = session; this.resp = resp; this.cts = cts;
        }

        /// <summary>The stream's first event.</summary>
        public Marker Marker { get; private set; }

        /// <summary>Null while the stream is open, then why it ended: a
        /// StreamEndedException (with Reason "overflow", "superseded", … or null when the
        /// connection ended), or MusterClosedException after Dispose or the end of the
        /// token given to WatchAsync.</summary>
        public Exception Error { get { lock (bySub) return error; } }

        /// <summary>Completes when the stream has ended and every change was queued.</summary>
        public Task Completion { get { return reader; } }

        /// <summary>The next change; null once the stream ended (see Error).</summary>
        public async Task<Change> ReadAsync(CancellationToken ct = default(CancellationToken))
        {
            while (true)
            {
                Change ch;
                if (events.TryRead(out ch)) return ch;
                if (!await events.WaitToReadAsync(ct).ConfigureAwait(false)) return null;
            }
        }

        internal bool TryRead(out Change ch) { return events.TryRead(out ch); }

        internal Task<bool> WaitToReadAsync(CancellationToken ct) { return events.WaitToReadAsync(ct); }

        /// <summary>A blocking enumerable of the changes, ending with the stream (or ct). It
        /// blocks the calling thread while it waits: use ReadAllAsync.</summary>
        [Obsolete("Changes blocks a thread while it waits for each change; use ReadAllAsync (await foreach) or ReadAsync")]
        public IEnumerable<Change> Changes(CancellationToken ct = default(CancellationToken))
        {
            while (true)
            {
                var ch = ReadAsync(ct).GetAwaiter().GetResult();
                if (ch == null) yield break;
                yield return ch;
            }
        }

        /// <summary>Calls onChange for every change until the stream ends (or ct), on one
        /// thread at a time; completes with the stream.</summary>
        public async Task ForEachAsync(Action<Change> onChange, CancellationToken ct = default(CancellationToken))
        {
            Change ch;
            while ((ch = await ReadAsync(ct).ConfigureAwait(false)) != null) onChange(ch);
        }

        /// <summary>Ends the stream and waits until its reader stopped (DisposeAsync does
        /// not block). The registrations of a session-less stream end with it.</summary>
        public void Dispose()
        {
            CloseAsync().GetAwaiter().GetResult();
        }

        /// <summary>Ends the stream; completes when its reader stopped. Never throws.</summary>
        private async Task CloseAsync()
        {
            Fail(new MusterClosedException());
            try { cts.Cancel(); } catch (ObjectDisposedException) { } // the reader already ended
            resp.Dispose();
            try { await reader.ConfigureAwait(false); } catch (Exception) { }
        }

        /// <summary>Removes the registration of selector (the original string) from the
        /// session; the broker ends the stream with "unsubscribed" when it was the last.
        /// A session-less stream answers InvalidRequest: dispose it instead.</summary>
        public Task UnsubscribeAsync(string selector, CancellationToken ct = default(CancellationToken))
        {
            if (session == null)
            {
                throw new MusterException(ErrorCode.InvalidRequest, "a session-less stream has no registration to remove: Close it");
            }
            return c.CallAsync<object>(HttpMethod.Delete,
                "/v1/sessions/" + MusterClient.Seg(session.Id) + "/subscriptions" + MusterClient.Query("selector", selector), null, 204, ct);
        }

        private void Fail(Exception e)
        {
            lock (bySub) if (error == null) error = e;
        }

        internal async Task ReadMarkerAsync(SseReader rd, CancellationToken ct)
        {
            SseEvent ev;
            try
            {
                ev = await rd.NextAsync(ct).ConfigureAwait(false);
            }
            catch (Exception e) when (!(e is OperationCanceledException) && !ct.IsCancellationRequested)
            {
                throw new StreamEndedException("before its marker: " + e.Message, e);
            }
            if (ev == null) throw new StreamEndedException("before its marker: the connection ended", null);
            if (ev.Name != "snapshot")
            {
                var end = StreamEnd(ev);
                if (end != null) throw end;
                throw new System.IO.InvalidDataException("muster: the first event of a watch stream is \"" + ev.Name + "\", not snapshot");
            }
            SnapshotEvent m;
            try { m = Json.Decode<SnapshotEvent>(ev.Data); }
            catch (Newtonsoft.Json.JsonException e) { throw new System.IO.InvalidDataException("muster: decoding the snapshot marker: " + e.Message, e); }
            var pages = new List<MarkerPage>();
            if (m.Subscriptions != null)
            {
                foreach (var s in m.Subscriptions)
                {
                    bySub[s.Id ?? ""] = s.Selector;
                    pages.Add(new MarkerPage { Selector = s.Selector, Items = LeaseItem.ToItems(s.Items), NextCursor = string.IsNullOrEmpty(s.NextCursor) ? null : s.NextCursor });
                }
            }
            Marker = new Marker { Epoch = m.Epoch, Revision = m.Revision, Selectors = pages };
        }

        internal void Start(SseReader rd) { reader = Task.Run(() => ReadLoopAsync(rd, cts.Token)); }

        private async Task ReadLoopAsync(SseReader rd, CancellationToken ct)
        {
            try
            {
                using (ct.Register(resp.Dispose))
                {
                    while (true)
                    {
                        SseEvent ev;
                        try
                        {
                            ev = await rd.NextAsync(ct).ConfigureAwait(false);
                        }
                        catch (Exception e)
                        {
                            Fail(ct.IsCancellationRequested ? (Exception)new MusterClosedException() : new StreamEndedException(e.Message, e));
                            return;
                        }
                        if (ev == null)
                        {
                            Fail(ct.IsCancellationRequested ? (Exception)new MusterClosedException() : new StreamEndedException("the connection ended", null));
                            return;
                        }
                        if (ev.Name != "change")
                        {
                            var end = StreamEnd(ev);
                            if (end != null)
                            {
                                Fail(end);
                                return;
                            }
                            continue; // an event this SDK does not know: ignored, for compatibility
                        }
                        Change ch;
                        try
                        {
                            var w = Json.Decode<ChangeEvent>(ev.Data);
                            string sel;
                            bySub.TryGetValue(w.SubscriptionId ?? "", out sel);
                            ch = new Change { Selector = sel, Route = w.Route, Kind = w.Kind, Revision = w.Revision, Item = w.Item != null ? w.Item.ToItem() : null };
                        }
                        catch (Newtonsoft.Json.JsonException e)
                        {
                            Fail(new StreamEndedException("undecodable change: " + e.Message, e));
                            return;
                        }
                        try
                        {
                            if (!await events.WriteAsync(ch, ct).ConfigureAwait(false)) return;
                        }
                        catch (OperationCanceledException)
                        {
                            Fail(new MusterClosedException());
                            return;
                        }
                    }
                }
            }
            finally
            {
                events.Complete();
                resp.Dispose();
                cts.Dispose(); // unlinks it from the token given to WatchAsync
            }
        }

        /// <summary>Decodes a terminal event, null for any other event.</summary>
        internal static StreamEndedException StreamEnd(SseEvent ev)
        {
            switch (ev.Name)
            {
                case "overflow": case "superseded": case "unsubscribed": case "session_closed": case "shutdown": case "moved": break;
                default: return null;
            }
            long rev = 0;
            try
            {
                var e = Json.Decode<StreamEndEvent>(ev.Data);
                if (e != null && e.Revision.HasValue) rev = e.Revision.Value;
            }
            catch (Newtonsoft.Json.JsonException) { }
            return new StreamEndedException(ev.Name, rev);
        }
    }

    public sealed partial class MusterClient
    {
        /// <summary>Opens a watch stream over selectors (1..32) as its own read-only session
        /// and returns once the marker has arrived. ct bounds the whole stream:
        /// cancelling it ends the stream like Dispose.</summary>
        public Task<Subscription> WatchAsync(IEnumerable<string> selectors, CancellationToken ct = default(CancellationToken))
        {
            return WatchAsync(null, selectors, ct);
        }

        /// <summary>WatchAsync of one selector.</summary>
        public Task<Subscription> WatchAsync(string selector, CancellationToken ct = default(CancellationToken))
        {
            return WatchAsync(null, new[] { selector }, ct);
        }

        internal async Task<Subscription> WatchAsync(Session s, IEnumerable<string> selectors, CancellationToken ct)
        {
            var sels = selectors == null ? new List<string>() : selectors.ToList();
            if (sels.Count == 0) throw new MusterException(ErrorCode.InvalidSelector, "Watch needs at least one selector");
            var q = new StringBuilder();
            foreach (var sel in sels) q.Append(q.Length == 0 ? '?' : '&').Append("selector=").Append(Uri.EscapeDataString(sel ?? ""));
            var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
            HttpResponseMessage resp = null;
            try
            {
                using (var req = Request(HttpMethod.Get, "/v1/leases/watch" + q, null))
                {
                    req.Headers.Accept.ParseAdd("text/event-stream");
                    if (s != null) req.Headers.Add("Muster-Session", s.Id);
                    resp = await SendAsync(req, HttpCompletionOption.ResponseHeadersRead, cts.Token).ConfigureAwait(false);
                }
                SawEpoch(resp);
                var mt = resp.Content != null && resp.Content.Headers.ContentType != null ? resp.Content.Headers.ContentType.MediaType : "";
                if ((int)resp.StatusCode != 200 || mt != "text/event-stream")
                {
                    var body = await ReadBodyAsync(resp, cts.Token).ConfigureAwait(false);
                    if ((int)resp.StatusCode == 200) throw new System.IO.InvalidDataException("muster: watch answered \"" + mt + "\", not an event stream");
                    throw Problem(resp, body);
                }
                var sub = new Subscription(this, s, resp, cts);
                var stream = await resp.Content.ReadAsStreamAsync().ConfigureAwait(false);
                var rd = new SseReader(stream);
                using (cts.Token.Register(resp.Dispose))
                {
                    try
                    {
                        await sub.ReadMarkerAsync(rd, cts.Token).ConfigureAwait(false);
                    }
                    catch (Exception) when (cts.IsCancellationRequested)
                    {
                        throw new OperationCanceledException(ct);
                    }
                }
                sub.Start(rd);
                return sub;
            }
            catch (Exception)
            {
                cts.Cancel();
                if (resp != null) resp.Dispose();
                throw;
            }
        }
    }
}
