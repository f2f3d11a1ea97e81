using System;
using System.Collections.Generic;

namespace Muster.Client
{
    /// <summary>
    /// One held lease as observed through LIST, a watch marker or a change event: a
    /// plain, read-only value. It carries no fencing token and no session id, and
    /// nothing in this SDK turns an Item into a Lease; only Session.AcquireAsync
    /// grants one.
    /// </summary>
    public sealed class Item
    {
        public string Route { get; private set; }
        public string OwnerId { get; private set; }
        /// <summary>Opaque id of the holder session (new after reconnect or restart).</summary>
        public string HolderIncarnation { get; private set; }
        public DateTimeOffset AcquiredAt { get; private set; }
        public DateTimeOffset ExpiresAt { get; private set; }
        /// <summary>Remaining TTL when the broker produced the item.</summary>
        public TimeSpan Remaining { get; private set; }
        public long Renewals { get; private set; }

        public Item(string route, string ownerId, string holderIncarnation, DateTimeOffset acquiredAt,
            DateTimeOffset expiresAt, TimeSpan remaining, long renewals)
        {
            Route = route; OwnerId = ownerId; HolderIncarnation = holderIncarnation;
            AcquiredAt = acquiredAt; ExpiresAt = expiresAt; Remaining = remaining; Renewals = renewals;
        }
    }

    /// <summary>Tunes ListPageAsync and ListAsync.</summary>
    public sealed class ListOptions
    {
        /// <summary>The page size, 1..500; 0 means the broker's default (100).</summary>
        public int Limit { get; set; }
        /// <summary>Continues a snapshot: a Page's NextCursor or a Marker's. Bound to the selector.</summary>
        public string Cursor { get; set; }
    }

    /// <summary>One page of held leases, from the snapshot of broker lifetime Epoch at Revision.</summary>
    public sealed class Page
    {
        public IReadOnlyList<Item> Items { get; internal set; }
        /// <summary>Null on the last page.</summary>
        public string NextCursor { get; internal set; }
        public string Epoch { get; internal set; }
        public long Revision { get; internal set; }
    }

    /// <summary>The state of one exact route as answered by GetAsync.</summary>
    public sealed class LeaseStatus
    {
        public string Route { get; internal set; }
        public bool Held { get; internal set; }
        /// <summary>The holder when Held, else null.</summary>
        public Item Item { get; internal set; }
        public int Waiters { get; internal set; }
    }

    /// <summary>How the held set changed for a route: Acquired adds (or replaces) the
    /// holder; every other kind removes it.</summary>
    public static class ChangeKinds
    {
        public const string Acquired = "acquired";
        public const string Released = "released";
        public const string Expired = "expired";
        public const string SessionClosed = "session_closed";
        public const string RolledBack = "rolled_back";
    }

    /// <summary>One change of the held set for one selector of a stream: a hint, not a command.</summary>
    public sealed class Change
    {
        /// <summary>The selector (as given to Watch) whose registration matched.</summary>
        public string Selector { get; internal set; }
        public string Route { get; internal set; }
        /// <summary>One of ChangeKinds (a newer broker may send another kind: treat it as a removal).</summary>
        public string Kind { get; internal set; }
        public long Revision { get; internal set; }
        /// <summary>The new holder when Kind is acquired, else null.</summary>
        public Item Item { get; internal set; }
    }

    /// <summary>The first snapshot page of one selector of a watch marker.</summary>
    public sealed class MarkerPage
    {
        public string Selector { get; internal set; }
        public IReadOnlyList<Item> Items { get; internal set; }
        /// <summary>Pages the rest of the same snapshot through ListPageAsync; null when none.</summary>
        public string NextCursor { get; internal set; }
    }

    /// <summary>The first event of a stream: every change after it has a higher revision.</summary>
    public sealed class Marker
    {
        public string Epoch { get; internal set; }
        public long Revision { get; internal set; }
        /// <summary>In the order given to Watch.</summary>
        public IReadOnlyList<MarkerPage> Selectors { get; internal set; }
    }

    /// <summary>One entry of a fleet's desired set: its minted name and the spec as
    /// registered, as a string of JSON (Go: json.RawMessage). The SDK's JSON library is
    /// not part of its API: decode Json with any, or with As&lt;T&gt;().</summary>
    public sealed class Spec
    {
        public string Name { get; internal set; }
        /// <summary>The spec as one compact JSON text, e.g. {"url":"https://…"}; "null" for a
        /// null spec.</summary>
        public string Json { get; internal set; }

        /// <summary>Json decoded into T (dates inside the spec stay strings unless T says
        /// otherwise). Throws FormatException when Json does not fit T.</summary>
        public T As<T>()
        {
            return Wire.Json.DecodeSpec<T>(Json);
        }

        public override string ToString() { return Name + " " + Json; }
    }

    /// <summary>A spec that passed a sweep, decoded by the caller's validator.</summary>
    public sealed class Kept<T>
    {
        public string Name { get; internal set; }
        public T Spec { get; internal set; }
    }

    /// <summary>What a sweep kept and the names it dropped.</summary>
    public sealed class SweepResult<T>
    {
        public List<Kept<T>> Kept { get; private set; }
        public List<string> Dropped { get; private set; }
        public SweepResult() { Kept = new List<Kept<T>>(); Dropped = new List<string>(); }
    }

    /// <summary>The difference between a desired and a live set of names.</summary>
    public sealed class Plan
    {
        /// <summary>Desired and not live: work nobody holds.</summary>
        public IReadOnlyList<string> Missing { get; internal set; }
        /// <summary>Live and not desired: leases of forgotten work.</summary>
        public IReadOnlyList<string> Orphans { get; internal set; }
        /// <summary>For GapAsync: the inventory revision the live set was read at.</summary>
        public long Revision { get; internal set; }
    }
}
