//! Backoff and the reconciliation-interval formula, as the Go SDK's
//! `backoff.go`.

use std::time::Duration;

/// Doubles from `lo` to `hi`; each delay is jittered into `[d/2, d]`.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    lo: Duration,
    hi: Duration,
    cur: Duration,
}

impl Backoff {
    pub fn new(lo: Duration, hi: Duration) -> Backoff {
        Backoff { lo, hi, cur: lo }
    }

    pub fn next_delay(&mut self) -> Duration {
        let d = self.cur;
        self.cur = (self.cur * 2).min(self.hi);
        let half = d / 2;
        half + Duration::from_nanos(fastrand::u64(0..=half.as_nanos() as u64))
    }

    pub fn reset(&mut self) {
        self.cur = self.lo;
    }
}

/// The lower bound of the default reconciliation interval.
pub const MIN_RECONCILE: Duration = Duration::from_secs(5);
/// The upper bound of the default reconciliation interval, and the interval
/// when the shortest TTL is unknown.
pub const MAX_RECONCILE: Duration = Duration::from_secs(60);
/// The default jitter of the reconciliation interval (±20 %).
pub const DEFAULT_RECONCILE_JITTER: f64 = 0.2;

/// The recommended reconciliation interval for a fleet whose shortest lease
/// TTL is `shortest_ttl` (zero: unknown): `clamp(shortest_ttl / 2, 5 s,
/// 60 s)`, 60 s when unknown. The formula and its evidence are in
/// `docs/client-operations.md` ("How often to reconcile").
pub fn reconcile_interval(shortest_ttl: Duration) -> Duration {
    if shortest_ttl.is_zero() {
        return MAX_RECONCILE;
    }
    (shortest_ttl / 2).clamp(MIN_RECONCILE, MAX_RECONCILE)
}

/// Spreads `d` uniformly over `d·[1-j, 1+j]`.
pub(crate) fn jittered(d: Duration, j: f64) -> Duration {
    if j == 0.0 {
        return d;
    }
    d.mul_f64(1.0 + j * (2.0 * fastrand::f64() - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_interval_is_the_documented_clamp() {
        let s = Duration::from_secs;
        for (ttl, want) in [(0, 60), (1, 5), (10, 5), (30, 15), (120, 60), (600, 60)] {
            assert_eq!(reconcile_interval(s(ttl)), s(want), "ttl {ttl}s");
        }
    }

    #[test]
    fn jitter_stays_within_its_band() {
        let d = Duration::from_secs(10);
        for _ in 0..1000 {
            let j = jittered(d, 0.2);
            assert!(
                j >= Duration::from_secs(8) && j <= Duration::from_secs(12),
                "{j:?}"
            );
        }
        assert_eq!(jittered(d, 0.0), d);
    }

    #[test]
    fn backoff_doubles_to_its_ceiling_jittered_into_the_upper_half() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(50), ms(2000));
        let mut bound = ms(50);
        for _ in 0..10 {
            let d = b.next_delay();
            assert!(
                d >= bound / 2 && d <= bound,
                "{d:?} not in [{:?}, {bound:?}]",
                bound / 2
            );
            bound = (bound * 2).min(ms(2000));
        }
        b.reset();
        assert!(b.next_delay() <= ms(50));
    }
}
