using System;
using System.Collections.Generic;

namespace Muster.Client
{
    /// <summary>
    /// The stable error codes of the Muster contract (openapi.yaml's ErrorCode, an
    /// open string whose known codes are listed under x-extensible-enum), in the
    /// contract's order. Codes are append-only and never renamed: a broker
    /// newer than this SDK may answer a code this enum does not list; it then
    /// reaches the caller as <see cref="Unknown"/> with the wire string kept in
    /// <see cref="MusterException.CodeName"/>.
    /// </summary>
    public enum ErrorCode
    {
        /// <summary>A code this SDK does not know (see MusterException.CodeName).</summary>
        Unknown = 0,
        InvalidRoute,
        InvalidSelector,
        InvalidRequest,
        Unauthenticated,
        Forbidden,
        SessionNotFound,
        LeaseHeld,
        AlreadyQueued,
        WaitTimeout,
        QueueFull,
        NotOwner,
        Fenced,
        LeaseExpired,
        InvalidCursor,
        CursorExpired,
        EpochChanged,
        SubscriptionLimit,
        InventoryUnavailable,
        InvalidName,
        SpecNotFound,
        PayloadTooLarge,
        Internal,
        NotFound,
        MethodNotAllowed,
        NotImplemented,
        Unavailable,
        SessionLimit,
        SpecLimit,
        WrongBroker,
        FamilyUnavailable,
    }

    /// <summary>What to do after an error; see <see cref="ErrorCodes.Advice(Exception)"/>.</summary>
    public enum RetryAdvice
    {
        /// <summary>The same request fails again: fix the input, the configuration or the grants.</summary>
        No,
        /// <summary>The same request may succeed later: retry with exponential backoff and jitter.</summary>
        Backoff,
        /// <summary>The state the request relied on is gone (a lease, a session, a cursor's
        /// snapshot, a broker lifetime): start over from fresh state.</summary>
        Restart,
    }

    /// <summary>The code table: wire names and retry advice, as in the Go SDK (errors.go).</summary>
    public static class ErrorCodes
    {
        private static readonly Dictionary<string, ErrorCode> byName = new Dictionary<string, ErrorCode>(StringComparer.Ordinal);
        private static readonly Dictionary<ErrorCode, string> names = new Dictionary<ErrorCode, string>();
        private static readonly Dictionary<ErrorCode, RetryAdvice> advice = new Dictionary<ErrorCode, RetryAdvice>();

        static ErrorCodes()
        {
            Add(ErrorCode.InvalidRoute, "invalid_route", RetryAdvice.No);
            Add(ErrorCode.InvalidSelector, "invalid_selector", RetryAdvice.No);
            Add(ErrorCode.InvalidRequest, "invalid_request", RetryAdvice.No);
            Add(ErrorCode.Unauthenticated, "unauthenticated", RetryAdvice.No);
            Add(ErrorCode.Forbidden, "forbidden", RetryAdvice.No);
            Add(ErrorCode.SessionNotFound, "session_not_found", RetryAdvice.Restart);
            Add(ErrorCode.LeaseHeld, "lease_held", RetryAdvice.Backoff);
            Add(ErrorCode.AlreadyQueued, "already_queued", RetryAdvice.No);
            Add(ErrorCode.WaitTimeout, "wait_timeout", RetryAdvice.Backoff);
            Add(ErrorCode.QueueFull, "queue_full", RetryAdvice.Backoff);
            Add(ErrorCode.NotOwner, "not_owner", RetryAdvice.Restart);
            Add(ErrorCode.Fenced, "fenced", RetryAdvice.Restart);
            Add(ErrorCode.LeaseExpired, "lease_expired", RetryAdvice.Restart);
            Add(ErrorCode.InvalidCursor, "invalid_cursor", RetryAdvice.No);
            Add(ErrorCode.CursorExpired, "cursor_expired", RetryAdvice.Restart);
            Add(ErrorCode.EpochChanged, "epoch_changed", RetryAdvice.Restart);
            Add(ErrorCode.SubscriptionLimit, "subscription_limit", RetryAdvice.No);
            Add(ErrorCode.InventoryUnavailable, "inventory_unavailable", RetryAdvice.Backoff);
            Add(ErrorCode.InvalidName, "invalid_name", RetryAdvice.No);
            Add(ErrorCode.SpecNotFound, "spec_not_found", RetryAdvice.No);
            Add(ErrorCode.PayloadTooLarge, "payload_too_large", RetryAdvice.No);
            Add(ErrorCode.Internal, "internal", RetryAdvice.Backoff);
            Add(ErrorCode.NotFound, "not_found", RetryAdvice.No);
            Add(ErrorCode.MethodNotAllowed, "method_not_allowed", RetryAdvice.No);
            Add(ErrorCode.NotImplemented, "not_implemented", RetryAdvice.No);
            Add(ErrorCode.Unavailable, "unavailable", RetryAdvice.Backoff);
            Add(ErrorCode.SessionLimit, "session_limit", RetryAdvice.Backoff);
            Add(ErrorCode.SpecLimit, "spec_limit", RetryAdvice.No);
            Add(ErrorCode.WrongBroker, "wrong_broker", RetryAdvice.Restart);
            Add(ErrorCode.FamilyUnavailable, "family_unavailable", RetryAdvice.Backoff);
        }

        private static void Add(ErrorCode c, string name, RetryAdvice a)
        {
            byName[name] = c;
            names[c] = name;
            advice[c] = a;
        }

        /// <summary>Every code this SDK knows, in the contract's order.</summary>
        public static IReadOnlyList<ErrorCode> All
        {
            get
            {
                var l = new List<ErrorCode>();
                foreach (ErrorCode c in Enum.GetValues(typeof(ErrorCode)))
                {
                    if (c != ErrorCode.Unknown) l.Add(c);
                }
                return l;
            }
        }

        /// <summary>The code of a wire name; Unknown for a name this SDK does not know
        /// (never throws).</summary>
        public static ErrorCode Parse(string name)
        {
            ErrorCode c;
            return name != null && byName.TryGetValue(name, out c) ? c : ErrorCode.Unknown;
        }

        /// <summary>The wire name of a known code ("" for Unknown).</summary>
        public static string Name(ErrorCode code)
        {
            string n;
            return names.TryGetValue(code, out n) ? n : "";
        }

        /// <summary>
        /// What to do after an exception. A broker error by its code (an unknown code by
        /// its status: 5xx and 429 back off, anything else does not retry); a transport
        /// failure (MusterTransportException) backs off; a lost lease, a lost session and
        /// an ended stream advise a restart; a released lease, a closed object,
        /// cancellation and any exception this SDK does not know (a bug, a malformed
        /// answer: InvalidDataException) advise no retry, so a retry policy on
        /// IsRetryable never loops on them. An AggregateException of one exception is
        /// advised by that exception.
        /// </summary>
        public static RetryAdvice Advice(Exception ex)
        {
            if (ex == null) return RetryAdvice.No;
            if (ex is MusterTransportException) return RetryAdvice.Backoff;
            if (ex is LeaseLostException || ex is SessionLostException || ex is StreamEndedException) return RetryAdvice.Restart;
            if (ex is LeaseReleasedException || ex is MusterClosedException || ex is OperationCanceledException) return RetryAdvice.No;
            var m = ex as MusterException;
            if (m != null)
            {
                RetryAdvice a;
                if (advice.TryGetValue(m.Code, out a)) return a;
                return m.Status >= 500 || m.Status == 429 ? RetryAdvice.Backoff : RetryAdvice.No;
            }
            var agg = ex as AggregateException;
            if (agg != null && agg.InnerExceptions.Count == 1) return Advice(agg.InnerExceptions[0]);
            return RetryAdvice.No;
        }
    }

    /// <summary>
    /// The base class of every exception of this SDK: an error answered by the broker
    /// (an RFC 9457 problem body), a request the SDK refused locally with the code the
    /// broker would have used (Status is then 0), and the SDK's own conditions, each a
    /// subclass with Code Unknown and Status 0: MusterTransportException,
    /// LeaseLostException, LeaseReleasedException, SessionLostException,
    /// StreamEndedException, MusterClosedException. Advice and IsRetryable say what to
    /// do about any of them.
    /// </summary>
    public class MusterException : Exception
    {
        /// <summary>The typed code; Unknown for a code this SDK does not know.</summary>
        public ErrorCode Code { get; private set; }
        /// <summary>The code exactly as sent on the wire (kept for unknown codes).</summary>
        public string CodeName { get; private set; }
        /// <summary>The HTTP status, 0 for a local refusal.</summary>
        public int Status { get; private set; }
        /// <summary>The problem's title, e.g. "Conflict".</summary>
        public string Title { get; private set; }
        /// <summary>A human-readable explanation; never contains a secret.</summary>
        public string Detail { get; private set; }
        /// <summary>On a limit (429), the bound that was hit: "broker" (a cap shared by
        /// every family), "family" (the caller's family's quota), "session", "route" or
        /// "root" (values may be added). "" otherwise.</summary>
        public string Scope { get; private set; }
        /// <summary>On wrong_broker (421), the base URL of the broker that serves the
        /// caller's family. The client follows it by itself (see
        /// MusterClientOptions.WithoutFollow); it is set on the error only when following
        /// failed. "" otherwise.</summary>
        public string Owner { get; private set; }

        public MusterException(string codeName, int status, string title, string detail)
            : this(codeName, status, title, detail, null)
        {
        }

        /// <summary>A broker error with the problem's scope (null or "" when absent).</summary>
        public MusterException(string codeName, int status, string title, string detail, string scope)
            : this(codeName, status, title, detail, scope, null)
        {
        }

        /// <summary>A broker error with the problem's scope and owner (null or "" when absent).</summary>
        public MusterException(string codeName, int status, string title, string detail, string scope, string owner)
            : base(Format(codeName, detail))
        {
            CodeName = codeName ?? "";
            Code = ErrorCodes.Parse(CodeName);
            Status = status;
            Title = title ?? "";
            Detail = detail ?? "";
            Scope = scope ?? "";
            Owner = owner ?? "";
        }

        /// <summary>One of the SDK's own conditions (a subclass): Code Unknown, CodeName "",
        /// Status 0.</summary>
        protected MusterException(string message, Exception inner)
            : base(message, inner)
        {
            CodeName = ""; Title = ""; Detail = ""; Scope = ""; Owner = "";
        }

        /// <summary>A local refusal with a known code.</summary>
        public MusterException(ErrorCode code, string detail)
            : this(ErrorCodes.Name(code), 0, "", detail)
        {
        }

        /// <summary>The advice for this error (see ErrorCodes.Advice).</summary>
        public RetryAdvice Advice { get { return ErrorCodes.Advice(this); } }

        /// <summary>True when the same request may succeed later (advice Backoff).
        /// A Restart advice is not retryable as is: start over from fresh state.</summary>
        public bool IsRetryable { get { return Advice == RetryAdvice.Backoff; } }

        private static string Format(string code, string detail)
        {
            return string.IsNullOrEmpty(detail) ? "muster: " + code : "muster: " + code + ": " + detail;
        }
    }

    /// <summary>The Session, Subscription or Observer was closed by its owner.</summary>
    public class MusterClosedException : MusterException
    {
        public MusterClosedException() : base("muster: closed", null) { }
    }

    /// <summary>
    /// A lease stopped being held other than by its own release; InnerException is
    /// the cause (a MusterException with NotOwner, Fenced, LeaseExpired,
    /// SessionNotFound, or the session's end).
    /// </summary>
    public class LeaseLostException : MusterException
    {
        public LeaseLostException(Exception cause) : base("muster: lease lost: " + (cause == null ? "" : cause.Message), cause) { }
    }

    /// <summary>A lease's Error after its own successful release.</summary>
    public class LeaseReleasedException : MusterException
    {
        public LeaseReleasedException() : base("muster: lease released", null) { }
    }

    /// <summary>A session ended other than by its own Dispose; InnerException is the cause.</summary>
    public class SessionLostException : MusterException
    {
        public SessionLostException(string message, Exception cause) : base("muster: session lost: " + message, cause) { }
    }

    /// <summary>
    /// A watch stream ended: Reason is the terminal event ("overflow", "superseded",
    /// "unsubscribed", "session_closed", "shutdown"), or null when the stream ended
    /// without one (the connection dropped; InnerException says how).
    /// </summary>
    public class StreamEndedException : MusterException
    {
        /// <summary>The terminal event's name, null without one.</summary>
        public string Reason { get; private set; }
        /// <summary>The revision at which the broker ended the stream, 0 when not sent.</summary>
        public long Revision { get; private set; }

        public StreamEndedException(string reason, long revision)
            : base("muster: watch stream ended: " + reason, null)
        {
            Reason = reason;
            Revision = revision;
        }

        public StreamEndedException(string message, Exception cause)
            : base("muster: watch stream ended: " + message, cause)
        {
        }
    }

    /// <summary>
    /// The request or its answer failed in transport: no connection, a connection reset,
    /// the HttpClient's Timeout, a body cut short. InnerException is the original failure
    /// (HttpRequestException, IOException, SocketException, TimeoutException, …). The
    /// broker may or may not have acted on the request; the advice is Backoff (retry the
    /// same request later), and the session's and leases' local deadlines decide whether
    /// what they guard is still held.
    /// </summary>
    public class MusterTransportException : MusterException
    {
        public MusterTransportException(Exception inner)
            : base("muster: transport: " + (inner == null ? "" : inner.Message), inner)
        {
        }

        /// <summary>Whether e is a failure of the transport this SDK wraps: an
        /// HttpRequestException, IOException, SocketException, WebException or
        /// TimeoutException (alone or as the one exception of an AggregateException).</summary>
        internal static bool Is(Exception e)
        {
            var agg = e as AggregateException;
            if (agg != null && agg.InnerExceptions.Count == 1) e = agg.InnerExceptions[0];
            return e is System.Net.Http.HttpRequestException || e is System.IO.IOException ||
                e is System.Net.Sockets.SocketException || e is System.Net.WebException || e is TimeoutException;
        }
    }
}
