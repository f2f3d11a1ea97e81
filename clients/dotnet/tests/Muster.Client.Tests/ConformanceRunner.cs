using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

namespace Muster.Client.Tests
{
    /// <summary>
    /// Runs one scenario file of clients/conformance: the eight observer ops with this
    /// SDK's observer, worker_acquire with its sessions, worker_extend with the lease, and
    /// worker_lost and worker_holds with the lease's loss signal, every other op forwarded
    /// verbatim to the harness's POST /step.
    /// </summary>
    internal sealed partial class ConformanceRunner
    {
        private static readonly HashSet<string> ObserverOps = new HashSet<string>
        {
            "observe", "wait_ready", "expect_not_ready", "expect_view", "mark_epoch",
            "expect_same_view", "expect_stopped", "close_observer", "worker_acquire", "worker_extend",
            "worker_lost", "worker_holds",
        };

        /// <summary>A worker of the scenario: one client for the whole scenario (it keeps
        /// the following state), its current session and every session it made.</summary>
        private sealed class Worker
        {
            internal MusterClient C;
            internal Session Current;
            internal readonly List<Session> Sessions = new List<Session>();
            internal readonly Dictionary<string, Lease> Leases = new Dictionary<string, Lease>(); // by route: the last worker_acquire's
        }

        private sealed class Obs
        {
            internal InventoryObserver O;
            internal MusterClient C;
            internal string Token, Selector;
        }

        private readonly Harness h;
        private readonly ObserverFaults faults;
        private readonly Dictionary<string, Obs> observers = new Dictionary<string, Obs>();
        private readonly Dictionary<string, string> marks = new Dictionary<string, string>();
        private readonly Dictionary<string, Worker> workers = new Dictionary<string, Worker>();
        private readonly Dictionary<string, long> highest = new Dictionary<string, long>(); // route → token

        internal ConformanceRunner(Harness h, ObserverFaults faults)
        {
            this.h = h;
            this.faults = faults;
        }

        /// <summary>Runs the scenario; null when it passed, else what failed. Throws
        /// ScenarioSkippedException when the harness skips it.</summary>
        internal static string Run(Harness h, string file, ObserverFaults faults = ObserverFaults.None)
        {
            var r = new ConformanceRunner(h, faults);
            try
            {
                return r.RunAsync(System.IO.File.ReadAllText(file)).GetAwaiter().GetResult();
            }
            finally
            {
                r.CloseAll();
            }
        }

        private async Task<string> RunAsync(string text)
        {
            var sc = JObject.Parse(text);
            var fail = await h.LoadAsync(text).ConfigureAwait(false);
            if (fail != null) return fail;
            int i = 0;
            foreach (JObject st in (JArray)sc["steps"])
            {
                i++;
                var op = (string)st["op"];
                string problem;
                try
                {
                    problem = ObserverOps.Contains(op)
                        ? await ObserverStepAsync(op, st).ConfigureAwait(false)
                        : await h.PostAsync("/step", st.ToString(Formatting.None), 200).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    problem = e.GetType().Name + ": " + e.Message;
                }
                if (problem != null) return string.Format("step {0} ({1}): {2}", i, op, problem);
            }
            return null;
        }

        /// <summary>Disposes every observer of the scenario, waiting up to 2 s each: a broken
        /// variant's Dispose may hang on a held request, which the next reset frees.</summary>
        private void CloseAll()
        {
            foreach (var o in observers.Values)
            {
                var obs = o;
                var closing = Task.Run(() =>
                {
                    obs.O.Dispose();
                    obs.C.Dispose();
                });
                closing.Wait(TimeSpan.FromSeconds(2));
            }
            observers.Clear();
            foreach (var w in workers.Values)
            {
                foreach (var s in w.Sessions)
                {
                    // A session's broker may be dead: bounded.
                    using (var cts = new CancellationTokenSource(TimeSpan.FromSeconds(1)))
                    {
                        try { s.CloseAsync(cts.Token).Wait(TimeSpan.FromSeconds(2)); }
                        catch (AggregateException) { }
                    }
                }
                w.C.Dispose();
            }
            workers.Clear();
        }

        /// <summary>The scenario's name.</summary>
        internal static string Name(string file)
        {
            return (string)JObject.Parse(System.IO.File.ReadAllText(file))["name"];
        }

        private static TimeSpan Timeout(JObject st)
        {
            var t = st["timeout_ms"];
            return t == null ? TimeSpan.FromSeconds(5) : TimeSpan.FromMilliseconds((long)t);
        }

        private Obs Get(JObject st)
        {
            Obs o;
            var name = (string)st["observer"];
            if (!observers.TryGetValue(name ?? "", out o)) throw new InvalidOperationException("no observer " + name);
            return o;
        }

        /// <summary>A client of the proxy (or of the named brokers, in order, resolved with
        /// GET /brokers) with the token's secret, broken as the variant asks.</summary>
        private async Task<MusterClient> ClientAsync(string token, JToken brokers)
        {
            var opts = new MusterClientOptions { Token = h.Tokens[token], WithoutFollow = (faults & ObserverFaults.NoFollow) != 0 };
            var bases = new List<string> { h.Proxy };
            var names = brokers == null ? new List<string>() : brokers.Select(b => (string)b).ToList();
            if (names.Count > 0)
            {
                var urls = await h.GetAsync("/brokers").ConfigureAwait(false);
                bases.Clear();
                foreach (var name in names)
                {
                    var url = (string)urls[name ?? ""];
                    if (string.IsNullOrEmpty(url)) throw new InvalidOperationException("no broker \"" + name + "\" in GET /brokers");
                    bases.Add(url);
                }
            }
            return new MusterClient(bases, opts)
            {
                StickyOwner = (faults & ObserverFaults.StickyOwner) != 0,
                NeverLost = (faults & ObserverFaults.NeverLost) != 0,
                SendPlusTtl = (faults & ObserverFaults.SendPlusTtl) != 0,
                LateLoss = (faults & ObserverFaults.LateLoss) != 0,
                SingleBroker = (faults & ObserverFaults.SingleBroker) != 0,
                StayOnUnavailable = (faults & ObserverFaults.StayOnUnavailable) != 0,
                CreatorLoss = (faults & ObserverFaults.CreatorLoss) != 0,
            };
        }

        private async Task<string> ObserverStepAsync(string op, JObject st)
        {
            switch (op)
            {
                case "worker_acquire":
                    return await WorkerAcquireAsync(st).ConfigureAwait(false);
                case "worker_extend":
                    return await WorkerExtendAsync(st).ConfigureAwait(false);
                case "worker_lost":
                    return await WorkerLostAsync(st).ConfigureAwait(false);
                case "worker_holds":
                    return await WorkerHoldsAsync(st).ConfigureAwait(false);
                case "observe":
                    {
                        var opts = new ObserveOptions();
                        if (st["page_size"] != null) opts.PageSize = (int)st["page_size"];
                        if (st["reconcile_ms"] != null) opts.ReconcileInterval = TimeSpan.FromMilliseconds((long)st["reconcile_ms"]);
                        if (st["jitter"] != null) opts.ReconcileJitter = (double)st["jitter"];
                        if (st["shortest_ttl_ms"] != null) opts.ShortestTtl = TimeSpan.FromMilliseconds((long)st["shortest_ttl_ms"]);
                        var token = (string)st["token"];
                        var c = await ClientAsync(token, st["brokers"]).ConfigureAwait(false);
                        var o = c.Observe((string)st["selector"], opts, faults, CancellationToken.None);
                        observers[(string)st["observer"]] = new Obs { O = o, C = c, Token = token, Selector = (string)st["selector"] };
                        return null;
                    }
                case "wait_ready":
                    {
                        var o = Get(st);
                        using (var cts = new CancellationTokenSource(Timeout(st)))
                        {
                            try
                            {
                                await o.O.ReadyAsync(cts.Token).ConfigureAwait(false);
                                return null;
                            }
                            catch (OperationCanceledException)
                            {
                                return "not ready within " + Timeout(st) + ": " + o.O.Error;
                            }
                        }
                    }
                case "expect_not_ready":
                    return Get(st).O.Ready ? "the observer is ready" : null;
                case "expect_view":
                    return await ExpectViewAsync(st).ConfigureAwait(false);
                case "mark_epoch":
                    marks[(string)st["observer"]] = Get(st).O.View.Epoch;
                    return null;
                case "expect_same_view":
                    return await ExpectSameViewAsync(st).ConfigureAwait(false);
                case "expect_stopped":
                    {
                        var o = Get(st);
                        if (await Task.WhenAny(o.O.Stopped, Task.Delay(Timeout(st))).ConfigureAwait(false) != o.O.Stopped)
                        {
                            return "the observer did not stop: " + o.O.Error;
                        }
                        var want = (string)st["expect_error"];
                        var e = o.O.Error as MusterException;
                        if (e == null || e.CodeName != want) return string.Format("stopped with {0}, want {1}", o.O.Error, want);
                        return null;
                    }
                case "close_observer":
                    {
                        var o = Get(st);
                        var max = TimeSpan.FromMilliseconds(st["max_ms"] != null ? (long)st["max_ms"] : 1000);
                        var sw = Stopwatch.StartNew();
                        var closing = Task.Run(() => o.O.Dispose());
                        if (await Task.WhenAny(closing, Task.Delay(max)).ConfigureAwait(false) != closing)
                        {
                            return "Dispose did not return within " + max;
                        }
                        if (sw.Elapsed > max) return "Dispose took " + sw.Elapsed;
                        if (!(o.O.Error is MusterClosedException)) return "error after Dispose: " + o.O.Error;
                        return null;
                    }
                default:
                    return "not an observer op";
            }
        }

        private async Task<string> ExpectViewAsync(JObject st)
        {
            var o = Get(st);
            var timeout = Timeout(st);
            var sw = Stopwatch.StartNew();
            while (true)
            {
                var next = o.O.NextChange();
                var problem = await ViewProblemAsync(st, o, o.O.View).ConfigureAwait(false);
                if (problem == null) return null;
                if (sw.Elapsed >= timeout) return problem;
                var left = timeout - sw.Elapsed;
                await Task.WhenAny(next, Task.Delay(left < TimeSpan.FromMilliseconds(50) ? left : TimeSpan.FromMilliseconds(50))).ConfigureAwait(false);
            }
        }

        private async Task<string> ViewProblemAsync(JObject st, Obs o, ObserverView v)
        {
            if (!v.Ready) return "not ready (" + o.O.Error + ")";
            var byRoute = v.Items.ToDictionary(it => it.Route);
            if (st["count"] != null && v.Items.Count != (int)st["count"]) return string.Format("{0} items, want {1}", v.Items.Count, (int)st["count"]);
            if (st["contains"] != null)
            {
                foreach (JObject c in (JArray)st["contains"])
                {
                    Item it;
                    var route = (string)c["route"];
                    if (!byRoute.TryGetValue(route, out it)) return "missing " + route;
                    var owner = (string)c["owner_id"];
                    if (!string.IsNullOrEmpty(owner) && it.OwnerId != owner) return string.Format("{0} held by {1}, want {2}", route, it.OwnerId, owner);
                    var holder = (string)c["holder"];
                    if (!string.IsNullOrEmpty(holder))
                    {
                        var hi = (string)(await h.GetAsync("/holder/" + Uri.EscapeDataString(holder)).ConfigureAwait(false))["holder_incarnation"];
                        if (it.HolderIncarnation != hi) return string.Format("{0} not held by {1}'s current session", route, holder);
                    }
                }
            }
            if (st["excludes"] != null)
            {
                foreach (var r in (JArray)st["excludes"])
                {
                    if (byRoute.ContainsKey((string)r)) return "still has " + (string)r;
                }
            }
            if (st["epoch_not_mark"] != null && (bool)st["epoch_not_mark"])
            {
                string mark;
                marks.TryGetValue((string)st["observer"], out mark);
                if (v.Epoch == mark) return "still in the marked epoch " + v.Epoch;
            }
            if (st["matches_list"] != null && (bool)st["matches_list"])
            {
                var l = await h.GetAsync("/list?selector=" + Uri.EscapeDataString(o.Selector) + "&token=" + Uri.EscapeDataString(o.Token)).ConfigureAwait(false);
                if ((string)l["epoch"] != v.Epoch) return string.Format("view of epoch {0}, LIST answered in epoch {1}", v.Epoch, (string)l["epoch"]);
                var listed = ((JArray)l["items"]).Select(x => (string)x["route"] + "@" + (string)x["holder_incarnation"]).OrderBy(x => x, StringComparer.Ordinal).ToList();
                var viewed = v.Items.Select(x => x.Route + "@" + x.HolderIncarnation).OrderBy(x => x, StringComparer.Ordinal).ToList();
                if (!listed.SequenceEqual(viewed)) return string.Format("view ({0} items) differs from LIST ({1} items)", viewed.Count, listed.Count);
            }
            return null;
        }

        private async Task<string> ExpectSameViewAsync(JObject st)
        {
            var names = ((JArray)st["observers"]).Select(x => (string)x).ToList();
            if (names.Count != 2) return "expect_same_view compares two observers";
            var within = (string)st["within"];
            var timeout = Timeout(st);
            var sw = Stopwatch.StartNew();
            var views = new List<string>[2];
            while (true)
            {
                bool ok = true;
                for (int i = 0; i < 2; i++)
                {
                    Obs o;
                    if (!observers.TryGetValue(names[i], out o)) return "no observer " + names[i];
                    var v = o.O.View;
                    if (!v.Ready) ok = false;
                    views[i] = v.Items.Where(it => Selectors.Match(within, it.Route)).Select(it => it.Route + "@" + it.HolderIncarnation).ToList();
                }
                if (ok && views[0].SequenceEqual(views[1])) return null;
                if (sw.Elapsed >= timeout)
                {
                    return string.Format("views differ:\n{0}\n{1}", string.Join(" ", views[0]), string.Join(" ", views[1]));
                }
                await Task.Delay(20).ConfigureAwait(false);
            }
        }
    }

    /// <summary>The selector grammar: `*` is exactly one segment, `**` zero or more.</summary>
    internal static class Selectors
    {
        internal static bool Match(string selector, string route)
        {
            const string p = "lease://";
            if (!selector.StartsWith(p, StringComparison.Ordinal) || !route.StartsWith(p, StringComparison.Ordinal)) return false;
            return Match(selector.Substring(p.Length).Split('/'), 0, route.Substring(p.Length).Split('/'), 0);
        }

        private static bool Match(string[] s, int i, string[] r, int j)
        {
            if (i == s.Length) return j == r.Length;
            if (s[i] == "**")
            {
                for (int k = j; k <= r.Length; k++) if (Match(s, i + 1, r, k)) return true;
                return false;
            }
            return j < r.Length && (s[i] == "*" || s[i] == r[j]) && Match(s, i + 1, r, j + 1);
        }
    }
}
