using System;
using System.Diagnostics;

namespace Muster.Client
{
    /// <summary>
    /// The SDK's monotonic clock. Every local deadline (a lease's, a session's) and every
    /// send time it is counted from is a reading of it, never of the wall clock:
    /// DateTime.UtcNow can step (NTP, an operator), and a step would move every deadline
    /// with it, past the broker's expiry. A reading is the time since the process first
    /// read the clock, from Stopwatch timestamps (monotonic).
    /// </summary>
    internal static class MonoClock
    {
        private static readonly Stopwatch Since = Stopwatch.StartNew();

        /// <summary>Now, on the monotonic clock.</summary>
        internal static TimeSpan Now { get { return Since.Elapsed; } }
    }
}
