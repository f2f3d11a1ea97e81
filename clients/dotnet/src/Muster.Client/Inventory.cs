using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;

namespace Muster.Client
{
    /// <summary>An exact route lease://realm/area/resource, split for building a path.</summary>
    internal struct Route
    {
        internal string Realm, Area, Resource;

        /// <summary>Checks only the shape needed to build a path; the broker checks the
        /// rest (a wildcard segment is its invalid_route).</summary>
        internal static Route Parse(string s)
        {
            const string prefix = "lease://";
            if (s != null && s.StartsWith(prefix, StringComparison.Ordinal))
            {
                var parts = s.Substring(prefix.Length).Split('/');
                if (parts.Length == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "")
                {
                    return new Route { Realm = parts[0], Area = parts[1], Resource = parts[2] };
                }
            }
            throw new MusterException(ErrorCode.InvalidRoute, "a route is lease://{realm}/{area}/{resource}");
        }

        internal string Path(string suffix)
        {
            return "/v1/leases/" + MusterClient.Seg(Realm) + "/" + MusterClient.Seg(Area) + "/" + MusterClient.Seg(Resource) + suffix;
        }

        public override string ToString() { return "lease://" + Realm + "/" + Area + "/" + Resource; }
    }

    public sealed partial class MusterClient
    {
        /// <summary>Reads one page of the held leases matching selector. An exact
        /// selector answers zero or one item and never a cursor.</summary>
        public async Task<Page> ListPageAsync(string selector, ListOptions options = null, CancellationToken ct = default(CancellationToken))
        {
            options = options ?? new ListOptions();
            var q = Query("selector", selector,
                "limit", options.Limit != 0 ? options.Limit.ToString(System.Globalization.CultureInfo.InvariantCulture) : null,
                "cursor", string.IsNullOrEmpty(options.Cursor) ? null : options.Cursor);
            var p = await CallAsync<LeasePage>(HttpMethod.Get, "/v1/leases" + q, null, 200, ct).ConfigureAwait(false);
            return new Page
            {
                Items = LeaseItem.ToItems(p.Items),
                NextCursor = string.IsNullOrEmpty(p.NextCursor) ? null : p.NextCursor,
                Epoch = p.Snapshot != null ? p.Snapshot.Epoch : "",
                Revision = p.Snapshot != null ? p.Snapshot.Revision : 0,
            };
        }

        /// <summary>
        /// Reads every held lease matching selector, one request per page, all from one
        /// snapshot (no duplicate, no omission while leases change). CursorExpired and
        /// EpochChanged mean "list again from the start".
        /// </summary>
        public async Task<List<Item>> ListAsync(string selector, ListOptions options = null, CancellationToken ct = default(CancellationToken))
        {
            var opts = new ListOptions { Limit = options != null ? options.Limit : 0, Cursor = options != null ? options.Cursor : null };
            var all = new List<Item>();
            while (true)
            {
                var p = await ListPageAsync(selector, opts, ct).ConfigureAwait(false);
                all.AddRange(p.Items);
                if (p.NextCursor == null) return all;
                opts.Cursor = p.NextCursor;
            }
        }

        /// <summary>Reads the current state of one exact route.</summary>
        public async Task<LeaseStatus> GetAsync(string route, CancellationToken ct = default(CancellationToken))
        {
            var r = Route.Parse(route);
            var s = await CallAsync<LeaseStatusBody>(HttpMethod.Get, r.Path(""), null, 200, ct).ConfigureAwait(false);
            var o = new LeaseStatus { Route = s.Route, Held = s.Held, Waiters = s.Waiters };
            if (s.Held)
            {
                o.Item = new Item(s.Route, s.OwnerId ?? "", s.HolderIncarnation ?? "",
                    s.AcquiredAt ?? default(DateTimeOffset), s.ExpiresAt ?? default(DateTimeOffset),
                    TimeSpan.FromMilliseconds(s.RemainingMs ?? 0), s.Renewals ?? 0);
            }
            return o;
        }
    }
}
