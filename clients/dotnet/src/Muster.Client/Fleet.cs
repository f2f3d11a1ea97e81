using System;
using System.Collections.Generic;
using System.Net.Http;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client.Wire;
using Newtonsoft.Json.Linq;

namespace Muster.Client
{
    // Fleet helpers: the durable desired set of one fleet root. A root is one or
    // more legal segments (lowercase letters, digits, '-' and '_') joined by '/'.
    // Nothing a worker does to its leases edits the desired set; ForgetAsync is
    // the one way out.
    public sealed partial class MusterClient
    {
        private static string SpecsPath(string root) { return "/v1/fleets/" + Seg(root) + "/specs"; }

        /// <summary>Stores spec (any value Newtonsoft.Json can serialize) under a new name
        /// &lt;kind&gt;-&lt;n&gt; and returns it. Names are never reused. A string is stored
        /// as a JSON string; to store a JSON text as it is, use RegisterJsonAsync.</summary>
        public Task<Spec> RegisterAsync(string root, string kind, object spec, CancellationToken ct = default(CancellationToken))
        {
            var tok = spec as JToken ?? (spec == null ? JValue.CreateNull() : JToken.FromObject(spec));
            return RegisterTokenAsync(root, kind, tok, ct);
        }

        /// <summary>Stores the JSON text json as it is (Go: a json.RawMessage spec) under a
        /// new name &lt;kind&gt;-&lt;n&gt; and returns it. Throws FormatException, before
        /// anything is sent, when json is not one JSON value.</summary>
        public Task<Spec> RegisterJsonAsync(string root, string kind, string json, CancellationToken ct = default(CancellationToken))
        {
            return RegisterTokenAsync(root, kind, Json.ParseSpec(json), ct);
        }

        private async Task<Spec> RegisterTokenAsync(string root, string kind, JToken tok, CancellationToken ct)
        {
            var row = await CallAsync<SpecRow>(HttpMethod.Post, SpecsPath(root), new RegisterRequest { Kind = kind, Spec = tok }, 201, ct).ConfigureAwait(false);
            return ToSpec(row);
        }

        private static Spec ToSpec(SpecRow row) { return new Spec { Name = row.Name, Json = Json.Text(row.Spec) }; }

        /// <summary>Reads one spec; SpecNotFound when the name is not in the set.</summary>
        public async Task<Spec> GetSpecAsync(string root, string name, CancellationToken ct = default(CancellationToken))
        {
            var row = await CallAsync<SpecRow>(HttpMethod.Get, SpecsPath(root) + "/" + Seg(name), null, 200, ct).ConfigureAwait(false);
            return ToSpec(row);
        }

        /// <summary>Removes one spec from the desired set; forgetting an absent name
        /// succeeds. An illegal name (such as "Repo-1") is refused with InvalidName and
        /// nothing is removed.</summary>
        public Task ForgetAsync(string root, string name, CancellationToken ct = default(CancellationToken))
        {
            return CallAsync<object>(HttpMethod.Delete, SpecsPath(root) + "/" + Seg(name), null, 204, ct);
        }

        /// <summary>The whole desired set in name order, read page by page (up to 1,000 a page).</summary>
        public async Task<List<Spec>> DesiredAsync(string root, CancellationToken ct = default(CancellationToken))
        {
            var all = new List<Spec>();
            string cursor = null;
            while (true)
            {
                var page = await CallAsync<SpecPage>(HttpMethod.Get, SpecsPath(root) + Query("limit", "1000", "cursor", cursor), null, 200, ct).ConfigureAwait(false);
                if (page.Items != null) foreach (var row in page.Items) all.Add(ToSpec(row));
                if (string.IsNullOrEmpty(page.NextCursor)) return all;
                cursor = page.NextCursor;
            }
        }

        /// <summary>
        /// Validates every spec of the desired set with the caller's validate function,
        /// given the spec's JSON text (Go: a json.RawMessage; decode it with any JSON
        /// library, e.g. JsonConvert.DeserializeObject&lt;T&gt;), which throws to reject it and forgets each one it rejects:
        /// validate-or-drop. Returns the decoded specs kept and the names dropped. A
        /// spec registered while the sweep runs is either validated or left alone,
        /// never dropped without validation. On an error the sweep stops and throws;
        /// what it dropped until then stays dropped.
        /// </summary>
        public async Task<SweepResult<T>> SweepAsync<T>(string root, Func<string, T> validate, CancellationToken ct = default(CancellationToken))
        {
            if (validate == null) throw new ArgumentNullException("validate");
            var result = new SweepResult<T>();
            foreach (var s in await DesiredAsync(root, ct).ConfigureAwait(false))
            {
                T v;
                try
                {
                    v = validate(s.Json);
                }
                catch (Exception)
                {
                    await ForgetAsync(root, s.Name, ct).ConfigureAwait(false);
                    result.Dropped.Add(s.Name);
                    continue;
                }
                result.Kept.Add(new Kept<T> { Name = s.Name, Spec = v });
            }
            return result;
        }

        /// <summary>Asks the broker for the pure difference of desired and live (both
        /// sorted in the answer). It changes nothing.</summary>
        public async Task<Plan> PlanAsync(IEnumerable<string> desired, IEnumerable<string> live, CancellationToken ct = default(CancellationToken))
        {
            var body = new PlanRequest
            {
                Desired = desired != null ? new List<string>(desired) : new List<string>(),
                Live = live != null ? new List<string>(live) : new List<string>(),
            };
            var p = await CallAsync<PlanBody>(HttpMethod.Post, "/v1/fleets/plan", body, 200, ct).ConfigureAwait(false);
            return new Plan { Missing = p.Missing ?? new List<string>(), Orphans = p.Orphans ?? new List<string>() };
        }

        /// <summary>Plans root's desired set against the live lease inventory: the resource
        /// segment of every held lease matching liveSelector, read from one snapshot at Revision.
        /// The broker answers a large gap in pages (10,000 names of each side at most);
        /// GapAsync reads them all. CursorExpired midway means the snapshot was evicted:
        /// call GapAsync again.</summary>
        public Task<Plan> GapAsync(string root, string liveSelector, CancellationToken ct = default(CancellationToken))
        {
            return GapAsync(root, liveSelector, 0, ct);
        }

        /// <summary>GapAsync with pages of at most pageLimit names of each side (0: the
        /// broker's default). Internal: the tests page a small gap with it.</summary>
        internal async Task<Plan> GapAsync(string root, string liveSelector, int pageLimit, CancellationToken ct)
        {
            var missing = new List<string>();
            var orphans = new List<string>();
            long revision = 0;
            string cursor = null;
            var limit = pageLimit > 0 ? pageLimit.ToString(System.Globalization.CultureInfo.InvariantCulture) : null;
            while (true)
            {
                var g = await CallAsync<GapPage>(HttpMethod.Get, "/v1/fleets/" + Seg(root) + "/gap" +
                    Query("live", liveSelector, "limit", limit, "cursor", cursor), null, 200, ct).ConfigureAwait(false);
                if (g.Missing != null) missing.AddRange(g.Missing);
                if (g.Orphans != null) orphans.AddRange(g.Orphans);
                revision = g.Revision;
                if (string.IsNullOrEmpty(g.NextCursor)) break;
                cursor = g.NextCursor;
            }
            return new Plan { Missing = missing, Orphans = orphans, Revision = revision };
        }
    }
}
