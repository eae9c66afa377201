//! A retry budget: a token bucket that bounds retries to a fraction of first attempts.

use crate::bounds::clamp_or;
use crate::sync::{AtomicU64, OnceInstant, Ordering};
use std::fmt;
use std::time::Instant;

/// Tokens are kept in millionths, so that a ratio like 0.1 deposits an exact integer and the
/// bound "ratio · first attempts" holds without rounding drift.
const SCALE: u64 = 1_000_000;

/// The largest ratio [`RetryBudget::ratio`] accepts: a thousand retries per first attempt is
/// already no budget at all, and the cap keeps the fixed-point arithmetic far from overflow.
const MAX_RATIO: f64 = 1000.0;

/// A retry budget shared by every call that names it: retries may add only a fraction of the
/// traffic, plus a small reserve per second.
///
/// Backoff spreads retries over time but does not bound how many there are: when a service is
/// struggling, every caller adds up to `max` extra calls. A budget bounds the total instead, as
/// gRPC's retry throttling, the AWS SDK's retry quota and Finagle's `RetryBudget` do:
///
/// - each first attempt [deposits](RetryBudget::deposit) a fraction of a token
///   ([`ratio`](RetryBudget::ratio), default 0.1);
/// - each retry [withdraws](RetryBudget::try_withdraw) one whole token, and is not taken when
///   there is none;
/// - a [reserve](RetryBudget::min_per_second) of retries per second (default 10) is always
///   there, so a quiet client whose deposits add up to little can still retry. The reserve is
///   spent first; it is counted in whole seconds from the first withdrawal (fixed windows, so a
///   burst that straddles the turn of a second may use two seconds' reserve);
/// - the bucket holds at most [`max_tokens`](RetryBudget::max_tokens) (default 100), so a long
///   period of successful traffic does not bank an unlimited burst of retries for the next
///   outage.
///
/// The bucket starts empty. So within any one second (counted from the first withdrawal), `n`
/// first attempts allow at most `min(ratio·n + banked tokens, max_tokens) + min_per_second`
/// retries, and under a long outage retries add at most about `ratio` of the first attempts.
///
/// The budget is lock-free (atomics only) and `const`-constructible, so it can live in a
/// `static`. It never reads the clock: [`try_withdraw`](RetryBudget::try_withdraw) takes the
/// time as an argument, so tests can pass any instants they like. Every caller of one budget
/// should pass times from the same clock.
///
/// ```
/// use retry_runtime::RetryBudget;
/// use std::time::{Duration, Instant};
///
/// static COVERAGE_BUDGET: RetryBudget = RetryBudget::new().ratio(0.1).min_per_second(2);
///
/// let t0 = Instant::now();
/// for _ in 0..30 {
///     COVERAGE_BUDGET.deposit(); // 30 first attempts: 3 tokens
/// }
/// // 2 retries from this second's reserve, then 3 from the bucket, then none.
/// let retries = (0..10).filter(|_| COVERAGE_BUDGET.try_withdraw(t0)).count();
/// assert_eq!(retries, 5);
/// // The next second brings a fresh reserve.
/// assert!(COVERAGE_BUDGET.try_withdraw(t0 + Duration::from_secs(1)));
/// ```
pub struct RetryBudget {
    /// Millionths of a token that each first attempt deposits.
    deposit: u64,
    /// The most millionths the bucket holds.
    cap: u64,
    /// Retries per second that need no token.
    reserve: u32,
    /// Millionths of a token in the bucket.
    tokens: AtomicU64,
    /// The reserve's current window: `second << 32 | used`, `second` counted from `epoch`. One
    /// word, so that moving to a new second and counting a use is one compare-and-swap.
    window: AtomicU64,
    /// The time of the first withdrawal: second 0 of the reserve's windows.
    epoch: OnceInstant,
    /// The `budget` label of its metrics.
    name: &'static str,
    /// The handles of its metrics (feature `metrics`), registered at its first use.
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::BudgetMetrics,
}

default_is_new!(RetryBudget);

loom_const_fn! {
    impl RetryBudget {
        /// An empty budget with the defaults: ratio 0.1, a reserve of 10 retries per second, at
        /// most 100 tokens in the bucket.
        ///
        /// ```
        /// use retry_runtime::RetryBudget;
        ///
        /// static BUDGET: RetryBudget = RetryBudget::new();
        /// assert_eq!(BUDGET.get_ratio(), 0.1);
        /// assert_eq!(BUDGET.get_min_per_second(), 10);
        /// assert_eq!(BUDGET.get_max_tokens(), 100);
        /// assert_eq!(BUDGET.available(), 0.0);
        /// ```
        pub fn new() -> Self {
            Self {
                deposit: SCALE / 10,
                cap: 100 * SCALE,
                reserve: 10,
                tokens: AtomicU64::new(0),
                window: AtomicU64::new(0),
                epoch: OnceInstant::new(),
                name: "unnamed",
                #[cfg(feature = "metrics")]
                metrics: crate::metrics::BudgetMetrics::new(),
            }
        }
    }
}

impl RetryBudget {
    /// The fraction of a token each first attempt deposits: with `ratio(0.1)`, ten first
    /// attempts pay for one retry. Clamped to [0, 1000]; NaN is taken as 0 (only the reserve
    /// allows retries). Kept to a millionth of a token.
    pub const fn ratio(mut self, ratio: f64) -> Self {
        let ratio = clamp_or(ratio, 0.0, MAX_RATIO, 0.0);
        self.deposit = (ratio * SCALE as f64 + 0.5) as u64;
        self
    }

    setters! {
        /// Retries per second that need no token, so that a client with little traffic (whose
        /// deposits add up to little) can still retry. 0 leaves only the bucket.
        pub fn min_per_second(retries: u32) => self.reserve;

        /// The most tokens the bucket holds: deposits beyond it are lost, so that a long period of
        /// successful traffic does not bank an unlimited burst of retries. 0 leaves only the
        /// reserve.
        pub fn max_tokens(tokens: u32) => self.cap = tokens as u64 * SCALE;

        /// Its name, the `budget` label of its metrics (feature `metrics`): a name of the code's,
        /// never anything a request brings. A budget without one is labelled `unnamed`.
        ///
        /// ```
        /// use retry_runtime::RetryBudget;
        ///
        /// static BANK_BUDGET: RetryBudget = RetryBudget::new().name("bank");
        /// assert_eq!(BANK_BUDGET.get_name(), "bank");
        /// assert_eq!(RetryBudget::new().get_name(), "unnamed");
        /// ```
        pub fn name(name: &'static str) => self.name;
    }

    /// Its name ([`name`](RetryBudget::name)), `unnamed` if none was given.
    pub const fn get_name(&self) -> &'static str {
        self.name
    }

    /// Records a first attempt: adds [`get_ratio`](RetryBudget::get_ratio) of a token,
    /// up to [`get_max_tokens`](RetryBudget::get_max_tokens). Call it once per call of the function, not
    /// per attempt.
    pub fn deposit(&self) {
        if self.deposit == 0 {
            return;
        }
        // Relaxed: the counter publishes no other data, and each update is a single atomic
        // read-modify-write, so no deposit is lost.
        let _deposited = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                (tokens < self.cap).then(|| tokens.saturating_add(self.deposit).min(self.cap))
            });
        #[cfg(feature = "metrics")]
        if let Ok(before) = _deposited {
            let after = before.saturating_add(self.deposit).min(self.cap);
            self.metrics.tokens(self.name, after as f64 / SCALE as f64);
        }
    }

    /// Asks for one retry at `now`: `true` takes it from this second's reserve or, when that is
    /// used up, one token from the bucket; `false` means both are empty and the retry should
    /// not be made.
    ///
    /// `now` is the caller's clock; the first call fixes the start of the reserve's one-second
    /// windows. A `now` earlier than the current window (a caller that read the clock a little
    /// before another) counts against the current window.
    pub fn try_withdraw(&self, now: Instant) -> bool {
        if self.reserve > 0 {
            let second = self.second(now);
            let from_reserve =
                self.window
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |window| {
                        let (current, used) = unpack(window);
                        if second > current {
                            Some(pack(second, 1))
                        } else if used < self.reserve {
                            Some(pack(current, used + 1))
                        } else {
                            None
                        }
                    });
            if from_reserve.is_ok() {
                return true;
            }
        }
        let withdrawn = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |tokens| {
                tokens.checked_sub(SCALE)
            });
        #[cfg(feature = "metrics")]
        match withdrawn {
            Ok(before) => self
                .metrics
                .tokens(self.name, (before - SCALE) as f64 / SCALE as f64),
            Err(_) => self.metrics.refused(self.name),
        }
        withdrawn.is_ok()
    }

    /// Tokens in the bucket now, the reserve not included: each whole token is one retry.
    pub fn available(&self) -> f64 {
        self.tokens.load(Ordering::Relaxed) as f64 / SCALE as f64
    }

    /// Retries left in the reserve of the second that contains `now`.
    ///
    /// ```
    /// use retry_runtime::RetryBudget;
    /// use std::time::{Duration, Instant};
    ///
    /// let budget = RetryBudget::new().min_per_second(3);
    /// let t0 = Instant::now();
    /// assert_eq!(budget.reserve_left(t0), 3);
    /// assert!(budget.try_withdraw(t0));
    /// assert_eq!(budget.reserve_left(t0), 2);
    /// assert_eq!(budget.reserve_left(t0 + Duration::from_secs(1)), 3);
    /// ```
    pub fn reserve_left(&self, now: Instant) -> u32 {
        let (current, used) = unpack(self.window.load(Ordering::Relaxed));
        match self.epoch.get() {
            Some(_) if self.second(now) <= current => self.reserve.saturating_sub(used),
            _ => self.reserve,
        }
    }

    /// The fraction of a token each first attempt deposits.
    pub const fn get_ratio(&self) -> f64 {
        self.deposit as f64 / SCALE as f64
    }

    /// Retries per second that need no token.
    pub const fn get_min_per_second(&self) -> u32 {
        self.reserve
    }

    /// The most tokens the bucket holds.
    pub const fn get_max_tokens(&self) -> u32 {
        (self.cap / SCALE) as u32
    }

    /// The reserve window that contains `now`, in whole seconds since the first withdrawal.
    fn second(&self, now: Instant) -> u32 {
        let epoch = self.epoch.get_or_init(now);
        let seconds = now.saturating_duration_since(epoch).as_secs();
        u32::try_from(seconds).unwrap_or(u32::MAX)
    }
}

fn pack(second: u32, used: u32) -> u64 {
    (u64::from(second) << 32) | u64::from(used)
}

fn unpack(window: u64) -> (u32, u32) {
    ((window >> 32) as u32, window as u32)
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("name", &self.name)
            .field("ratio", &self.get_ratio())
            .field("min_per_second", &self.reserve)
            .field("max_tokens", &self.get_max_tokens())
            .field("available", &self.available())
            .finish()
    }
}

// Under loom, `new` is not `const`, so these (with their `static` budget) are not built.
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;
    use std::thread;
    use std::time::Duration;

    static BUDGET: RetryBudget = RetryBudget::new();

    #[test]
    fn a_static_budget_starts_empty_with_the_defaults() {
        assert_eq!(BUDGET.get_ratio(), 0.1);
        assert_eq!(BUDGET.get_min_per_second(), 10);
        assert_eq!(BUDGET.get_max_tokens(), 100);
        assert_eq!(BUDGET.available(), 0.0);
    }

    #[test]
    fn heavy_failure_is_bounded_by_ratio_plus_reserve() {
        let budget = RetryBudget::new();
        let t0 = Instant::now();
        let mut retries = 0;
        // 1,000 calls that all fail, each wanting 3 retries within the same second.
        for caller in 0..1000u32 {
            budget.deposit();
            let now = t0 + Duration::from_micros(u64::from(caller) * 900);
            retries += (0..3).filter(|_| budget.try_withdraw(now)).count();
        }
        assert_eq!(retries, 100 + 10);
        assert_eq!(budget.available(), 0.0);
    }

    #[test]
    fn deposits_first_then_withdrawals_give_the_exact_bound() {
        let budget = RetryBudget::new().max_tokens(1000);
        let t0 = Instant::now();
        for _ in 0..1000 {
            budget.deposit();
        }
        assert_eq!(budget.available(), 100.0);
        let retries = (0..3000).filter(|_| budget.try_withdraw(t0)).count();
        assert_eq!(retries, 110);
    }

    #[test]
    fn a_quiet_client_can_retry_from_the_reserve() {
        let budget = RetryBudget::new();
        let t0 = Instant::now();
        budget.deposit(); // a tenth of a token: not enough on its own
        assert!(budget.try_withdraw(t0));
        assert_eq!(budget.reserve_left(t0), 9);
        assert_eq!(budget.available(), 0.1);
    }

    #[test]
    fn the_reserve_refills_the_next_second() {
        let budget = RetryBudget::new().min_per_second(2);
        let t0 = Instant::now();
        assert!(budget.try_withdraw(t0));
        assert!(budget.try_withdraw(t0 + Duration::from_millis(999)));
        assert!(!budget.try_withdraw(t0 + Duration::from_millis(999)));
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(budget.reserve_left(t1), 2);
        assert!(budget.try_withdraw(t1));
        assert!(budget.try_withdraw(t1));
        assert!(!budget.try_withdraw(t1));
        // Ten quiet seconds later, still just one second's reserve.
        let t11 = t0 + Duration::from_secs(11);
        assert_eq!((0..5).filter(|_| budget.try_withdraw(t11)).count(), 2);
    }

    #[test]
    fn a_late_clock_reading_counts_against_the_current_second() {
        let budget = RetryBudget::new().min_per_second(1);
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        assert!(budget.try_withdraw(t0));
        assert!(budget.try_withdraw(t1));
        // Read before `t1` by a slower thread: no second reserve for second 0.
        assert!(!budget.try_withdraw(t1 - Duration::from_millis(1)));
        // Earlier than the first withdrawal: also the current window.
        assert!(!budget.try_withdraw(t0 - Duration::from_secs(5)));
    }

    #[test]
    fn the_bucket_is_spent_after_the_reserve() {
        let budget = RetryBudget::new().ratio(1.0).min_per_second(1);
        let t0 = Instant::now();
        budget.deposit();
        budget.deposit();
        assert!(budget.try_withdraw(t0)); // reserve
        assert_eq!(budget.available(), 2.0);
        assert!(budget.try_withdraw(t0));
        assert!(budget.try_withdraw(t0));
        assert!(!budget.try_withdraw(t0));
    }

    #[test]
    fn the_bucket_is_capped() {
        let budget = RetryBudget::new().max_tokens(5).min_per_second(0);
        for _ in 0..1000 {
            budget.deposit();
        }
        assert_eq!(budget.available(), 5.0);
        let t0 = Instant::now();
        assert_eq!((0..10).filter(|_| budget.try_withdraw(t0)).count(), 5);
    }

    #[test]
    fn no_reserve_and_no_capacity_allow_no_retry() {
        let budget = RetryBudget::new().max_tokens(0).min_per_second(0);
        budget.deposit();
        assert!(!budget.try_withdraw(Instant::now()));
    }

    #[test]
    fn the_ratio_is_clamped() {
        assert_eq!(RetryBudget::new().ratio(-1.0).get_ratio(), 0.0);
        assert_eq!(RetryBudget::new().ratio(f64::NAN).get_ratio(), 0.0);
        assert_eq!(RetryBudget::new().ratio(1e9).get_ratio(), 1000.0);
        assert_eq!(RetryBudget::new().ratio(0.25).get_ratio(), 0.25);
        assert_eq!(
            RetryBudget::new().max_tokens(u32::MAX).get_max_tokens(),
            u32::MAX
        );
    }

    #[test]
    fn a_zero_ratio_leaves_only_the_reserve() {
        let budget = RetryBudget::new().ratio(0.0).min_per_second(1);
        let t0 = Instant::now();
        for _ in 0..100 {
            budget.deposit();
        }
        assert_eq!((0..5).filter(|_| budget.try_withdraw(t0)).count(), 1);
    }

    /// Runs `caller` on 8 threads that start together, and sums the retries they took.
    fn retries_on_8_threads(caller: impl Fn() -> usize + Sync) -> usize {
        const THREADS: usize = 8;
        let start = Barrier::new(THREADS);
        let retries = AtomicUsize::new(0);
        thread::scope(|scope| {
            for _ in 0..THREADS {
                scope.spawn(|| {
                    start.wait();
                    retries.fetch_add(caller(), Ordering::Relaxed);
                });
            }
        });
        retries.into_inner()
    }

    #[test]
    fn concurrent_callers_never_exceed_the_bound() {
        const CALLERS_PER_THREAD: usize = 125; // 1,000 callers in all
        let budget = RetryBudget::new();
        let t0 = Instant::now();
        let retries = retries_on_8_threads(|| {
            let mut taken = 0;
            for _ in 0..CALLERS_PER_THREAD {
                budget.deposit();
                taken += (0..3).filter(|_| budget.try_withdraw(t0)).count();
            }
            taken
        });
        assert!(retries <= 110, "{retries} retries");
        // What was not withdrawn is still in the bucket: nothing was lost or made up.
        let withdrawn_from_bucket = retries - 10;
        assert_eq!(budget.available(), 100.0 - withdrawn_from_bucket as f64);
    }

    #[test]
    fn concurrent_withdrawals_after_deposits_take_exactly_the_bound() {
        let budget = RetryBudget::new();
        for _ in 0..1000 {
            budget.deposit();
        }
        let t0 = Instant::now();
        let retries = retries_on_8_threads(|| (0..100).filter(|_| budget.try_withdraw(t0)).count());
        assert_eq!(retries, 110);
        assert_eq!(budget.available(), 0.0);
    }
}

/// Model checks with loom: every interleaving of two or three threads (see `crate::sync`).
/// `RUSTFLAGS="--cfg loom" cargo test -p retry-runtime --release --lib loom`.
#[cfg(all(test, loom))]
mod loom {
    use super::*;
    use ::loom::model;
    use ::loom::sync::Arc;
    use std::time::Duration;

    /// Runs `f` on `threads` threads of a loom model (the model's own among them) over one shared
    /// value, and returns each thread's answer, the model's own first.
    fn on_threads<S, T>(
        shared: &Arc<S>,
        threads: usize,
        f: impl Fn(&S, usize) -> T + Send + Sync + 'static,
    ) -> Vec<T>
    where
        S: Send + Sync + 'static,
        T: Send + 'static,
    {
        let f = Arc::new(f);
        let others: Vec<_> = (1..threads)
            .map(|i| {
                let (shared, f) = (Arc::clone(shared), Arc::clone(&f));
                ::loom::thread::spawn(move || f(&shared, i))
            })
            .collect();
        let mut answers = vec![f(shared, 0)];
        answers.extend(others.into_iter().map(|t| t.join().expect("no panic")));
        answers
    }

    #[test]
    fn loom_three_callers_never_take_more_retries_than_tokens() {
        model(|| {
            let budget = Arc::new(RetryBudget::new().ratio(1.0).min_per_second(0));
            budget.deposit();
            budget.deposit(); // two tokens, no reserve
            let t0 = Instant::now();
            let taken = on_threads(&budget, 3, move |budget, _| budget.try_withdraw(t0));
            assert_eq!(taken.iter().filter(|&&t| t).count(), 2, "{taken:?}");
            assert_eq!(budget.available(), 0.0);
        });
    }

    #[test]
    fn loom_no_deposit_is_lost_and_the_cap_holds() {
        for (max_tokens, expected) in [(100, 1.5), (1, 1.0)] {
            model(move || {
                let budget = Arc::new(
                    RetryBudget::new()
                        .ratio(0.5)
                        .max_tokens(max_tokens)
                        .min_per_second(0),
                );
                on_threads(&budget, 3, |budget, _| budget.deposit());
                assert_eq!(budget.available(), expected, "max_tokens {max_tokens}");
            });
        }
    }

    #[test]
    fn loom_deposits_racing_withdrawals_leave_exactly_the_rest() {
        model(|| {
            let budget = Arc::new(RetryBudget::new().ratio(1.0).min_per_second(0));
            let t0 = Instant::now();
            let taken = on_threads(&budget, 2, move |budget, i| {
                if i == 0 {
                    budget.deposit();
                    budget.deposit();
                    0
                } else {
                    (0..2).filter(|_| budget.try_withdraw(t0)).count()
                }
            });
            let taken: usize = taken.iter().sum();
            assert!(taken <= 2, "{taken}");
            assert_eq!(budget.available(), (2 - taken) as f64);
        });
    }

    #[test]
    fn loom_the_first_withdrawals_race_to_start_the_reserve_once() {
        model(|| {
            // No tokens: only the reserve, one retry per second. Both first withdrawals race to
            // fix the start of the one-second windows.
            let budget = Arc::new(RetryBudget::new().ratio(0.0).min_per_second(1));
            let t0 = Instant::now();
            let t1 = t0 + Duration::from_secs(1);
            let taken = on_threads(&budget, 2, move |budget, _| budget.try_withdraw(t0));
            assert_eq!(taken.iter().filter(|&&t| t).count(), 1, "{taken:?}");
            assert_eq!((budget.reserve_left(t0), budget.reserve_left(t1)), (0, 1));
        });
    }

    #[test]
    fn loom_three_callers_share_a_seconds_reserve_exactly() {
        model(|| {
            // A reserve of 3 per second, one already used (which started the windows): 3 callers
            // race for the 2 left.
            let budget = Arc::new(RetryBudget::new().ratio(0.0).min_per_second(3));
            let t0 = Instant::now();
            assert!(budget.try_withdraw(t0));
            let taken = on_threads(&budget, 3, move |budget, _| budget.try_withdraw(t0));
            assert_eq!(taken.iter().filter(|&&t| t).count(), 2, "{taken:?}");
            assert_eq!(budget.reserve_left(t0), 0);
        });
    }
}
