//! Client-side adaptive throttling (Google SRE book, "Handling Overload"), over a sliding window
//! of lock-free bins.

use super::RejectReason;
use crate::sync::{AtomicU64, OnceInstant, Ordering};
use std::time::{Duration, Instant};

/// The most bins the window can be cut into, and the size of the ring that holds them: bin `i`
/// is in slot `i % 32`, so the last `bins` (at most 32) bins are always in distinct slots, and a
/// slot is found with a mask rather than a division.
pub(super) const MAX_BINS: usize = 32;
const SLOT_MASK: u64 = MAX_BINS as u64 - 1;

/// A bin is one word: the low 24 bits of its absolute index (its "stamp"), then 20 bits of
/// throttled or locally rejected requests, then 20 bits of accepted ones.
const STAMP_BITS: u32 = 24;
const COUNT_BITS: u32 = 20;
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

settings! {
    /// The settings of the [`AdmissionGate`](crate::AdmissionGate) mode that sheds requests at the
    /// client when the service has been rejecting them: client-side adaptive throttling, from
    /// Google's SRE book (chapter 21, "Handling Overload", section "Client-Side Throttling").
    ///
    /// Over a sliding window, the client counts `requests` (attempts that reached an answer,
    /// including the ones it rejected itself) and `accepts` (attempts the service accepted), and
    /// rejects each new attempt locally with probability
    ///
    /// ```text
    /// max(0, (requests − K · accepts) / (requests + padding))
    /// ```
    ///
    /// So nothing is rejected while the service accepts more than 1/K of the requests; beyond
    /// that, the client sends about K times what the service accepts, and the rejections cost
    /// nothing on the network. The rejected attempts count as requests, so a client that sheds
    /// everything keeps letting a trickle through, which tells it when the service recovers.
    ///
    /// Defaults: K = 2 and padding 1 (the book's), a window of two minutes (the book's; gRPC-Go's
    /// adaptive throttler, `balancer/rls/internal/adaptive`, uses 30 s with a padding of 8) cut
    /// into 16 bins, so that the window slides by an eighth of a minute. The windowing follows
    /// gRPC-Go's `lookback.go` (commit `6a8408765457`): bins indexed by time, a record older than
    /// the window is not counted, a clock read late counts in its own bin; here each bin is one
    /// atomic word, so that admitting and recording take no lock.
    ///
    /// ```
    /// use retry_overload::{AdaptiveThrottling, AdmissionGate};
    /// use std::time::Duration;
    ///
    /// static SRE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
    /// static GRPC_LIKE: AdmissionGate = AdmissionGate::adaptive_throttling(
    ///     AdaptiveThrottling::new().window(Duration::from_secs(30)).requests_padding(8.0),
    /// );
    /// ```
    pub struct AdaptiveThrottling {
        k: f64 = 2.0,
        window: Duration = Duration::from_secs(120),
        bins: u32 = 16,
        padding: f64 = 1.0,
    }
    /// K = 2, padding 1, a window of 120 s in 16 bins.
    new
}

impl AdaptiveThrottling {
    setters! {
        /// K, the multiplier of accepts: the client sends about K times what the service accepts
        /// before it sheds anything. Default 2; lower is more aggressive. Clamped to [1, 1000]
        /// (below 1 the client would shed requests that the service accepts); NaN is taken as 2.
        pub fn k(k: f64) => self.k = super::clamp_or(k, 1.0, 1000.0, 2.0);

        /// How much recent history counts: 120 s by default. At least one nanosecond per bin.
        pub fn window(window: Duration) => self.window;

        /// How many bins the window is cut into: 16 by default, clamped to [1, 32]. The window
        /// slides one bin at a time; each admission that has to compute the probability reads
        /// every bin.
        pub fn bins(bins: u32) => self.bins = super::clamp_u32(bins, 1, MAX_BINS as u32);

        /// Added to the requests in the denominator: 1 in the SRE book, 8 in gRPC-Go. A larger
        /// value sheds less when there are few requests. Negative or NaN is taken as 1.
        pub fn requests_padding(padding: f64) => self.padding =
            if padding >= 0.0 { padding } else { 1.0 };
    }

    /// K.
    pub const fn get_k(&self) -> f64 {
        self.k
    }

    /// The window.
    pub const fn get_window(&self) -> Duration {
        self.window
    }

    /// The number of bins.
    pub const fn get_bins(&self) -> u32 {
        self.bins
    }

    /// The padding of the denominator.
    pub const fn get_requests_padding(&self) -> f64 {
        self.padding
    }
}

/// The counts of a window, from [`Throttler::counts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) accepts: u64,
    pub(super) throttles: u64,
}

impl Counts {
    pub(super) fn requests(self) -> u64 {
        self.accepts + self.throttles
    }
}

/// The shared state of the mode.
#[derive(Debug)]
pub(super) struct Throttler {
    pub(super) config: AdaptiveThrottling,
    /// The width of a bin in nanoseconds, at least 1.
    width: u64,
    /// Divides by `width` without a division instruction.
    per_bin: Divider,
    /// Bin 0 starts here: the time of the first use.
    epoch: OnceInstant,
    /// The largest bin index seen: the head of the window.
    head: AtomicU64,
    /// The time (in nanoseconds from the epoch) at which the newest bin that counted a throttle
    /// leaves the window; 0 when no throttle is in it. While it is 0, or once that time has
    /// passed, the probability is 0 without reading the bins (nor, while it is 0, the time):
    /// the happy path.
    quiet_from: AtomicU64,
    slots: [AtomicU64; MAX_BINS],
}

loom_const_fn! {
    impl Throttler {
        pub(super) fn new(config: AdaptiveThrottling) -> Self {
            let width = config.window.as_nanos() / config.bins as u128;
            let width = if width == 0 {
                1
            } else if width > u64::MAX as u128 {
                u64::MAX
            } else {
                width as u64
            };
            Self {
                config,
                width,
                per_bin: Divider::new(width),
                epoch: OnceInstant::new(),
                head: AtomicU64::new(0),
                quiet_from: AtomicU64::new(0),
                slots: new_slots(),
            }
        }
    }
}

#[cfg(not(all(test, loom)))]
const fn new_slots() -> [AtomicU64; MAX_BINS] {
    [const { AtomicU64::new(0) }; MAX_BINS]
}

#[cfg(all(test, loom))]
fn new_slots() -> [AtomicU64; MAX_BINS] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

impl Throttler {
    /// Admits or rejects an attempt at the time `clock` says, read only on the gate's first use
    /// or while a throttle is in the window; `random` is called only when the probability is
    /// above 0. A rejection counts as a throttled request.
    pub(super) fn admit(
        &self,
        clock: impl FnOnce() -> Instant,
        random: impl FnOnce() -> f64,
    ) -> Result<(), RejectReason> {
        let quiet_from = self.quiet_from.load(Ordering::Relaxed);
        if quiet_from == 0 {
            // The first use still fixes time 0, so that a report timed before it is not
            // counted as if it were at time 0; later admissions need no time.
            if self.epoch.get().is_none() {
                self.epoch.get_or_init(clock());
            }
            return Ok(());
        }
        let elapsed = self.elapsed(clock());
        if elapsed >= quiet_from {
            // The last throttle has left the window: back to the happy path, unless another
            // throttle came in meanwhile.
            let _ = self.quiet_from.compare_exchange(
                quiet_from,
                0,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return Ok(());
        }
        let index = self.per_bin.divide(elapsed);
        let probability = self.probability(self.sum(self.advance(index)));
        if probability <= 0.0 {
            return Ok(());
        }
        // Rejected only when the draw is below the probability: NaN admits.
        if random() < probability {
            self.add(index, false);
            return Err(RejectReason::Throttled { probability });
        }
        Ok(())
    }

    /// Counts an answer at `now`: accepted by the service, or not.
    pub(super) fn record(&self, accepted: bool, now: Instant) {
        let index = self.per_bin.divide(self.elapsed(now));
        self.advance(index);
        self.add(index, accepted);
    }

    /// The counts of the window at `now` (or at the head, if that is later).
    pub(super) fn counts(&self, now: Instant) -> Counts {
        let head = self.advance(self.per_bin.divide(self.elapsed(now)));
        self.sum(head)
    }

    /// The probability of a local rejection for these counts.
    pub(super) fn probability(&self, counts: Counts) -> f64 {
        let requests = counts.requests() as f64;
        let probability =
            (requests - self.config.k * counts.accepts as f64) / (requests + self.config.padding);
        if probability > 0.0 { probability } else { 0.0 }
    }

    fn bins(&self) -> u32 {
        self.config.bins
    }

    /// Nanoseconds from the epoch (the first use) to `now`; 0 before it.
    fn elapsed(&self, now: Instant) -> u64 {
        let epoch = self.epoch.get_or_init(now);
        // Below 2^63 nanoseconds (292 years), as `Divider` needs.
        let elapsed = now.saturating_duration_since(epoch).as_nanos();
        u64::try_from(elapsed).map_or(Divider::MAX_DIVIDEND, |elapsed| {
            elapsed.min(Divider::MAX_DIVIDEND)
        })
    }

    /// Moves the head to `index` if that is later; returns the head.
    fn advance(&self, index: u64) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        if index <= head {
            return head;
        }
        self.head.fetch_max(index, Ordering::Relaxed).max(index)
    }

    /// The counts of the `bins` bins up to `head`: those whose stamp says they hold that index.
    fn sum(&self, head: u64) -> Counts {
        let mut counts = Counts {
            accepts: 0,
            throttles: 0,
        };
        for index in head.saturating_sub(u64::from(self.bins()) - 1)..=head {
            let word = self.slots[(index & SLOT_MASK) as usize].load(Ordering::Relaxed);
            if stamp(word) == index & STAMP_MASK {
                counts.accepts += word & COUNT_MAX;
                counts.throttles += (word >> COUNT_BITS) & COUNT_MAX;
            }
        }
        counts
    }

    /// Adds one accepted or throttled request to the bin `index`. A bin that has left the
    /// window (its slot holds a later bin) is not counted; one whose slot holds an earlier bin
    /// takes the slot over, since that earlier bin has left the window in any case.
    fn add(&self, index: u64, accepted: bool) {
        let slot = &self.slots[(index & SLOT_MASK) as usize];
        let mine = index & STAMP_MASK;
        let one = if accepted { 1 } else { 1 << COUNT_BITS };
        let updated = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
            let theirs = stamp(word);
            if theirs == mine {
                Some(increment(word, accepted))
            } else if newer(theirs, mine) {
                None
            } else {
                Some((mine << (2 * COUNT_BITS)) | one)
            }
        });
        if updated.is_ok() && !accepted {
            // This bin is in the window until bin `index + bins` starts.
            let leaves = index
                .saturating_add(u64::from(self.bins()))
                .saturating_mul(self.width);
            self.quiet_from.fetch_max(leaves, Ordering::Relaxed);
        }
    }
}

/// Division by a constant as a multiplication and a shift (Granlund and Montgomery, "Division
/// by Invariant Integers using Multiplication", PLDI 1994, theorem 4.2): with `ℓ = ⌈log2 d⌉` and
/// `m = ⌈2^(63+ℓ) / d⌉`, `⌊n / d⌋ = ⌊n·m / 2^(63+ℓ)⌋` for every `n < 2^63`, and `m` fits 64
/// bits. A 64-bit division takes tens of cycles; this, a few.
#[derive(Clone, Copy, Debug)]
pub(super) struct Divider {
    multiplier: u64,
    shift: u32,
}

impl Divider {
    /// The largest dividend: 2^63 − 1.
    pub(super) const MAX_DIVIDEND: u64 = (1 << 63) - 1;

    /// A divider by `d`; 0 is taken as 1.
    pub(super) const fn new(d: u64) -> Self {
        let d = if d == 0 { 1 } else { d };
        let log = if d == 1 {
            0
        } else {
            64 - (d - 1).leading_zeros()
        };
        let shift = 63 + log;
        let power = 1u128 << shift;
        let d = d as u128;
        let multiplier = power / d + if power % d == 0 { 0 } else { 1 };
        Self {
            multiplier: multiplier as u64,
            shift,
        }
    }

    /// `⌊n / d⌋`, for `n` up to `MAX_DIVIDEND`.
    pub(super) fn divide(self, n: u64) -> u64 {
        ((u128::from(n) * u128::from(self.multiplier)) >> self.shift) as u64
    }
}

fn stamp(word: u64) -> u64 {
    word >> (2 * COUNT_BITS)
}

/// Whether stamp `a` is a later bin than stamp `b` (modulo 2^24, within half of it).
fn newer(a: u64, b: u64) -> bool {
    let ahead = a.wrapping_sub(b) & STAMP_MASK;
    ahead != 0 && ahead < (1 << (STAMP_BITS - 1))
}

/// One more accepted or throttled request in a bin's word. A count that would overflow its 20
/// bits halves both counts first, which keeps their ratio, and with it the probability.
pub(super) fn increment(word: u64, accepted: bool) -> u64 {
    let (one, count) = if accepted {
        (1, word & COUNT_MAX)
    } else {
        (1 << COUNT_BITS, (word >> COUNT_BITS) & COUNT_MAX)
    };
    if count < COUNT_MAX {
        return word + one;
    }
    // This count is full: halve both, then count.
    let stamp = word & !((1 << (2 * COUNT_BITS)) - 1);
    let accepts = (word & COUNT_MAX) / 2 + u64::from(accepted);
    let throttles = ((word >> COUNT_BITS) & COUNT_MAX) / 2 + u64::from(!accepted);
    stamp | (throttles << COUNT_BITS) | accepts
}
