//! [`Hedge`]: when a function's attempt starts a copy of itself (`hedge = "50ms"`, `hedge =
//! "p95"`, `max_hedges = 2`), and the latency it has observed for the percentile form.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The buckets of the latency histogram: four per power of two of microseconds, from 1 µs to
/// about 2^40 µs (12 days), so a percentile is read to within a quarter of its value.
const BUCKETS: usize = 160;

/// When an attempt of a function gets hedged: after a fixed delay or after a percentile of the
/// function's observed latency, and how many copies at most. The attribute writes one `static`
/// per function (`#[retry(hedge = "50ms", max_hedges = 2)]`); it is public for the runtime's
/// other doors onto the loop.
///
/// A percentile is read from a histogram of the latency of the function's attempts (a
/// hedge's own latency is not recorded, and an attempt dropped because a hedge answered first is
/// recorded at the time it was dropped, a lower bound of its latency). It is kept in two windows
/// of [`period`](Hedge::period) each, the current and the previous one, so that it follows a
/// service whose latency changes; until it holds [`min_samples`](Hedge::min_samples) latencies
/// nothing is hedged. Recording is a few additions under a lock; the percentile is computed
/// again every 16 records and read with one load.
///
/// ```
/// use retry_runtime::Hedge;
/// use std::time::Duration;
///
/// static FIXED: Hedge = Hedge::after(Duration::from_millis(50)).max_hedges(2);
/// static ADAPTIVE: Hedge = Hedge::percentile(95.0);
/// assert_eq!(FIXED.get_max_hedges(), 2);
/// assert_eq!(ADAPTIVE.get_max_hedges(), 1);
/// ```
#[derive(Debug)]
pub struct Hedge {
    pub(crate) delay: Delay,
    max_hedges: u32,
    pub(crate) min_samples: u32,
    pub(crate) period: Duration,
    latency: Mutex<Latency>,
    /// The percentile as last computed, in nanoseconds; 0 for none yet.
    cached: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Delay {
    Fixed(Duration),
    /// A fraction in (0, 1).
    Percentile(f64),
}

/// The observed latency, in microseconds: two windows of buckets, `epoch % 2` the current one.
#[derive(Debug)]
struct Latency {
    windows: [[u32; BUCKETS]; 2],
    /// The first record's instant, and the periods since it of the current window.
    epoch: Option<(Instant, u64)>,
    records: u32,
}

impl Hedge {
    /// Hedge an attempt that has not answered after `delay` (`hedge = "50ms"`), with one copy.
    pub const fn after(delay: Duration) -> Hedge {
        Hedge::with(Delay::Fixed(delay))
    }

    /// Hedge an attempt that has not answered after the `percentile` (above 0, below 100) of
    /// this function's observed latency (`hedge = "p95"`), with one copy.
    pub const fn percentile(percentile: f64) -> Hedge {
        let fraction = if percentile > 0.0 && percentile < 100.0 {
            percentile / 100.0
        } else {
            0.95
        };
        Hedge::with(Delay::Percentile(fraction))
    }

    const fn with(delay: Delay) -> Hedge {
        Hedge {
            delay,
            max_hedges: 1,
            min_samples: 20,
            period: Duration::from_secs(10),
            latency: Mutex::new(Latency {
                windows: [[0; BUCKETS]; 2],
                epoch: None,
                records: 0,
            }),
            cached: AtomicU64::new(0),
        }
    }

    setters! {
        /// At most `n` copies beside each attempt (`max_hedges = n`), the `k`-th started `k`
        /// delays after the attempt.
        pub fn max_hedges(n: u32) => self.max_hedges;

        /// For a percentile: how many latencies must be observed before hedging starts (20).
        pub fn min_samples(n: u32) => self.min_samples;

        /// For a percentile: how long each of the two windows of observed latency lasts (10 s).
        pub fn period(period: Duration) => self.period;
    }

    /// The most copies beside each attempt.
    pub const fn get_max_hedges(&self) -> u32 {
        self.max_hedges
    }

    /// The delay after which an attempt gets a copy (copy `k` is due `k` delays after the
    /// attempt started), as of now: the fixed delay, or the percentile of the latency observed so
    /// far; `None` while too few latencies were observed.
    pub fn delay(&self) -> Option<Duration> {
        match self.delay {
            Delay::Fixed(delay) => Some(delay),
            Delay::Percentile(_) => match self.cached.load(Relaxed) {
                0 => None,
                nanos => Some(Duration::from_nanos(nanos)),
            },
        }
    }

    /// Whether the percentile form records latencies.
    pub(crate) fn observes(&self) -> bool {
        matches!(self.delay, Delay::Percentile(_))
    }

    /// Records the latency of an attempt that ended (or was dropped) at `now`.
    pub(crate) fn record(&self, latency: Duration, now: Instant) {
        let Delay::Percentile(fraction) = self.delay else {
            return;
        };
        let mut latencies = self.latency.lock().unwrap_or_else(PoisonError::into_inner);
        let l = &mut *latencies;
        // The first record starts the first window; both windows are empty until then.
        let (base, current) = *l.epoch.get_or_insert((now, 0));
        let period = self.period.as_nanos().max(1);
        let epoch = (now.saturating_duration_since(base).as_nanos() / period) as u64;
        // A new window clears the one it reuses, or both after a silence of two periods.
        let rotated = epoch > current;
        if rotated {
            if epoch == current + 1 {
                l.windows[(epoch % 2) as usize] = [0; BUCKETS];
            } else {
                l.windows = [[0; BUCKETS]; 2];
            }
            l.epoch = Some((base, epoch));
        }
        let window = (epoch.max(current) % 2) as usize;
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let count = &mut l.windows[window][bucket(micros)];
        *count = count.saturating_add(1);
        l.records = l.records.wrapping_add(1);
        // Again after a rotation too, which may leave too few latencies for a percentile (and
        // after the first record, when none was computed yet).
        if rotated || l.records % 16 == 0 || self.cached.load(Relaxed) == 0 {
            let nanos = l.percentile(fraction, self.min_samples).map_or(0, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
            });
            self.cached.store(nanos, Relaxed);
        }
    }
}

impl Latency {
    /// The `fraction` quantile of both windows, once they hold `min_samples` latencies: the
    /// upper bound of the bucket it falls in.
    fn percentile(&self, fraction: f64, min_samples: u32) -> Option<Duration> {
        let total: u64 = self.windows.iter().flatten().map(|&n| u64::from(n)).sum();
        if total < u64::from(min_samples.max(1)) {
            return None;
        }
        let rank = ((total as f64) * fraction).ceil() as u64;
        let mut seen = 0;
        for i in 0..BUCKETS {
            seen += u64::from(self.windows[0][i]) + u64::from(self.windows[1][i]);
            if seen >= rank {
                return Some(Duration::from_micros(upper_bound(i)));
            }
        }
        Some(Duration::from_micros(upper_bound(BUCKETS - 1)))
    }
}

/// The bucket of a latency in microseconds: `µs` itself below 4, then four per power of two.
fn bucket(micros: u64) -> usize {
    if micros < 4 {
        return micros as usize;
    }
    let exponent = 63 - micros.leading_zeros() as usize; // ≥ 2
    let sub = ((micros >> (exponent - 2)) & 3) as usize;
    (4 * (exponent - 1) + sub).min(BUCKETS - 1)
}

/// The first latency, in microseconds, past bucket `i`.
fn upper_bound(i: usize) -> u64 {
    if i < 4 {
        return i as u64 + 1;
    }
    let exponent = i / 4 + 1;
    let sub = (i % 4) as u64;
    (5 + sub) << (exponent - 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_latencies() {
        for micros in [
            0,
            1,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            100,
            1_000,
            10_000,
            123_456_789,
        ] {
            let i = bucket(micros);
            assert!(micros < upper_bound(i), "{micros} in {i}");
            if i > 0 {
                assert!(micros >= upper_bound(i - 1), "{micros} in {i}");
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn the_percentile_is_read_from_the_observed_latency() {
        let hedge = Hedge::percentile(95.0).min_samples(100);
        let t0 = Instant::now();
        // 94 fast answers (1 ms) and 6 slow ones (100 ms): the 95th percentile is slow.
        for i in 0..100 {
            assert_eq!(hedge.delay(), None, "too few samples at {i}");
            hedge.record(Duration::from_millis(if i < 94 { 1 } else { 100 }), t0);
        }
        let p95 = hedge.delay().expect("enough samples");
        assert!(
            p95 > Duration::from_millis(100) && p95 <= Duration::from_millis(125),
            "{p95:?}"
        );
        // 20 s later both windows have turned over: too few samples again.
        hedge.record(Duration::from_millis(1), t0 + Duration::from_secs(20));
        assert_eq!(hedge.delay(), None);
    }

    #[test]
    fn a_fixed_delay_is_the_delay() {
        let hedge = Hedge::after(Duration::from_millis(50));
        hedge.record(Duration::from_secs(9), Instant::now());
        assert_eq!(hedge.delay(), Some(Duration::from_millis(50)));
    }
}
