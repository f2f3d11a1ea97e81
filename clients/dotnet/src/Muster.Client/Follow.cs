using System;
using System.Collections.Generic;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    // Several brokers (docs/client-operations.md, "Several brokers"): the broker of every
    // request, observer page and watch stream. A request goes to the owner a wrong_broker
    // answer named, else to the current base URL. A connection error or family_unavailable
    // from that broker moves the client on: the owner is forgotten, or the current base
    // URL becomes the next one. A request the broker certainly did not act on (the
    // connection could not be made, 421, family_unavailable) is sent again at once to the
    // new target, each request reaching at most every base URL once plus MaxFollows
    // owners; any other failure is returned, and the caller's next attempt goes to the new
    // target. An owner comes from a broker of the deployment, which the client trusts with
    // its token already.

    public sealed partial class MusterClient
    {
        /// <summary>Bounds the brokers one request is sent to after the first (following wrong_broker).</summary>
        public const int MaxFollows = 2;

        private readonly Uri[] bases; // the base URLs, in order of preference
        private readonly bool follow;
        private Uri owner; // the owner a wrong_broker answer named (under lock(this)); null: none
        private int cur;   // the current base URL (under lock(this))

        /// <summary>Conformance tests only: never forget an owner that stopped answering.</summary>
        internal bool StickyOwner { get; set; }

        /// <summary>Conformance tests only: every base URL but the first is ignored.</summary>
        internal bool SingleBroker { get; set; }

        /// <summary>Conformance tests only: a family_unavailable answer moves the client
        /// nowhere (it still ends the sessions of the broker that answered it).</summary>
        internal bool StayOnUnavailable { get; set; }

        /// <summary>The base URLs in use (the first alone for SingleBroker).</summary>
        private int BaseCount { get { return SingleBroker ? 1 : bases.Length; } }

        /// <summary>Reads the base URL argument: one base URL, or several separated by
        /// commas (as MUSTER_ADDR may hold them), in order of preference.</summary>
        internal static Uri[] ParseBases(string baseUrls)
        {
            if (baseUrls == null) return ParseBases(new string[] { null });
            return ParseBases(baseUrls.Split(','));
        }

        internal static Uri[] ParseBases(IEnumerable<string> baseUrls)
        {
            var list = new List<Uri>();
            foreach (var raw in baseUrls ?? Enumerable.Empty<string>())
            {
                var s = raw == null ? null : raw.Trim().TrimEnd('/');
                Uri u;
                if (s == null || !Uri.TryCreate(s, UriKind.Absolute, out u) ||
                    (u.Scheme != "http" && u.Scheme != "https") || string.IsNullOrEmpty(u.Host))
                {
                    throw new ArgumentException(string.Format("muster: base URL \"{0}\": want http(s)://host[:port], or several separated by commas", s), "baseUrl");
                }
                list.Add(u);
            }
            if (list.Count == 0) throw new ArgumentException("muster: no base URL: want http(s)://host[:port], or several separated by commas", "baseUrls");
            return list.ToArray();
        }

        /// <summary>Where the next request goes: the owner, else the current base URL.</summary>
        private Uri Target()
        {
            lock (this) return owner ?? bases[cur];
        }

        /// <summary>Leaves t, which failed: the owner is forgotten, or the current base URL
        /// becomes the next one (unless another request moved on already).</summary>
        private void MoveOn(Uri t)
        {
            lock (this)
            {
                if (ReferenceEquals(t, owner))
                {
                    if (!StickyOwner) owner = null;
                }
                else if (owner == null && ReferenceEquals(t, bases[cur]))
                {
                    cur = (cur + 1) % BaseCount;
                }
            }
        }

        /// <summary>Sends req to the broker the rule picks, following wrong_broker (unless
        /// WithoutFollow) and moving on from a broker that failed; cancelling ct aborts
        /// the request promptly, even while the server hangs. Every family_unavailable
        /// answer heard, also one sent on to another broker, ends the sessions of the
        /// broker that answered it (prompt loss).</summary>
        internal async Task<HttpResponseMessage> SendAsync(HttpRequestMessage req, HttpCompletionOption opt, CancellationToken ct)
        {
            byte[] body = req.Content == null ? null : await req.Content.ReadAsByteArrayAsync().ConfigureAwait(false);
            int follows = 0, fails = 0;
            for (int sent = 0; ; sent++)
            {
                var t = Target();
                HttpRequestMessage msg;
                if (sent == 0)
                {
                    req.RequestUri = Retarget(req.RequestUri, t);
                    msg = req;
                }
                else
                {
                    msg = Resend(req, body, t);
                }
                HttpResponseMessage resp;
                try
                {
                    resp = await SendOnceAsync(msg, opt, ct).ConfigureAwait(false);
                }
                catch (Exception e) when (!ct.IsCancellationRequested) // the caller giving up is no broker's failure
                {
                    MoveOn(t);
                    if (NotSent(e) && ++fails < BaseCount + MaxFollows) continue;
                    if (MusterTransportException.Is(e)) throw new MusterTransportException(e);
                    throw;
                }
                int status = (int)resp.StatusCode;
                if (status != 503 && (status != 421 || !follow || follows >= MaxFollows)) return resp;
                var text = await ReadBodyAsync(resp, ct).ConfigureAwait(false);
                Restore(resp, text);
                var mt = resp.Content.Headers.ContentType != null ? resp.Content.Headers.ContentType.MediaType : "";
                if (status == 503)
                {
                    if (!IsProblem(mt, text, "family_unavailable")) return resp;
                    BrokerGone(AnsweredBy(resp), null);
                    if (StayOnUnavailable) return resp;
                    MoveOn(t);
                    if (++fails < BaseCount + MaxFollows && (BaseCount > 1 || !ReferenceEquals(t, bases[0])))
                    {
                        resp.Dispose();
                        continue;
                    }
                    return resp;
                }
                var to = MisdirectedTo(mt, text);
                if (to == null) return resp;
                follows++;
                lock (this) owner = to;
                resp.Dispose();
            }
        }

        /// <summary>uri with the scheme, host and port of t.</summary>
        private static Uri Retarget(Uri uri, Uri t)
        {
            if (uri.Scheme == t.Scheme && uri.Host == t.Host && uri.Port == t.Port) return uri;
            return new UriBuilder(uri) { Scheme = t.Scheme, Host = t.Host, Port = t.Port }.Uri;
        }

        /// <summary>A copy of req (its headers, the body read before) sent to t.</summary>
        private static HttpRequestMessage Resend(HttpRequestMessage req, byte[] body, Uri t)
        {
            var msg = new HttpRequestMessage(req.Method, Retarget(req.RequestUri, t));
            foreach (var h in req.Headers) msg.Headers.TryAddWithoutValidation(h.Key, h.Value);
            if (body != null)
            {
                msg.Content = new ByteArrayContent(body);
                foreach (var h in req.Content.Headers) msg.Content.Headers.TryAddWithoutValidation(h.Key, h.Value);
            }
            return msg;
        }

        /// <summary>Puts the body read from resp back, with its content headers, for the caller to read.</summary>
        private static void Restore(HttpResponseMessage resp, string text)
        {
            var old = resp.Content;
            var content = new ByteArrayContent(Encoding.UTF8.GetBytes(text));
            if (old != null)
            {
                foreach (var h in old.Headers)
                {
                    if (!string.Equals(h.Key, "Content-Length", StringComparison.OrdinalIgnoreCase)) content.Headers.TryAddWithoutValidation(h.Key, h.Value);
                }
                old.Dispose();
            }
            resp.Content = content;
        }

        /// <summary>Whether err proves the request never reached a broker: the connection
        /// could not be made (refused, no such host, no route).</summary>
        internal static bool NotSent(Exception err)
        {
            var todo = new Stack<Exception>();
            todo.Push(err);
            while (todo.Count > 0)
            {
                var e = todo.Pop();
                if (e == null) continue;
                var se = e as SocketException;
                if (se != null)
                {
                    switch (se.SocketErrorCode)
                    {
                        case SocketError.ConnectionRefused:
                        case SocketError.HostNotFound:
                        case SocketError.HostUnreachable:
                        case SocketError.NetworkUnreachable:
                        case SocketError.AddressNotAvailable:
                            return true;
                    }
                }
                var we = e as WebException;
                if (we != null && (we.Status == WebExceptionStatus.ConnectFailure || we.Status == WebExceptionStatus.NameResolutionFailure)) return true;
                var ae = e as AggregateException;
                if (ae != null) foreach (var x in ae.InnerExceptions) todo.Push(x);
                else todo.Push(e.InnerException);
            }
            return false;
        }

        /// <summary>Whether a body of media type mediaType is a problem of code.</summary>
        private static bool IsProblem(string mediaType, string body, string code)
        {
            return (mediaType ?? "").Split(';')[0].Trim().ToLowerInvariant() == "application/problem+json" && Member(body, "code") == code;
        }

        /// <summary>The owner a 421 answer names, when it is a wrong_broker problem with an
        /// http(s) URL with a host; null otherwise (never throws).</summary>
        internal static Uri MisdirectedTo(string mediaType, string body)
        {
            if (!IsProblem(mediaType, body, "wrong_broker")) return null;
            Uri u;
            if (!Uri.TryCreate(Member(body, "owner") ?? "", UriKind.Absolute, out u)) return null;
            return (u.Scheme == "http" || u.Scheme == "https") && !string.IsNullOrEmpty(u.Host) ? u : null;
        }
    }
}
