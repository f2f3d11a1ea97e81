using System;
using System.Diagnostics;
using System.Threading.Tasks;
using Muster.Client;
using Newtonsoft.Json.Linq;

namespace Muster.Client.Tests
{
    /// <summary>The worker ops of ConformanceRunner: worker_acquire, worker_extend,
    /// worker_lost and worker_holds, run with this SDK's sessions and leases.</summary>
    internal sealed partial class ConformanceRunner
    {
        /// <summary>worker_acquire: the worker (its client built on first use, on the proxy
        /// or on the step's brokers) creates a
        /// session (TTL session_ttl_ms, default 10 s) when it has none or new_session asks,
        /// and acquires route (waiting up to
        /// wait_ms in the route's queue when given). An error
        /// advised Backoff (a transport error, a failover in progress) is retried until
        /// timeout_ms; the fencing token must be at least min_token and above every token
        /// of the route seen before.</summary>
        private async Task<string> WorkerAcquireAsync(JObject st)
        {
            var name = (string)st["worker"];
            var route = (string)st["route"];
            Worker w;
            if (!workers.TryGetValue(name, out w))
            {
                w = new Worker { C = await ClientAsync((string)st["token"], st["brokers"]).ConfigureAwait(false) };
                workers[name] = w;
            }
            if (st["new_session"] != null && (bool)st["new_session"]) w.Current = null;
            var opts = st["wait_ms"] != null && (long)st["wait_ms"] > 0
                ? new AcquireOptions { Wait = TimeSpan.FromMilliseconds((long)st["wait_ms"]) }
                : null;
            var sessionTtl = st["session_ttl_ms"] != null && (long)st["session_ttl_ms"] > 0
                ? TimeSpan.FromMilliseconds((long)st["session_ttl_ms"])
                : TimeSpan.FromSeconds(10);
            var sw = Stopwatch.StartNew();
            Lease lease;
            while (true)
            {
                try
                {
                    if (w.Current == null)
                    {
                        w.Current = await w.C.CreateSessionAsync(name, sessionTtl).ConfigureAwait(false);
                        w.Sessions.Add(w.Current);
                    }
                    lease = await w.Current.AcquireAsync(route, TimeSpan.FromMilliseconds((long)st["ttl_ms"]), opts).ConfigureAwait(false);
                    break;
                }
                catch (Exception e)
                {
                    if (ErrorCodes.Advice(e) != RetryAdvice.Backoff || sw.Elapsed >= Timeout(st)) return "acquire " + route + ": " + e.Message;
                }
                await Task.Delay(100).ConfigureAwait(false);
            }
            long min = st["min_token"] != null ? (long)st["min_token"] : 0, high;
            highest.TryGetValue(route, out high);
            if (lease.FencingToken < min || lease.FencingToken <= high)
            {
                return string.Format("fencing token {0}, want at least {1} and above {2}", lease.FencingToken, min, high);
            }
            highest[route] = lease.FencingToken;
            w.Leases[route] = lease;
            return null;
        }

        /// <summary>The lease of the step's route that the step's worker got with its last
        /// worker_acquire; null (and why) when there is none.</summary>
        private Lease WorkerLease(JObject st, out string problem)
        {
            var name = (string)st["worker"];
            var route = (string)st["route"];
            Worker w;
            Lease lease = null;
            if (workers.TryGetValue(name ?? "", out w)) w.Leases.TryGetValue(route ?? "", out lease);
            problem = lease == null ? string.Format("worker {0} acquired no lease of {1}", name, route) : null;
            return lease;
        }

        /// <summary>worker_extend: the lease of route that the worker's last worker_acquire
        /// got is extended by ttl_ms (ExtendAsync, its fencing token); an error advised
        /// Backoff is retried until timeout_ms.</summary>
        private async Task<string> WorkerExtendAsync(JObject st)
        {
            var route = (string)st["route"];
            string problem;
            var lease = WorkerLease(st, out problem);
            if (lease == null) return problem;
            var sw = Stopwatch.StartNew();
            while (true)
            {
                try
                {
                    await lease.ExtendAsync(TimeSpan.FromMilliseconds((long)st["ttl_ms"])).ConfigureAwait(false);
                    return null;
                }
                catch (Exception e)
                {
                    if (ErrorCodes.Advice(e) != RetryAdvice.Backoff || sw.Elapsed >= Timeout(st)) return "extend " + route + ": " + e.Message;
                }
                await Task.Delay(100).ConfigureAwait(false);
            }
        }

        /// <summary>worker_lost: the lease of route that the worker's last worker_acquire
        /// got reports its loss (Lost cancelled, Error a LeaseLostException) within
        /// timeout_ms.</summary>
        private async Task<string> WorkerLostAsync(JObject st)
        {
            var route = (string)st["route"];
            string problem;
            var lease = WorkerLease(st, out problem);
            if (lease == null) return problem;
            var lost = new TaskCompletionSource<bool>();
            using (lease.Lost.Register(() => lost.TrySetResult(true)))
            {
                if (await Task.WhenAny(lost.Task, Task.Delay(Timeout(st))).ConfigureAwait(false) != lost.Task)
                {
                    return string.Format("the lease of {0} reported no loss within {1}", route, Timeout(st));
                }
            }
            if (!(lease.Error is LeaseLostException)) return string.Format("the lease of {0} ended with {1}, want a LeaseLostException", route, lease.Error);
            return null;
        }

        /// <summary>worker_holds: the lease of route that the worker's last worker_acquire
        /// got reports no loss (Lost stays uncancelled) for for_ms.</summary>
        private async Task<string> WorkerHoldsAsync(JObject st)
        {
            var route = (string)st["route"];
            string problem;
            var lease = WorkerLease(st, out problem);
            if (lease == null) return problem;
            var forMs = TimeSpan.FromMilliseconds(st["for_ms"] != null ? (long)st["for_ms"] : 0);
            if (lease.Lost.IsCancellationRequested) return string.Format("the lease of {0} was lost before the step: {1}", route, lease.Error);
            var sw = Stopwatch.StartNew();
            var lost = new TaskCompletionSource<TimeSpan>();
            using (lease.Lost.Register(() => lost.TrySetResult(sw.Elapsed)))
            {
                if (await Task.WhenAny(lost.Task, Task.Delay(forMs)).ConfigureAwait(false) == lost.Task)
                {
                    return string.Format("the lease of {0} was lost {1:F0} ms into the {2:F0} ms it must hold: {3}",
                        route, lost.Task.Result.TotalMilliseconds, forMs.TotalMilliseconds, lease.Error);
                }
            }
            return null;
        }
    }
}
