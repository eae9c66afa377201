//! Adaptive concurrency limits after Netflix's `concurrency-limits`: AIMD and Gradient2, with
//! the slot reserved at admission and given back when the permit ends.

use super::RejectReason;
use crate::sync::{AtomicU64, Mutex, Ordering};
use std::time::Duration;

/// The limits both concurrency modes have: where the limit starts and its bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Limits {
    pub(super) initial: u32,
    pub(super) min: u32,
    pub(super) max: u32,
}

impl Limits {
    /// Netflix's defaults for both modes: initial 20, min 20, max 200.
    const NETFLIX: Self = Self {
        initial: 20,
        min: 20,
        max: 200,
    };

    /// `limit` within [min, max] (min wins where max is below it).
    fn bound(&self, limit: u32) -> u32 {
        limit.min(self.max).max(self.min)
    }

    /// [`bound`](Limits::bound) for Gradient2's estimate, which is not rounded.
    fn bound_estimate(&self, estimate: f64) -> f64 {
        estimate.min(f64::from(self.max)).max(f64::from(self.min))
    }
}

/// The builders of the limits both concurrency modes share (Netflix's defaults for both).
macro_rules! limit_builders {
    () => {
        setters! {
            /// The limit before any attempt has ended: 20. At least 1.
            pub fn initial_limit(limit: u32) => self.limits.initial = super::at_least_one(limit);

            /// The limit never goes below this: 20. At least 1, so that a stream of drops cannot
            /// stop all traffic.
            pub fn min_limit(limit: u32) => self.limits.min = super::at_least_one(limit);

            /// The limit never goes above this (Netflix's `maxLimit`, `maxConcurrency`): 200. Below
            /// `min_limit`, `min_limit` wins.
            pub fn max_limit(limit: u32) => self.limits.max;
        }
    };
}

settings! {
    /// The settings of the [`AdmissionGate`](crate::AdmissionGate) mode that bounds the attempts in
    /// flight with a limit that grows additively and shrinks multiplicatively (AIMD), as TCP's
    /// congestion window does: Netflix `concurrency-limits`' `AIMDLimit`
    /// (`concurrency-limits-core/.../limit/AIMDLimit.java`, commit `784c960d278e`).
    ///
    /// After each attempt: if it was dropped (throttled, shed, or slower than
    /// [`timeout`](Aimd::timeout)), `limit = ⌊limit × 0.9⌋`; otherwise, if the attempt saw at least
    /// half the limit in flight (so the limit is really being used), `limit + 1`; always within
    /// [min, max]. Netflix's defaults: initial 20, min 20, max 200, ratio 0.9, timeout 5 s.
    ///
    /// ```
    /// use retry_overload::{AdmissionGate, Aimd};
    ///
    /// static GATE: AdmissionGate = AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1));
    /// ```
    pub struct Aimd {
        limits: Limits = Limits::NETFLIX,
        backoff_ratio: f64 = 0.9,
        timeout: Duration = Duration::from_secs(5),
    }
    /// Netflix's defaults: initial limit 20, min 20, max 200, backoff ratio 0.9, timeout 5 s.
    new
}

impl Aimd {
    limit_builders!();

    setters! {
        /// The factor of a decrease: 0.9. Clamped to [0.5, 1) as Netflix requires; NaN is taken as
        /// 0.9.
        pub fn backoff_ratio(ratio: f64) => self.backoff_ratio =
            super::clamp_or(ratio, 0.5, 0.999_999, 0.9);

        /// An attempt slower than this counts as dropped: 5 s.
        pub fn timeout(timeout: Duration) => self.timeout;
    }

    /// `AIMDLimit._update`: the next limit.
    pub(super) fn next(&self, limit: u32, in_flight: u32, dropped: bool) -> u32 {
        let next = if dropped {
            (f64::from(limit) * self.backoff_ratio) as u32
        } else if u64::from(in_flight) * 2 >= u64::from(limit) {
            limit.saturating_add(1)
        } else {
            limit
        };
        self.limits.bound(next)
    }
}

settings! {
    /// The settings of the [`AdmissionGate`](crate::AdmissionGate) mode that bounds the attempts in
    /// flight with a limit that follows latency: Netflix `concurrency-limits`' `Gradient2Limit`
    /// (`concurrency-limits-core/.../limit/Gradient2Limit.java`, commit `f2528defbbf0`).
    ///
    /// After each attempt that ended (accepted or dropped alike, as in Netflix's), with `rtt` its
    /// latency and `long` an exponential average of latencies (over 600 samples, a plain average
    /// for the first 10):
    ///
    /// ```text
    /// if long / rtt > 2:        long ← long × 0.95     (latency fell back: forget the old load faster)
    /// if in_flight < limit / 2: keep the limit         (the client is not using it)
    /// gradient = clamp(1.5 × long / rtt, 0.5, 1)       (1.5: the latency tolerated before shrinking)
    /// limit    = 0.8 × limit + 0.2 × (limit × gradient + 4)    clamped to [min, max]
    /// ```
    ///
    /// So the limit grows by up to 0.8 per sample while latency stays within 1.5 times its long-term
    /// average, and shrinks toward half when queueing makes it longer. Netflix's defaults: initial
    /// 20, min 20, max 200, smoothing 0.2, queue size 4, long window 600, RTT tolerance 1.5. An RTT
    /// of 0 (a virtual clock that did not move) counts as no queueing.
    ///
    /// ```
    /// use retry_overload::{AdmissionGate, Gradient2};
    ///
    /// static GATE: AdmissionGate = AdmissionGate::gradient2(Gradient2::new().min_limit(4));
    /// ```
    pub struct Gradient2 {
        limits: Limits = Limits::NETFLIX,
        smoothing: f64 = 0.2,
        queue_size: u32 = 4,
        long_window: u32 = 600,
        /// `2 / (long_window + 1)`, the weight of a sample in the long average.
        long_factor: f64 = 2.0 / 601.0,
        rtt_tolerance: f64 = 1.5,
    }
    /// Netflix's defaults: initial limit 20, min 20, max 200, smoothing 0.2, queue size 4,
    /// long window 600 samples, RTT tolerance 1.5.
    new
}

impl Gradient2 {
    limit_builders!();

    setters! {
        /// How much of the new estimate replaces the limit at each sample: 0.2. Clamped to [0, 1];
        /// NaN is taken as 0.2.
        pub fn smoothing(smoothing: f64) => self.smoothing = super::clamp_or(smoothing, 0.0, 1.0, 0.2);

        /// How much the limit may grow per sample while latency stays low: 4.
        pub fn queue_size(queue_size: u32) => self.queue_size;
    }

    /// The samples of the long-term latency average: 600. At least 1.
    pub const fn long_window(mut self, samples: u32) -> Self {
        self.long_window = super::at_least_one(samples);
        self.long_factor = 2.0 / (self.long_window as f64 + 1.0);
        self
    }

    setters! {
        /// How much longer than its long-term average latency may grow before the limit shrinks:
        /// 1.5. At least 1; NaN is taken as 1.5.
        pub fn rtt_tolerance(tolerance: f64) => self.rtt_tolerance =
            super::clamp_or(tolerance, 1.0, f64::INFINITY, 1.5);
    }
}

/// `ExpAvgMeasurement(window, 10)` and the estimated limit of `Gradient2Limit`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Gradient2State {
    pub(super) estimate: f64,
    pub(super) long_rtt: f64,
    long_sum: f64,
    long_count: u32,
}

/// Netflix's warm-up: the first 10 samples are averaged plainly.
const WARMUP: u32 = 10;

impl Gradient2State {
    pub(super) const fn new(initial: u32) -> Self {
        Self {
            estimate: initial as f64,
            long_rtt: 0.0,
            long_sum: 0.0,
            long_count: 0,
        }
    }

    /// `ExpAvgMeasurement.add`.
    fn add_long(&mut self, sample: f64, factor: f64) -> f64 {
        if self.long_count < WARMUP {
            self.long_count += 1;
            self.long_sum += sample;
            self.long_rtt = self.long_sum / f64::from(self.long_count);
        } else {
            self.long_rtt = self.long_rtt * (1.0 - factor) + sample * factor;
        }
        self.long_rtt
    }

    /// `Gradient2Limit._update` for a sample of `rtt` nanoseconds that saw `in_flight`
    /// attempts in flight (itself included); returns the new estimate.
    pub(super) fn update(&mut self, rtt: f64, in_flight: u32, config: &Gradient2) -> f64 {
        let queue_size = f64::from(config.queue_size);
        let short = rtt;
        let long = self.add_long(rtt, config.long_factor);
        if long / short > 2.0 {
            self.long_rtt *= 0.95;
        }
        if f64::from(in_flight) < self.estimate / 2.0 {
            return self.estimate;
        }
        // An RTT of zero with no history is 0 / 0: no queueing, a gradient of 1.
        let ratio = config.rtt_tolerance * long / short;
        let gradient = if ratio.is_nan() {
            1.0
        } else {
            ratio.clamp(0.5, 1.0)
        };
        let estimate = self.estimate * gradient + queue_size;
        let estimate = self.estimate * (1.0 - config.smoothing) + estimate * config.smoothing;
        self.estimate = config.limits.bound_estimate(estimate);
        self.estimate
    }
}

/// The limit and the attempts in flight, in one word (`limit << 32 | in_flight`), so that
/// admitting is one compare-and-swap that cannot over-admit, and ending an attempt updates
/// both at once.
#[derive(Debug)]
pub(super) struct Slots {
    word: AtomicU64,
}

fn pack(limit: u32, in_flight: u32) -> u64 {
    (u64::from(limit) << 32) | u64::from(in_flight)
}

pub(super) fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

loom_const_fn! {
    impl Slots {
        pub(super) fn new(limit: u32) -> Self {
            Self {
                word: AtomicU64::new((limit as u64) << 32),
            }
        }
    }
}

impl Slots {
    /// Takes a slot: `Ok(in_flight)` counting this one, or the rejection at the limit.
    pub(super) fn acquire(&self) -> Result<u32, RejectReason> {
        // Relaxed: the word publishes no other data; the compare-and-swap alone decides.
        self.word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let (limit, in_flight) = unpack(word);
                (in_flight < limit).then(|| word + 1)
            })
            .map(|word| unpack(word).1 + 1)
            .map_err(|word| RejectReason::ConcurrencyLimit {
                limit: unpack(word).0,
            })
    }

    /// Gives a slot back, and sets the limit to `next(limit)` in the same update.
    pub(super) fn release(&self, next: impl Fn(u32) -> u32) {
        let _ = self
            .word
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                let (limit, in_flight) = unpack(word);
                Some(pack(next(limit), in_flight.saturating_sub(1)))
            });
    }

    /// The limit and the attempts in flight.
    pub(super) fn get(&self) -> (u32, u32) {
        unpack(self.word.load(Ordering::Relaxed))
    }
}

/// The shared state of Gradient2: the slots, and the estimate behind a lock (taken when an
/// attempt reports, never to admit one).
#[derive(Debug)]
pub(super) struct Gradient2Limiter {
    pub(super) config: Gradient2,
    pub(super) slots: Slots,
    pub(super) state: Mutex<Gradient2State>,
}

loom_const_fn! {
    impl Gradient2Limiter {
        pub(super) fn new(config: Gradient2) -> Self {
            Self {
                config,
                slots: Slots::new(config.limits.initial),
                state: Mutex::new(Gradient2State::new(config.limits.initial)),
            }
        }
    }
}

impl Gradient2Limiter {
    /// An attempt that saw `in_flight` ended after `rtt`: the estimate moves, and the slot is
    /// given back with the new limit, under the lock, so that limits are published in the
    /// order they were computed.
    pub(super) fn sample(&self, rtt: Duration, in_flight: u32) {
        let mut state = crate::sync::lock(&self.state);
        // Through u64 (584 years): u128 to f64 is a slow software conversion.
        let rtt = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX) as f64;
        let estimate = state.update(rtt, in_flight, &self.config);
        // At least min_limit ≥ 1; a float-to-integer `as` saturates.
        let limit = estimate as u32;
        self.slots.release(|_| limit);
    }
}
