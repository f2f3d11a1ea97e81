using System;
using System.Collections.Generic;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

// The JSON bodies of openapi.yaml, as the broker sends and accepts them.
namespace Muster.Client.Wire
{
    internal static class Json
    {
        /// <summary>Dates stay strings inside free-form specs (DateParseHandling.None);
        /// typed DateTimeOffset members are still converted.</summary>
        internal static readonly JsonSerializerSettings Settings = new JsonSerializerSettings
        {
            DateParseHandling = DateParseHandling.None,
            NullValueHandling = NullValueHandling.Ignore,
            MissingMemberHandling = MissingMemberHandling.Ignore,
        };

        internal static T Decode<T>(string s) { return JsonConvert.DeserializeObject<T>(s, Settings); }
        internal static string Encode(object o) { return JsonConvert.SerializeObject(o, Settings); }

        /// <summary>A spec as compact JSON text.</summary>
        internal static string Text(JToken t) { return t == null ? "null" : t.ToString(Formatting.None); }

        /// <summary>The JSON text json as a token: FormatException when it is not JSON.</summary>
        internal static JToken ParseSpec(string json)
        {
            try
            {
                using (var r = new JsonTextReader(new System.IO.StringReader(json ?? "")) { DateParseHandling = DateParseHandling.None })
                {
                    var t = JToken.ReadFrom(r);
                    if (r.Read()) throw new JsonReaderException("more than one JSON value");
                    return t;
                }
            }
            catch (JsonException e)
            {
                throw new FormatException("muster: the spec is not one JSON value: " + e.Message, e);
            }
        }

        /// <summary>The JSON text json decoded into T: FormatException when it does not fit.</summary>
        internal static T DecodeSpec<T>(string json)
        {
            try { return Decode<T>(json ?? "null"); }
            catch (JsonException e) { throw new FormatException("muster: decoding a spec as " + typeof(T).Name + ": " + e.Message, e); }
        }
    }

    internal sealed class Problem
    {
        [JsonProperty("type")] public string Type;
        [JsonProperty("title")] public string Title;
        [JsonProperty("status")] public int Status;
        [JsonProperty("detail")] public string Detail;
        [JsonProperty("code")] public string Code;
    }

    internal sealed class CreateSessionRequest
    {
        [JsonProperty("owner_id")] public string OwnerId;
        [JsonProperty("ttl_ms")] public long TtlMs;
    }

    internal sealed class SessionBody
    {
        [JsonProperty("session_id")] public string SessionId;
        [JsonProperty("holder_incarnation")] public string HolderIncarnation;
        [JsonProperty("owner_id")] public string OwnerId;
        [JsonProperty("ttl_ms")] public long TtlMs;
        [JsonProperty("expires_at")] public DateTimeOffset ExpiresAt;
        [JsonProperty("epoch")] public string Epoch;
    }

    internal sealed class AcquireRequest
    {
        [JsonProperty("session_id")] public string SessionId;
        [JsonProperty("ttl_ms")] public long TtlMs;
        [JsonProperty("wait_ms")] public long? WaitMs;
    }

    internal sealed class ExtendRequest
    {
        [JsonProperty("session_id")] public string SessionId;
        [JsonProperty("fencing_token")] public long FencingToken;
        [JsonProperty("ttl_ms")] public long TtlMs;
    }

    internal sealed class ReleaseRequest
    {
        [JsonProperty("session_id")] public string SessionId;
        [JsonProperty("fencing_token")] public long FencingToken;
    }

    internal sealed class LeaseBody
    {
        [JsonProperty("route")] public string Route;
        [JsonProperty("fencing_token")] public long FencingToken;
        [JsonProperty("acquired_at")] public DateTimeOffset AcquiredAt;
        [JsonProperty("expires_at")] public DateTimeOffset ExpiresAt;
        [JsonProperty("renewals")] public long Renewals;
        [JsonProperty("outcome")] public string Outcome;
        /// <summary>Acquire only: how long after the broker took the request up the lease
        /// expires (the wait plus the TTL after a wait; what is left for already_held).
        /// Null from an older broker.</summary>
        [JsonProperty("expires_after_request_ms")] public long? ExpiresAfterRequestMs;
    }

    internal sealed class BatchOp
    {
        [JsonProperty("op")] public string Op;
        [JsonProperty("route")] public string Route;
        [JsonProperty("ttl_ms")] public long? TtlMs;
        [JsonProperty("fencing_token")] public long? FencingToken;
    }

    internal sealed class BatchRequest
    {
        [JsonProperty("session_id")] public string SessionId;
        [JsonProperty("ops")] public List<BatchOp> Ops;
    }

    internal sealed class BatchResultBody
    {
        [JsonProperty("op")] public string Op;
        [JsonProperty("route")] public string Route;
        [JsonProperty("ok")] public bool Ok;
        [JsonProperty("lease")] public LeaseBody Lease;
        [JsonProperty("code")] public string Code;
        [JsonProperty("status")] public int? Status;
        [JsonProperty("detail")] public string Detail;
    }

    internal sealed class BatchResponse
    {
        [JsonProperty("results")] public List<BatchResultBody> Results;
        [JsonProperty("revision")] public long Revision;
    }

    internal sealed class LeaseStatusBody
    {
        [JsonProperty("route")] public string Route;
        [JsonProperty("held")] public bool Held;
        [JsonProperty("owner_id")] public string OwnerId;
        [JsonProperty("holder_incarnation")] public string HolderIncarnation;
        [JsonProperty("acquired_at")] public DateTimeOffset? AcquiredAt;
        [JsonProperty("expires_at")] public DateTimeOffset? ExpiresAt;
        [JsonProperty("remaining_ms")] public long? RemainingMs;
        [JsonProperty("renewals")] public long? Renewals;
        [JsonProperty("waiters")] public int Waiters;
    }

    internal sealed class LeaseItem
    {
        [JsonProperty("route")] public string Route;
        [JsonProperty("owner_id")] public string OwnerId;
        [JsonProperty("holder_incarnation")] public string HolderIncarnation;
        [JsonProperty("acquired_at")] public DateTimeOffset AcquiredAt;
        [JsonProperty("expires_at")] public DateTimeOffset ExpiresAt;
        [JsonProperty("remaining_ms")] public long RemainingMs;
        [JsonProperty("renewals")] public long Renewals;

        internal Item ToItem()
        {
            return new Item(Route, OwnerId, HolderIncarnation, AcquiredAt, ExpiresAt,
                TimeSpan.FromMilliseconds(RemainingMs), Renewals);
        }

        internal static List<Item> ToItems(List<LeaseItem> l)
        {
            var o = new List<Item>();
            if (l != null) foreach (var i in l) o.Add(i.ToItem());
            return o;
        }
    }

    internal sealed class Snapshot
    {
        [JsonProperty("epoch")] public string Epoch;
        [JsonProperty("revision")] public long Revision;
    }

    internal sealed class LeasePage
    {
        [JsonProperty("items")] public List<LeaseItem> Items;
        [JsonProperty("next_cursor")] public string NextCursor;
        [JsonProperty("snapshot")] public Snapshot Snapshot;
    }

    internal sealed class WatchSubscription
    {
        [JsonProperty("id")] public string Id;
        [JsonProperty("selector")] public string Selector;
        [JsonProperty("items")] public List<LeaseItem> Items;
        [JsonProperty("next_cursor")] public string NextCursor;
    }

    internal sealed class SnapshotEvent
    {
        [JsonProperty("epoch")] public string Epoch;
        [JsonProperty("revision")] public long Revision;
        [JsonProperty("subscriptions")] public List<WatchSubscription> Subscriptions;
    }

    internal sealed class ChangeEvent
    {
        [JsonProperty("subscription_id")] public string SubscriptionId;
        [JsonProperty("route")] public string Route;
        [JsonProperty("kind")] public string Kind;
        [JsonProperty("revision")] public long Revision;
        [JsonProperty("item")] public LeaseItem Item;
    }

    internal sealed class StreamEndEvent
    {
        [JsonProperty("reason")] public string Reason;
        [JsonProperty("revision")] public long? Revision;
    }

    internal sealed class RegisterRequest
    {
        [JsonProperty("kind")] public string Kind;
        [JsonProperty("spec")] public JToken Spec;
    }

    internal sealed class SpecRow
    {
        [JsonProperty("name")] public string Name;
        [JsonProperty("spec")] public JToken Spec;
    }

    internal sealed class SpecPage
    {
        [JsonProperty("items")] public List<SpecRow> Items;
        [JsonProperty("next_cursor")] public string NextCursor;
    }

    internal sealed class PlanRequest
    {
        [JsonProperty("desired")] public List<string> Desired;
        [JsonProperty("live")] public List<string> Live;
    }

    internal sealed class PlanBody
    {
        [JsonProperty("missing")] public List<string> Missing;
        [JsonProperty("orphans")] public List<string> Orphans;
        [JsonProperty("revision")] public long Revision;
    }

    internal sealed class GapPage
    {
        [JsonProperty("missing")] public List<string> Missing;
        [JsonProperty("orphans")] public List<string> Orphans;
        [JsonProperty("revision")] public long Revision;
        [JsonProperty("next_cursor")] public string NextCursor;
    }
}
