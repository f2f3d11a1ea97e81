using System;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Net.Http.Headers;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>Configures a MusterClient.</summary>
    public sealed class MusterClientOptions
    {
        /// <summary>Sent as the bearer token of every request. A broker in dev mode accepts none.</summary>
        public string Token { get; set; }

        /// <summary>
        /// The HttpClient for every request (the client does not dispose it). Its
        /// Timeout applies to every request, so it must be infinite or longer than
        /// the longest acquire wait; streams are read with ResponseHeadersRead and
        /// end by their CancellationToken or Dispose. Null: the client creates one
        /// with an infinite Timeout and up to 256 connections per server (watch
        /// streams hold a connection each).
        /// </summary>
        public HttpClient HttpClient { get; set; }

        /// <summary>
        /// Turns off following wrong_broker answers (Go: WithoutFollow): a request for a
        /// family that another broker serves then fails with a MusterException
        /// WrongBroker whose Owner names that broker. Default false: the client follows.
        /// </summary>
        public bool WithoutFollow { get; set; }

        /// <summary>
        /// A PEM file of certificate authorities to trust for an https:// broker whose
        /// certificate a private CA signed (Go: WithCAFile; the CLI's --ca-file): the
        /// server certificate is accepted when its chain ends at one of the file's
        /// certificates or at a root the platform already trusts, and names the host of
        /// the URL; nothing else about validation changes. The constructor reads the file:
        /// IOException when it cannot, ArgumentException when it holds no certificate.
        /// It configures the HttpClient the client creates, so it cannot be combined with
        /// HttpClient (ArgumentException): give your own handler a
        /// ServerCertificateCustomValidationCallback instead (a client certificate for
        /// mutual TLS goes there too: this SDK has no option for one). Needs
        /// HttpClientHandler.ServerCertificateCustomValidationCallback (.NET Core 2.0+,
        /// .NET Framework 4.7.1+, Mono 5+). See docs/operations.md, "TLS".
        /// </summary>
        public string CaFile { get; set; }
    }

    /// <summary>
    /// Talks to one broker, or to a deployment of several. Safe for concurrent use; it
    /// holds no state besides its configuration, one HttpClient, the last epoch it saw,
    /// the broker it sends to and its live sessions (for prompt loss: a session is lost
    /// as soon as an answer of the broker that holds it shows that it ended, see
    /// Session). Dispose releases the HttpClient it created.
    /// In a multi-broker deployment (docs/placement.md) every request, observer and watch
    /// stream picks its broker by the rule of docs/client-operations.md, "Several
    /// brokers" (Follow.cs): the owner a 421 wrong_broker named (at most MaxFollows hops
    /// per request), else the current base URL; a connection error or family_unavailable
    /// moves the client on, and a request the broker certainly did not act on is sent
    /// again at once (MusterClientOptions.WithoutFollow turns following 421s off).
    /// </summary>
    public sealed partial class MusterClient : IDisposable
    {
        /// <summary>Bounds the bytes read from one non-streaming response.</summary>
        internal const int MaxBody = 32 << 20;

        private readonly string baseUrl;
        private readonly string token;
        private readonly HttpClient http;
        private readonly bool ownsHttp;
        private string epoch = "";

        /// <summary>Conformance tests only: a lease's loss is never reported (Lost is never cancelled).</summary>
        internal bool NeverLost { get; set; }

        /// <summary>Conformance tests only: a grant's local deadline is the old send + TTL,
        /// ignoring expires_after_request_ms (a wait in the queue makes it early).</summary>
        internal bool SendPlusTtl { get; set; }

        /// <summary>A client of the broker at baseUrl (e.g. "http://127.0.0.1:7420"), or of
        /// a deployment of several brokers: baseUrl may list their base URLs separated by
        /// commas, in order of preference, as MUSTER_ADDR may (docs/client-operations.md,
        /// "Several brokers"). Throws ArgumentException for anything but
        /// http(s)://host[:port], or several of them separated by commas.</summary>
        public MusterClient(string baseUrl, MusterClientOptions options = null)
            : this(ParseBases(baseUrl), options)
        {
        }

        /// <summary>A client of a deployment of several brokers, given their base URLs in
        /// order of preference (docs/client-operations.md, "Several brokers"). Throws
        /// ArgumentException for an empty list or any URL but http(s)://host[:port].</summary>
        public MusterClient(System.Collections.Generic.IEnumerable<string> baseUrls, MusterClientOptions options = null)
            : this(ParseBases(baseUrls), options)
        {
        }

        private MusterClient(Uri[] bases, MusterClientOptions options)
        {
            this.bases = bases;
            baseUrl = bases[0].OriginalString;
            options = options ?? new MusterClientOptions();
            token = options.Token;
            follow = !options.WithoutFollow;
            if (options.HttpClient != null)
            {
                if (options.CaFile != null)
                {
                    throw new ArgumentException("muster: CaFile configures the client's own HttpClient: with MusterClientOptions.HttpClient, give its handler a ServerCertificateCustomValidationCallback instead");
                }
                http = options.HttpClient;
            }
            else
            {
                var trust = options.CaFile == null ? null : CaTrust.Load(options.CaFile);
                var h = new HttpClientHandler();
                try { h.MaxConnectionsPerServer = 256; } catch (PlatformNotSupportedException) { }
                if (trust != null) trust.Apply(h);
                http = new HttpClient(h) { Timeout = Timeout.InfiniteTimeSpan };
                ownsHttp = true;
            }
        }

        /// <summary>The (first) broker's base URL, without a trailing slash.</summary>
        public string BaseUrl { get { return baseUrl; } }

        /// <summary>Every base URL the client was given, in order of preference, each without a trailing slash.</summary>
        public System.Collections.Generic.IReadOnlyList<string> BaseUrls
        {
            get { return Array.AsReadOnly(bases.Select(b => b.OriginalString).ToArray()); }
        }

        /// <summary>The broker lifetime (Muster-Epoch header) of the last response, "" before the first.</summary>
        public string Epoch { get { lock (this) return epoch; } }

        public void Dispose()
        {
            if (ownsHttp) http.Dispose();
        }

        internal static string Seg(string s) { return Uri.EscapeDataString(s); }

        internal static string Query(params string[] kv)
        {
            var sb = new StringBuilder();
            for (int i = 0; i + 1 < kv.Length; i += 2)
            {
                if (kv[i + 1] == null) continue;
                sb.Append(sb.Length == 0 ? '?' : '&').Append(kv[i]).Append('=').Append(Uri.EscapeDataString(kv[i + 1]));
            }
            return sb.ToString();
        }

        internal HttpRequestMessage Request(HttpMethod method, string pathAndQuery, object body)
        {
            var req = new HttpRequestMessage(method, baseUrl + pathAndQuery);
            if (!string.IsNullOrEmpty(token)) req.Headers.Authorization = new AuthenticationHeaderValue("Bearer", token);
            if (body != null) req.Content = new StringContent(Json.Encode(body), Encoding.UTF8, "application/json");
            return req;
        }

        /// <summary>The answer's Muster-Epoch, "" when it has none.</summary>
        internal static string EpochOf(HttpResponseMessage resp)
        {
            System.Collections.Generic.IEnumerable<string> v;
            return resp.Headers.TryGetValues("Muster-Epoch", out v) ? v.FirstOrDefault() ?? "" : "";
        }

        internal void SawEpoch(HttpResponseMessage resp)
        {
            System.Collections.Generic.IEnumerable<string> v;
            if (resp.Headers.TryGetValues("Muster-Epoch", out v))
            {
                var e = v.FirstOrDefault();
                if (string.IsNullOrEmpty(e)) return;
                lock (this) epoch = e;
                BrokerGone(AnsweredBy(resp), e);
            }
        }

        /// <summary>Runs one request/response operation: a status other than want becomes
        /// a MusterException; the JSON body is decoded into T (null for want 204).
        /// answeredBy, when given, receives the host that answered (AnsweredBy). session, when
        /// given, is the session whose own request this is: an answer of success first records
        /// its broker as the session's (Session.AnsweredBy), then prompt loss judges it.</summary>
        internal async Task<T> CallAsync<T>(HttpMethod method, string pathAndQuery, object body, int want, CancellationToken ct,
            System.Runtime.CompilerServices.StrongBox<string> answeredBy = null, Session session = null)
            where T : class
        {
            using (var req = Request(method, pathAndQuery, body))
            using (var resp = await SendAsync(req, HttpCompletionOption.ResponseHeadersRead, ct).ConfigureAwait(false))
            {
                if (answeredBy != null) answeredBy.Value = AnsweredBy(resp);
                if (session != null && resp.IsSuccessStatusCode) session.AnsweredBy(AnsweredBy(resp), EpochOf(resp));
                SawEpoch(resp);
                var text = await ReadBodyAsync(resp, ct).ConfigureAwait(false);
                if ((int)resp.StatusCode != want) throw Problem(resp, text);
                if (typeof(T) == typeof(object) || want == 204) return null;
                try
                {
                    return Json.Decode<T>(text);
                }
                catch (Newtonsoft.Json.JsonException e)
                {
                    throw new InvalidDataException(string.Format("muster: decoding a {0} answer: {1}", (int)resp.StatusCode, e.Message), e);
                }
            }
        }

        /// <summary>Sends req once; cancelling ct aborts the request promptly, even while the server hangs.</summary>
        private async Task<HttpResponseMessage> SendOnceAsync(HttpRequestMessage req, HttpCompletionOption opt, CancellationToken ct)
        {
            ct.ThrowIfCancellationRequested();
            var send = http.SendAsync(req, opt, ct);
            var cancelled = new TaskCompletionSource<bool>();
            using (ct.Register(() => cancelled.TrySetResult(true)))
            {
                if (await Task.WhenAny(send, cancelled.Task).ConfigureAwait(false) != send)
                {
                    DisposeLate(send);
                    throw new OperationCanceledException(ct);
                }
            }
            try
            {
                var resp = await send.ConfigureAwait(false);
                if (resp.RequestMessage == null) resp.RequestMessage = req; // AnsweredBy reads it
                return resp;
            }
            catch (TaskCanceledException) when (!ct.IsCancellationRequested)
            {
                throw new TimeoutException("muster: the HttpClient's Timeout elapsed");
            }
        }

        /// <summary>Disposes the answer of an abandoned request when it arrives (and observes its failure).</summary>
        private static void DisposeLate(Task<HttpResponseMessage> send)
        {
            send.ContinueWith(t =>
            {
                if (t.Status == TaskStatus.RanToCompletion) t.Result.Dispose();
                else GC.KeepAlive(t.Exception);
            }, TaskContinuationOptions.ExecuteSynchronously);
        }

        /// <summary>Reads at most MaxBody bytes of a response body; aborts on ct. A failure
        /// of the connection is a MusterTransportException.</summary>
        internal static async Task<string> ReadBodyAsync(HttpResponseMessage resp, CancellationToken ct)
        {
            if (resp.Content == null) return "";
            using (ct.Register(resp.Dispose))
            {
                try
                {
                    var s = await resp.Content.ReadAsStreamAsync().ConfigureAwait(false);
                    var ms = new MemoryStream();
                    var b = new byte[16 << 10];
                    int n;
                    while ((n = await s.ReadAsync(b, 0, b.Length, ct).ConfigureAwait(false)) > 0)
                    {
                        if (ms.Length + n > MaxBody) throw new InvalidDataException("muster: the answer is larger than 32 MiB");
                        ms.Write(b, 0, n);
                    }
                    return Encoding.UTF8.GetString(ms.GetBuffer(), 0, (int)ms.Length);
                }
                catch (Exception) when (ct.IsCancellationRequested)
                {
                    throw new OperationCanceledException(ct);
                }
                catch (Exception e) when (MusterTransportException.Is(e))
                {
                    throw new MusterTransportException(e);
                }
            }
        }

        /// <summary>
        /// Turns a non-success answer into a MusterException: the problem body's code
        /// when there is one; otherwise a code derived from the status, so a gateway's
        /// 502 is still advised as retryable. Never throws while parsing.
        /// </summary>
        internal static MusterException ProblemError(HttpResponseMessage resp, string body)
        {
            string mt = resp.Content != null && resp.Content.Headers.ContentType != null ? resp.Content.Headers.ContentType.MediaType : "";
            return ProblemError((int)resp.StatusCode, mt, body);
        }

        internal static MusterException ProblemError(int status, string mediaType, string body)
        {
            string title = StatusText(status);
            mediaType = (mediaType ?? "").Split(';')[0].Trim().ToLowerInvariant();
            if (mediaType == "application/problem+json" || mediaType == "application/json")
            {
                var code = Member(body, "code");
                if (!string.IsNullOrEmpty(code))
                {
                    var t = Member(body, "title");
                    return new MusterException(code, status, string.IsNullOrEmpty(t) ? title : t, Member(body, "detail"), Member(body, "scope"), Member(body, "owner"));
                }
            }
            ErrorCode c;
            switch (status)
            {
                case 502: case 503: case 504: c = ErrorCode.Unavailable; break;
                case 404: c = ErrorCode.NotFound; break;
                case 401: c = ErrorCode.Unauthenticated; break;
                case 403: c = ErrorCode.Forbidden; break;
                case 413: c = ErrorCode.PayloadTooLarge; break;
                default: c = ErrorCode.Internal; break;
            }
            body = (body ?? "");
            if (body.Length > 200) body = body.Substring(0, 200);
            return new MusterException(ErrorCodes.Name(c), status, title,
                string.Format(CultureInfo.InvariantCulture, "HTTP {0} without a problem body: {1}", status, body.Trim()));
        }

        /// <summary>A string member of a JSON object body; null for anything else (never throws).</summary>
        private static string Member(string body, string name)
        {
            try
            {
                var o = Newtonsoft.Json.JsonConvert.DeserializeObject(body ?? "", Json.Settings) as Newtonsoft.Json.Linq.JObject;
                var v = o == null ? null : o[name] as Newtonsoft.Json.Linq.JValue;
                return v != null && v.Type == Newtonsoft.Json.Linq.JTokenType.String ? (string)v.Value : null;
            }
            catch (Exception)
            {
                return null;
            }
        }

        private static string StatusText(int status)
        {
            switch (status)
            {
                case 400: return "Bad Request";
                case 401: return "Unauthorized";
                case 403: return "Forbidden";
                case 404: return "Not Found";
                case 405: return "Method Not Allowed";
                case 409: return "Conflict";
                case 410: return "Gone";
                case 413: return "Request Entity Too Large";
                case 429: return "Too Many Requests";
                case 500: return "Internal Server Error";
                case 501: return "Not Implemented";
                case 502: return "Bad Gateway";
                case 503: return "Service Unavailable";
                case 504: return "Gateway Timeout";
                default: return ((HttpStatusCode)status).ToString();
            }
        }

        internal static long Ms(TimeSpan d) { return (long)d.TotalMilliseconds; }
    }
}
