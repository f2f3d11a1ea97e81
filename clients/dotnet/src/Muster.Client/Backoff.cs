using System;
using System.Threading;

namespace Muster.Client
{
    /// <summary>Doubles from lo to hi; each delay is jittered into [d/2, d).</summary>
    internal sealed class Backoff
    {
        private readonly TimeSpan lo, hi;
        private TimeSpan cur;

        internal Backoff(TimeSpan lo, TimeSpan hi) { this.lo = lo; this.hi = hi; cur = lo; }

        internal TimeSpan Next()
        {
            var d = cur;
            cur = TimeSpan.FromTicks(Math.Min(cur.Ticks * 2, hi.Ticks));
            return TimeSpan.FromTicks(d.Ticks / 2 + (long)(Rand.NextDouble() * (d.Ticks / 2 + 1)));
        }

        internal void Reset() { cur = lo; }
    }

    internal static class Rand
    {
        private static readonly Random seed = new Random();
        private static readonly ThreadLocal<Random> local = new ThreadLocal<Random>(() => { lock (seed) return new Random(seed.Next()); });

        internal static double NextDouble() { return local.Value.NextDouble(); }
    }

    /// <summary>
    /// The periodic reconciliation default of the observer: clamp(shortest expected
    /// lease TTL / 2, MinReconcile, MaxReconcile), MaxReconcile when the TTL is
    /// unknown, with ±DefaultReconcileJitter (docs/client-operations.md).
    /// </summary>
    public static class Reconcile
    {
        public static readonly TimeSpan MinReconcile = TimeSpan.FromSeconds(5);
        public static readonly TimeSpan MaxReconcile = TimeSpan.FromSeconds(60);
        public const double DefaultReconcileJitter = 0.2;

        /// <summary>The recommended interval for a fleet whose shortest lease TTL is
        /// shortestTtl (zero: unknown).</summary>
        public static TimeSpan Interval(TimeSpan shortestTtl)
        {
            if (shortestTtl <= TimeSpan.Zero) return MaxReconcile;
            var half = TimeSpan.FromTicks(shortestTtl.Ticks / 2);
            if (half < MinReconcile) return MinReconcile;
            return half > MaxReconcile ? MaxReconcile : half;
        }

        /// <summary>Spreads d uniformly over d·[1-j, 1+j].</summary>
        internal static TimeSpan Jittered(TimeSpan d, double j)
        {
            if (j == 0) return d;
            return TimeSpan.FromTicks((long)(d.Ticks * (1 + j * (2 * Rand.NextDouble() - 1))));
        }
    }
}
