//! The client rate limiter of the AWS SDKs' adaptive retry mode: a token bucket whose rate
//! follows CUBIC, enabled by the first throttled answer.

use super::RejectReason;
use super::throttling::Divider;
use crate::sync::{AtomicU64, Mutex, OnceInstant, Ordering};
use std::time::{Duration, Instant};

settings! {
    /// The settings of the [`AdmissionGate`](crate::AdmissionGate) mode that limits the rate of the
    /// client's own attempts, the AWS SDKs' adaptive retry mode: a token bucket in front of every
    /// attempt, first tries included, whose fill rate follows the CUBIC congestion-control curve.
    ///
    /// - Until the service first throttles an attempt, nothing is limited (the bucket is off), but
    ///   the client measures its own sending rate: answers per half-second bucket, smoothed at 0.8.
    /// - A throttled answer turns the bucket on and cuts the rate to β = 0.7 times the rate the
    ///   client was sending at (the measured rate, or the bucket's rate if lower), remembering
    ///   that rate as `W_max`.
    /// - Each other answer sets the rate to the CUBIC curve `C·(t − K)³ + W_max`, with C = 0.4, t
    ///   the seconds since the last throttle and `K = ∛(W_max·(1 − β)/C)`: it climbs back quickly
    ///   to `W_max`, stays near it, then probes above it. The rate is never more than twice the
    ///   measured rate, nor below 0.5 per second; the bucket holds at most one second of tokens
    ///   (and at least 1).
    ///
    /// Each attempt takes one token. When none is there, the attempt waits until its token is due
    /// ([`GatePermit::wait`](crate::GatePermit::wait)), as botocore's blocking `acquire` does; or,
    /// with [`fail_fast`](ClientRateLimit::fail_fast), it is rejected at once with that wait in the
    /// [`Rejected`](crate::Rejected) (what botocore issue #3179 asks for).
    ///
    /// Follows botocore's `botocore/retries/adaptive.py` (`ClientRateLimiter`, `RateClocker`),
    /// `bucket.py` (`TokenBucket`) and `throttling.py` (`CubicCalculator`), commit `40454eaac38c`,
    /// and the golden values of their tests and of the SDKs' shared tables (aws-sdk-go-v2
    /// `aws/retry/adaptive_ratelimit_test.go`, smithy-rs `client_rate_limiter.rs`), which this
    /// crate's tests check to 1e-9. Time starts at the gate's first use.
    ///
    /// Before the first throttle (the happy path) nothing is limited and nothing locks: an
    /// admission reads one flag, an answer is one compare-and-swap on the rate clock (and a short
    /// lock when a half-second bucket ends, at most twice a second). The fill rate botocore sets at
    /// each of these answers is computed from the latest one when needed. The one thing not kept is
    /// the bucket's content, taken as full at the first throttle, as it is in botocore once a client
    /// has had answers for a second or two. From the first throttle on, the state (a few floats)
    /// sits behind a mutex held for a few float operations, as botocore's does.
    ///
    /// ```
    /// use retry_overload::{AdmissionGate, ClientRateLimit};
    ///
    /// static WAITING: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
    /// static FAIL_FAST: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new().fail_fast(true));
    /// ```
    pub struct ClientRateLimit {
        fail_fast: bool = false,
        beta: f64 = 0.7,
        scale: f64 = 0.4,
        smoothing: f64 = 0.8,
        min_fill_rate: f64 = 0.5,
    }
    /// botocore's defaults: β = 0.7, C = 0.4, smoothing 0.8, a minimum fill rate of 0.5 per
    /// second; attempts wait for their token.
    new
}

impl ClientRateLimit {
    setters! {
        /// `true`: an attempt without a token is rejected at once ([`Rejected`](crate::Rejected)
        /// with the wait), instead of waiting for it.
        pub fn fail_fast(fail_fast: bool) => self.fail_fast;

        /// β, the share of the sending rate kept after a throttle: 0.7. Clamped to (0, 1]; NaN is
        /// taken as 0.7.
        pub fn beta(beta: f64) => self.beta = super::clamp_or(beta, f64::MIN_POSITIVE, 1.0, 0.7);

        /// C, how fast the rate grows back: 0.4. Positive; other values (and NaN) are taken as
        /// 0.4.
        pub fn scale_constant(c: f64) => self.scale = if c > 0.0 { c } else { 0.4 };

        /// The weight of the latest half second in the measured rate: 0.8. Clamped to [0, 1]; NaN
        /// is taken as 0.8.
        pub fn smoothing(smoothing: f64) => self.smoothing =
            super::clamp_or(smoothing, 0.0, 1.0, 0.8);

        /// The lowest fill rate, in tokens per second: 0.5. Positive; other values (and NaN) are
        /// taken as 0.5.
        pub fn min_fill_rate(rate: f64) => self.min_fill_rate = if rate > 0.0 { rate } else { 0.5 };
    }

    /// Whether attempts without a token are rejected rather than made to wait.
    pub const fn is_fail_fast(&self) -> bool {
        self.fail_fast
    }
}

/// The limiter's state, in seconds since the gate's first use; the names are botocore's.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cubic {
    // TokenBucket
    pub(super) fill_rate: f64,
    pub(super) max_capacity: f64,
    pub(super) capacity: f64,
    pub(super) last_refill: f64,
    pub(super) enabled: bool,
    // RateClocker
    pub(super) measured_rate: f64,
    pub(super) last_bucket: f64,
    pub(super) count: f64,
    // CubicCalculator
    pub(super) w_max: f64,
    pub(super) k: f64,
    pub(super) last_fail: f64,
}

impl Cubic {
    /// As botocore builds it at time 0: a bucket of max rate 1 (so fill rate 1, capacity 0 of
    /// 1), a measured rate of 0 from bucket 0, CUBIC with `W_max` 0 from time 0.
    pub(super) const START: Cubic = Cubic {
        fill_rate: 1.0,
        max_capacity: 1.0,
        capacity: 0.0,
        last_refill: 0.0,
        enabled: false,
        measured_rate: 0.0,
        last_bucket: 0.0,
        count: 0.0,
        w_max: 0.0,
        k: 0.0,
        last_fail: 0.0,
    };

    /// `TokenBucket._refill`, except that a time earlier than the last refill (a caller that
    /// read the clock before another) adds nothing and does not move the refill time back.
    pub(super) fn refill(&mut self, t: f64) {
        if t > self.last_refill {
            let filled = self.capacity + (t - self.last_refill) * self.fill_rate;
            self.capacity = self.max_capacity.min(filled);
            self.last_refill = t;
        }
    }

    /// The `TokenBucket.max_rate` setter.
    pub(super) fn set_max_rate(&mut self, t: f64, rate: f64, config: &ClientRateLimit) {
        self.refill(t);
        self.fill_rate = rate.max(config.min_fill_rate);
        self.max_capacity = if rate >= 1.0 { rate } else { 1.0 };
        self.capacity = self.capacity.min(self.max_capacity);
    }

    /// `RateClocker.record`: counts one answer at `t`, returns the measured rate.
    pub(super) fn record_rate(&mut self, t: f64, config: &ClientRateLimit) -> f64 {
        // floor(2t)/2; t is never negative, so truncation is floor, without libm's call.
        let bucket = ((t * 2.0) as u64) as f64 / 2.0;
        self.count += 1.0;
        if bucket > self.last_bucket {
            let current = self.count / (bucket - self.last_bucket);
            self.measured_rate =
                current * config.smoothing + self.measured_rate * (1.0 - config.smoothing);
            self.count = 0.0;
            self.last_bucket = bucket;
        }
        self.measured_rate
    }

    /// `CubicCalculator._calculate_zero_point`.
    pub(super) fn zero_point(w_max: f64, config: &ClientRateLimit) -> f64 {
        (w_max * (1.0 - config.beta) / config.scale).powf(1.0 / 3.0)
    }

    /// `CubicCalculator.success_received`.
    pub(super) fn cubic_success(&self, t: f64, config: &ClientRateLimit) -> f64 {
        config.scale * (t - self.last_fail - self.k).powi(3) + self.w_max
    }

    /// `CubicCalculator.error_received`.
    pub(super) fn cubic_error(&mut self, rate: f64, t: f64, config: &ClientRateLimit) -> f64 {
        self.w_max = rate;
        self.k = Self::zero_point(rate, config);
        self.last_fail = t;
        rate * config.beta
    }

    /// `ClientRateLimiter.on_receiving_response`: an answer at `t`, throttled or not.
    pub(super) fn update(&mut self, t: f64, throttled: bool, config: &ClientRateLimit) {
        let measured = self.record_rate(t, config);
        let rate = if throttled {
            let sending = if self.enabled {
                measured.min(self.fill_rate)
            } else {
                measured
            };
            let rate = self.cubic_error(sending, t, config);
            self.enabled = true;
            rate
        } else {
            self.cubic_success(t, config)
        };
        self.set_max_rate(t, rate.min(2.0 * measured), config);
    }

    /// `TokenBucket.acquire(1)` at `t`: `Ok(wait)` with the token taken (reserved, if it is only
    /// due after `wait`), or, failing fast, `Err(wait)` with nothing taken.
    pub(super) fn acquire(&mut self, t: f64, fail_fast: bool) -> Result<f64, f64> {
        self.refill(t);
        if self.capacity >= 1.0 {
            self.capacity -= 1.0;
            return Ok(0.0);
        }
        let wait = (1.0 - self.capacity) / self.fill_rate;
        if fail_fast {
            return Err(wait);
        }
        self.capacity -= 1.0;
        Ok(wait)
    }

    /// Gives back a token that was taken for an attempt that never reported (a cancelled
    /// call), so that a cancellation does not cost a later attempt its token.
    pub(super) fn give_back(&mut self) {
        self.capacity = (self.capacity + 1.0).min(self.max_capacity);
    }
}

/// The rate clock's word while the bucket is off: `last_bucket << 32 | count`, the bucket in
/// half seconds; `CLOSED` once the locked state has taken over.
const CLOSED: u64 = u64::MAX;

/// The shared state of the mode.
///
/// Until the first throttle, the bucket is off and an answer only feeds the rate clock, which
/// is kept in atomics: one compare-and-swap per answer, and the lock only when a half-second
/// bucket ends (at most twice a second), so that the measured rate is updated in order. The fill
/// rate botocore would set at each answer depends only on that answer's time and the measured
/// rate, so it is computed when asked. At the first throttle, the locked state takes over (the
/// clock word is closed, so that no answer is counted twice or lost) and from then on every
/// answer goes through it, as in botocore.
#[derive(Debug)]
pub(super) struct RateLimiter {
    pub(super) config: ClientRateLimit,
    /// Time 0 of the state: the first use.
    epoch: OnceInstant,
    /// 1 once a throttle has turned the bucket on: read without the lock on the happy path.
    enabled: AtomicU64,
    /// The rate clock before the first throttle (see `CLOSED`).
    clock: AtomicU64,
    /// The measured rate before the first throttle (`f64` bits), written under the lock.
    measured: AtomicU64,
    /// The time of the latest answer before the first throttle, in nanoseconds.
    last_answer: AtomicU64,
    state: Mutex<Cubic>,
}

loom_const_fn! {
    impl RateLimiter {
        pub(super) fn new(config: ClientRateLimit) -> Self {
            Self {
                config,
                epoch: OnceInstant::new(),
                enabled: AtomicU64::new(0),
                clock: AtomicU64::new(0),
                measured: AtomicU64::new(0),
                last_answer: AtomicU64::new(0),
                state: Mutex::new(Cubic::START),
            }
        }
    }
}

impl RateLimiter {
    /// Takes a token at the time `clock` says (read only on the first use and once the bucket
    /// is on): `Ok(None)` while the bucket is off (nothing taken), `Ok(Some(wait))`
    /// with a token taken (to be used after `wait`), or the rejection of a fail-fast limiter.
    pub(super) fn admit(
        &self,
        clock: impl FnOnce() -> Instant,
    ) -> Result<Option<Duration>, RejectReason> {
        if self.enabled.load(Ordering::Relaxed) == 0 {
            // Off: nothing to take, and no time needed, but the first use still fixes time 0.
            if self.epoch.get().is_none() {
                self.epoch.get_or_init(clock());
            }
            return Ok(None);
        }
        let t = self.seconds(clock());
        let acquired = crate::sync::lock(&self.state).acquire(t, self.config.fail_fast);
        match acquired {
            Ok(wait) => Ok(Some(duration(wait))),
            Err(wait) => Err(RejectReason::RateLimited {
                wait: duration(wait),
            }),
        }
    }

    /// An answer at `now`.
    pub(super) fn record(&self, throttled: bool, now: Instant) {
        let nanos = self.nanos(now);
        if !throttled && self.enabled.load(Ordering::Relaxed) == 0 && self.clock_off(nanos) {
            return;
        }
        let t = seconds(nanos);
        let mut state = crate::sync::lock(&self.state);
        self.take_over(&mut state);
        state.update(t, throttled, &self.config);
        if state.enabled {
            self.enabled.store(1, Ordering::Relaxed);
        }
    }

    /// `RateClocker.record` before the first throttle, without the lock unless a bucket ends;
    /// `false` when the locked state has taken over (the answer is then the caller's to count).
    fn clock_off(&self, nanos: u64) -> bool {
        let bucket = half_seconds(nanos);
        let mut word = self.clock.load(Ordering::Relaxed);
        loop {
            if word == CLOSED {
                return false;
            }
            let (last, count) = unpack(word);
            if bucket > last {
                return self.turn(bucket, nanos);
            }
            let next = pack(last, count.saturating_add(1));
            match self
                .clock
                .compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.note_answer(nanos);
                    return true;
                }
                Err(current) => word = current,
            }
        }
    }

    /// A bucket ended: under the lock, so that the measured rate moves in order and a take-over
    /// never sees half a turn.
    fn turn(&self, bucket: u32, nanos: u64) -> bool {
        let _state = crate::sync::lock(&self.state);
        let mut word = self.clock.load(Ordering::Relaxed);
        loop {
            if word == CLOSED {
                return false;
            }
            let (last, count) = unpack(word);
            // Another caller may have ended the bucket first: then this answer only counts.
            let next = if bucket > last {
                pack(bucket, 0)
            } else {
                pack(last, count.saturating_add(1))
            };
            match self
                .clock
                .compare_exchange_weak(word, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    if bucket > last {
                        let current = f64::from(count) + 1.0;
                        let rate = current / (f64::from(bucket - last) / 2.0);
                        let smoothing = self.config.smoothing;
                        let measured = f64::from_bits(self.measured.load(Ordering::Relaxed));
                        let measured = rate * smoothing + measured * (1.0 - smoothing);
                        self.measured.store(measured.to_bits(), Ordering::Relaxed);
                    }
                    self.note_answer(nanos);
                    return true;
                }
                Err(current) => word = current,
            }
        }
    }

    /// Keeps the latest answer's time (a late caller with an earlier time does not move it
    /// back; two racing callers may leave either of their times).
    fn note_answer(&self, nanos: u64) {
        if nanos > self.last_answer.load(Ordering::Relaxed) {
            self.last_answer.store(nanos, Ordering::Relaxed);
        }
    }

    /// At the first throttle, under the lock: closes the rate clock and builds botocore's state
    /// from it, as it stood after the latest answer. The bucket's content is the one thing not
    /// kept before the first throttle: it is taken as full, as it is in botocore once a client
    /// has been answered for a second or so at a steady rate.
    fn take_over(&self, state: &mut Cubic) {
        let word = self.clock.swap(CLOSED, Ordering::Relaxed);
        if word == CLOSED {
            return;
        }
        *state = self.off_state(word);
    }

    /// botocore's state before the first throttle, from the rate clock's word.
    fn off_state(&self, word: u64) -> Cubic {
        let (last, count) = unpack(word);
        let mut state = Cubic {
            measured_rate: f64::from_bits(self.measured.load(Ordering::Relaxed)),
            last_bucket: f64::from(last) / 2.0,
            count: f64::from(count),
            ..Cubic::START
        };
        let t = seconds(self.last_answer.load(Ordering::Relaxed));
        if t > 0.0 || state.measured_rate > 0.0 {
            let rate = state.cubic_success(t, &self.config);
            state.set_max_rate(t, rate.min(2.0 * state.measured_rate), &self.config);
            state.capacity = state.max_capacity;
        }
        state
    }

    /// Gives back a token taken by an attempt that never reported.
    pub(super) fn give_back(&self) {
        crate::sync::lock(&self.state).give_back();
    }

    /// A copy of the state, refilled to `now`.
    pub(super) fn snapshot(&self, now: Instant) -> Cubic {
        let t = self.seconds(now);
        let state = crate::sync::lock(&self.state);
        let word = self.clock.load(Ordering::Relaxed);
        let mut state = if word == CLOSED {
            *state
        } else {
            self.off_state(word)
        };
        state.refill(t);
        state
    }

    fn seconds(&self, now: Instant) -> f64 {
        seconds(self.nanos(now))
    }

    /// Nanoseconds from the first use to `now`; 0 before it, at most `Divider::MAX_DIVIDEND`.
    fn nanos(&self, now: Instant) -> u64 {
        let epoch = self.epoch.get_or_init(now);
        let elapsed = now.saturating_duration_since(epoch).as_nanos();
        u64::try_from(elapsed).map_or(Divider::MAX_DIVIDEND, |elapsed| {
            elapsed.min(Divider::MAX_DIVIDEND)
        })
    }
}

/// Nanoseconds as seconds, as `Duration::as_secs_f64` computes them.
fn seconds(nanos: u64) -> f64 {
    Duration::from_nanos(nanos).as_secs_f64()
}

/// Half a second, as a divider of nanoseconds.
const HALF_SECOND: Divider = Divider::new(500_000_000);

fn pack(bucket: u32, count: u32) -> u64 {
    (u64::from(bucket) << 32) | u64::from(count)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The half-second bucket of a time in nanoseconds, `floor(2t)` in botocore's seconds (68 years
/// of them fit, below `CLOSED`'s bucket).
fn half_seconds(nanos: u64) -> u32 {
    u32::try_from(HALF_SECOND.divide(nanos)).map_or(u32::MAX - 1, |bucket| bucket.min(u32::MAX - 1))
}

/// Seconds as a `Duration`, saturating (a wait is never NaN: the fill rate is positive).
fn duration(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}
