//! The golden values of the references, checked against the internals (the tables through the
//! public API are in `tests/it/aws2026.rs` and `tests/it/admission_gate.rs`), and the loom models.

/// `assert!((a − b).abs() <= 1e-9)`, with both values in the message.
#[cfg(not(loom))]
macro_rules! assert_close {
    ($actual:expr, $expected:expr) => {
        assert_close!($actual, $expected, "")
    };
    ($actual:expr, $expected:expr, $($what:tt)+) => {{
        let (actual, expected): (f64, f64) = ($actual, $expected);
        assert!(
            (actual - expected).abs() <= 1e-9,
            "{actual} != {expected} {}",
            format_args!($($what)+)
        );
    }};
}

/// The CUBIC calculator, token bucket, rate clocker and limiter of botocore and the SDKs' shared
/// tables, on the state itself.
#[cfg(not(loom))]
mod cubic {
    use super::super::rate::{ClientRateLimit, Cubic};

    const CONFIG: ClientRateLimit = ClientRateLimit::new();

    /// botocore `test_throttling.py`'s calculator: `W_max` = `starting_max_rate`, started at
    /// time 0.
    fn calculator(starting_max_rate: f64, config: &ClientRateLimit) -> Cubic {
        Cubic {
            w_max: starting_max_rate,
            k: Cubic::zero_point(starting_max_rate, config),
            last_fail: 0.0,
            ..Cubic::START
        }
    }

    #[test]
    fn botocore_starting_params() {
        assert_close!(calculator(10.0, &CONFIG).k, 1.9574338205844317);
    }

    #[test]
    fn botocore_success_responses_until_max_hit() {
        let cubic = calculator(10.0, &CONFIG);
        let k = cubic.k;
        for t in [k / 3.0, k / 2.0, k / 1.1] {
            assert!(cubic.cubic_success(t, &CONFIG) <= 10.0, "t = {t}");
        }
        assert_close!(cubic.cubic_success(k, &CONFIG), 10.0);
        for t in [k * 1.1, k * 2.0] {
            assert!(cubic.cubic_success(t, &CONFIG) >= 10.0, "t = {t}");
        }
    }

    #[test]
    fn botocore_error_response_decreases_rate_by_beta() {
        let mut cubic = calculator(10.0, &CONFIG);
        assert_close!(cubic.cubic_error(8.0, 1.0, &CONFIG), 8.0 * 0.7);
        assert_eq!((cubic.w_max, cubic.last_fail), (8.0, 1.0));
        assert_close!(cubic.k, 1.8171205928321397);
    }

    #[test]
    fn botocore_t_0_should_match_beta_decrease() {
        let config = ClientRateLimit::new().beta(0.6);
        let mut cubic = calculator(10.0, &config);
        assert_eq!(cubic.cubic_error(10.0, 1.0, &config), 6.0);
        assert_close!(cubic.cubic_success(1.0, &config), 6.0);
    }

    /// aws-sdk-go-v2 `TestAdaptiveRateLimit_cubic` (and smithy-rs'
    /// `test_calculated_rate_with_successes` / `_with_throttles`), with their harness: `W_max`
    /// 10, last throttle at 5 s; a throttle multiplies the last calculated rate by β and makes
    /// the result `W_max` (the harness's own rule: the limiter keeps the rate before the cut,
    /// which `go_update_table` checks).
    fn cubic_table(attempts: &[(bool, f64, f64)]) {
        let mut cubic = Cubic {
            w_max: 10.0,
            k: Cubic::zero_point(10.0, &CONFIG),
            last_fail: 5.0,
            ..Cubic::START
        };
        let mut rate = 0.0;
        for &(throttled, t, expected) in attempts {
            rate = if throttled {
                let cut = cubic.cubic_error(rate, t, &CONFIG);
                assert_eq!(cut, rate * CONFIG.beta);
                cubic.w_max = cut;
                cubic.k = Cubic::zero_point(cut, &CONFIG);
                cut
            } else {
                cubic.cubic_success(t, &CONFIG)
            };
            assert_close!(rate, expected, "at t = {t}");
        }
    }

    #[test]
    fn go_cubic_success_table() {
        cubic_table(&[
            (false, 5.0, 7.0),
            (false, 6.0, 9.64893600966),
            (false, 7.0, 10.000030849917364),
            (false, 8.0, 10.453284520772092),
            (false, 9.0, 13.408697022224185),
            (false, 10.0, 21.26626835427364),
            (false, 11.0, 36.425998516920465),
        ]);
    }

    #[test]
    fn go_cubic_mixed_table() {
        cubic_table(&[
            (false, 5.0, 7.0),
            (false, 6.0, 9.64893600966),
            (true, 7.0, 6.754255206761999),
            (true, 8.0, 4.727978644733399),
            (false, 9.0, 4.670125557970046),
            (false, 10.0, 4.770870456867401),
            (false, 11.0, 6.011819748005445),
            (false, 12.0, 10.792973431384178),
        ]);
    }

    /// aws-sdk-go-v2 `TestAdaptiveRateLimit_Update` "base" (smithy-rs `test_client_sending_rates`):
    /// an answer every 200 ms from time 0, throttled at 2.0 s and 3.2 s; the measured rate and
    /// the fill rate after each.
    pub(crate) const SENDING_RATES: [(bool, f64, f64, f64); 17] = [
        (false, 0.2, 0.0, 0.5),
        (false, 0.4, 0.0, 0.5),
        (false, 0.6, 4.8, 0.5),
        (false, 0.8, 4.8, 0.5),
        (false, 1.0, 4.16, 0.5),
        (false, 1.2, 4.16, 0.6912),
        (false, 1.4, 4.16, 1.0976),
        (false, 1.6, 5.632, 1.6384),
        (false, 1.8, 5.632, 2.3328),
        (true, 2.0, 4.3264, 3.02848),
        (false, 2.2, 4.3264, 3.4866391734702598),
        (false, 2.4, 4.3264, 3.8218744160402554),
        (false, 2.6, 5.665280, 4.053385727709987),
        (false, 2.8, 5.665280, 4.200373108479455),
        (false, 3.0, 4.333056, 4.282036558348658),
        (true, 3.2, 4.333056, 2.99742559084406),
        (false, 3.4, 4.333056, 3.4522263943863463),
    ];

    #[test]
    fn go_update_table() {
        let mut cubic = Cubic::START;
        for (throttled, t, measured, fill) in SENDING_RATES {
            cubic.update(t, throttled, &CONFIG);
            assert_close!(cubic.measured_rate, measured, "measured at t = {t}");
            assert_close!(cubic.fill_rate, fill, "fill rate at t = {t}");
        }
        assert!(cubic.enabled);
    }

    #[test]
    fn botocore_limiter_enables_on_a_throttle_only() {
        let mut cubic = Cubic::START;
        cubic.update(0.1, false, &CONFIG);
        assert!(!cubic.enabled);
        cubic.update(0.2, true, &CONFIG);
        assert!(cubic.enabled);
    }

    #[test]
    fn botocore_max_rate_cant_exceed_twice_the_measured_rate() {
        // A measured rate of 20 per second, and a CUBIC curve far above it.
        let mut cubic = Cubic {
            measured_rate: 20.0,
            last_bucket: 1.0,
            w_max: 100.0,
            k: 0.0,
            last_fail: 1.0,
            ..Cubic::START
        };
        cubic.update(1.2, false, &CONFIG); // the same half second: the measured rate stays
        assert_eq!(cubic.fill_rate, 2.0 * 20.0);
        assert_eq!(cubic.max_capacity, 40.0);
    }

    /// botocore `test_adaptive.py` `TestRateClocker`, started at time 0.
    #[test]
    fn botocore_rate_clocker() {
        let record = |times: &[f64]| {
            let mut cubic = Cubic::START;
            times
                .iter()
                .map(|&t| cubic.record_rate(t, &CONFIG))
                .last()
                .unwrap_or(0.0)
        };
        assert_eq!(Cubic::START.measured_rate, 0.0); // initial rate is 0
        assert_eq!(record(&[1.0]), 0.8); // 1 × 0.8 + 0 × 0.2
        let one_per_second: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_close!(record(&one_per_second), 1.0, "constant rate");
        let two_per_second = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0];
        let rate = record(&two_per_second);
        assert!((1.99..=2.0).contains(&rate), "{rate}");
        let rate = record(&[1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 14.0]);
        assert!((0.1..=2.0).contains(&rate), "{rate}"); // smoothing favours recent weights
        assert!(record(&[1.0, 1.0, 1.0, 2.0, 3.0]) >= 1.0); // no-op when Δt is 0
        // Grouped per half-second bucket: the current bucket's count is not used yet...
        assert_eq!(record(&[0.1, 0.2, 0.3, 0.4, 0.49]), 0.0);
        // ...until the next bucket starts: 6 answers over half a second, 12 per second.
        assert_eq!(record(&[0.1, 0.2, 0.3, 0.4, 0.49, 0.5]), 12.0 * 0.8);
    }

    /// botocore `test_bucket.py`, on a bucket created at time 0 (`min_rate` 0.1 as there).
    mod bucket {
        use super::*;

        fn bucket(max_rate: f64, min_rate: f64) -> (Cubic, ClientRateLimit) {
            let config = ClientRateLimit::new().min_fill_rate(min_rate);
            let mut bucket = Cubic::START;
            bucket.set_max_rate(0.0, max_rate, &config);
            (bucket, config)
        }

        fn acquire(bucket: &mut Cubic, t: f64) -> bool {
            bucket.acquire(t, true).is_ok()
        }

        #[test]
        fn can_acquire_amount() {
            let (mut b, _) = bucket(10.0, 0.1);
            assert!((1..=5).all(|t| acquire(&mut b, f64::from(t))));
        }

        #[test]
        fn can_change_max_capacity_lower() {
            let (mut b, config) = bucket(10.0, 0.1);
            assert!((1..=5).all(|t| acquire(&mut b, f64::from(t))));
            b.set_max_rate(5.0, 1.0, &config);
            assert!((6..=10).all(|t| acquire(&mut b, f64::from(t))));
        }

        #[test]
        fn max_capacity_is_at_least_one() {
            let (mut b, config) = bucket(10.0, 0.1);
            b.set_max_rate(1.0, 0.5, &config);
            assert_eq!((b.fill_rate, b.max_capacity), (0.5, 1.0));
        }

        #[test]
        fn acquire_fails_in_non_block_mode() {
            let (mut b, _) = bucket(10.0, 0.1);
            assert!(!acquire(&mut b, 0.0)); // the bucket starts empty
            // botocore asks for 100 tokens at 1 s; one at a time: 10 are there, not 11.
            assert!((0..10).all(|_| acquire(&mut b, 1.0)));
            assert_eq!(b.acquire(1.0, true), Err(0.1));
        }

        #[test]
        fn can_retrieve_at_max_send_rate() {
            let (mut b, _) = bucket(10.0, 0.1);
            assert!((0..20).all(|i| acquire(&mut b, 1.0 + 0.1 * f64::from(i))));
        }

        #[test]
        fn acquiring_waits_when_capacity_reached() {
            let (mut b, _) = bucket(10.0, 0.1);
            assert!(acquire(&mut b, 0.1));
            assert_close!(b.capacity, 0.0);
            // At 0.15 s half a token is there: the next is due 0.05 s later, at 0.2 s.
            let wait = b.acquire(0.15, false).expect("waits");
            assert_close!(wait, 0.05);
            // botocore sleeps and takes it at 0.2 s: here the token is reserved, and the
            // bucket is empty at 0.2 s.
            b.refill(0.2);
            assert_close!(b.capacity, 0.0);
            assert!(acquire(&mut b, 0.300001));
        }

        #[test]
        fn rate_cant_go_below_min() {
            let (mut b, config) = bucket(1.0, 0.2);
            b.set_max_rate(1.0, 0.1, &config);
            assert_eq!((b.fill_rate, b.max_capacity), (0.2, 1.0));
        }
    }
}

/// The windowing of adaptive throttling and the arithmetic of the concurrency limits.
#[cfg(not(loom))]
mod arithmetic {
    use super::super::concurrency::{Aimd, Gradient2, Gradient2State};
    use super::super::throttling::Divider;
    use proptest::prelude::*;

    const MAX: u64 = Divider::MAX_DIVIDEND;

    #[test]
    fn the_divider_is_exact_at_the_edges() {
        let divisors = [
            1,
            2,
            3,
            7,
            10,
            1000,
            7_500_000_000,
            (1 << 32) + 1,
            MAX,
            MAX - 1,
            1 << 62,
        ];
        for d in divisors {
            let divider = Divider::new(d);
            for n in [0, 1, d - 1, d, d + 1, 2 * d - 1, MAX / d * d, MAX - 1, MAX] {
                let n = n.min(MAX);
                assert_eq!(divider.divide(n), n / d, "{n} / {d}");
            }
        }
        assert_eq!(Divider::new(0).divide(42), 42);
    }

    #[test]
    fn a_full_bin_halves_both_counts() {
        use super::super::throttling::increment;
        let full_accepts = (5 << 40) | (6 << 20) | ((1 << 20) - 1);
        assert_eq!(
            increment(full_accepts, true),
            (5 << 40) | (3 << 20) | (1 << 19)
        );
        assert_eq!(
            increment(full_accepts, false),
            (5 << 40) | (7 << 20) | ((1 << 20) - 1)
        );
        let full_throttles = (5 << 40) | (((1 << 20) - 1) << 20) | 9;
        assert_eq!(
            increment(full_throttles, false),
            (5 << 40) | ((1 << 19) << 20) | 4
        );
    }

    proptest! {
        #[test]
        fn the_divider_divides(d in 1..=MAX, n in 0..=MAX) {
            prop_assert_eq!(Divider::new(d).divide(n), n / d);
        }

        #[test]
        fn the_divider_divides_by_small_widths(d in 1u64..100_000, n in 0..=MAX) {
            prop_assert_eq!(Divider::new(d).divide(n), n / d);
        }
    }

    #[test]
    fn aimd_follows_netflix() {
        let aimd = Aimd::new().min_limit(1).max_limit(30);
        assert_eq!(aimd.next(20, 10, false), 21); // half the limit in flight: grow
        assert_eq!(aimd.next(20, 9, false), 20); // app-limited: keep
        assert_eq!(aimd.next(20, 20, true), 18); // ⌊20 × 0.9⌋
        assert_eq!(aimd.next(5, 5, true), 4); // ⌊4.5⌋
        assert_eq!(aimd.next(1, 1, true), 1); // the minimum
        assert_eq!(aimd.next(30, 30, false), 30); // the maximum
        // Netflix's defaults keep the limit in [20, 200].
        assert_eq!(Aimd::new().next(20, 20, true), 20);
    }

    #[test]
    fn gradient2_follows_netflix() {
        let config = Gradient2::new();
        let mut state = Gradient2State::new(20);
        // Ten samples of 10 ms at full use: long = short, gradient = min(1, 1.5) = 1, so each
        // step is 0.8·L + 0.2·(L + 4) = L + 0.8.
        for step in 1..=10 {
            let limit = state.update(10e6, 20, &config);
            assert!(
                (limit - (20.0 + 0.8 * f64::from(step))).abs() < 1e-9,
                "{limit}"
            );
        }
        // Latency triples; past the warm-up, the long average moves by 2/601 of the difference.
        let long = 10e6 * (1.0 - 2.0 / 601.0) + 30e6 * (2.0 / 601.0);
        let gradient = f64::max(1.5 * long / 30e6, 0.5);
        let before = state.estimate;
        let expected = before * 0.8 + (before * gradient + 4.0) * 0.2;
        assert!((state.update(30e6, 28, &config) - expected).abs() < 1e-9);
        // App-limited (in flight below half the limit): unchanged.
        let before = state.estimate;
        assert_eq!(state.update(30e6, 1, &config), before);
        // Latency back to a third of the long average: the average decays by 5 %.
        let long_before = state.long_rtt;
        state.update(1e6, 1, &config);
        let long = long_before * (1.0 - 2.0 / 601.0) + 1e6 * (2.0 / 601.0);
        assert!((state.long_rtt - long * 0.95).abs() < 1e-3);
    }

    #[test]
    fn gradient2_with_a_zero_rtt_keeps_a_gradient_of_one() {
        let config = Gradient2::new();
        let mut state = Gradient2State::new(20);
        assert!((state.update(0.0, 20, &config) - 20.8).abs() < 1e-9);
    }
}

/// Model checks with loom: every interleaving of two or three threads (see `crate::sync`).
/// `RUSTFLAGS="--cfg loom" cargo test -p retry-overload --release --lib loom`.
#[cfg(loom)]
mod loom {
    use crate::sync::on_threads;
    use crate::{
        AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, FailureKind, GateOutcome,
        GateState, RetryQuota,
    };
    use ::loom::model;
    use ::loom::sync::Arc;
    use std::time::{Duration, Instant};

    /// An AIMD gate that starts at `limit` and may shrink to 1.
    fn aimd(limit: u32) -> Arc<AdmissionGate> {
        Arc::new(AdmissionGate::aimd(
            Aimd::new().initial_limit(limit).min_limit(1),
        ))
    }

    /// An attempt at `now` that a gate never sheds (its random draw is 1), answered `outcome`.
    fn answer(gate: &AdmissionGate, now: Instant, outcome: GateOutcome) {
        gate.admit_with(now, || 1.0)
            .expect("never shed")
            .record(outcome, now);
    }

    /// A concurrency gate's state.
    fn concurrency(limit: u32, in_flight: u32) -> GateState {
        GateState::Concurrency { limit, in_flight }
    }

    /// An adaptive-throttling gate's state.
    fn throttling(requests: u64, accepts: u64, rejection_probability: f64) -> GateState {
        GateState::AdaptiveThrottling {
            requests,
            accepts,
            rejection_probability,
        }
    }

    #[test]
    fn loom_a_slot_given_back_is_taken_again_and_never_twice() {
        model(|| {
            let gate = aimd(1);
            let t0 = Instant::now();
            // Each caller takes the one slot if it can (alone: in flight is 1 while it holds
            // it), and ends without a report.
            let admitted = on_threads(&gate, 2, move |gate, _| {
                gate.admit(t0)
                    .map(|permit| {
                        assert_eq!(gate.state(t0), concurrency(1, 1));
                        drop(permit);
                    })
                    .is_ok()
            });
            assert!(admitted.contains(&true), "{admitted:?}");
            assert_eq!(gate.state(t0), concurrency(1, 0));
        });
    }

    #[test]
    fn loom_held_slots_are_exact() {
        model(|| {
            let gate = aimd(2);
            let t0 = Instant::now();
            // Each caller keeps its slot (the permit is forgotten, never ended).
            let admitted = on_threads(&gate, 3, move |gate, _| {
                gate.admit(t0).map(std::mem::forget).is_ok()
            });
            assert_eq!(admitted.iter().filter(|&&a| a).count(), 2, "{admitted:?}");
            assert_eq!(gate.state(t0), concurrency(2, 2));
        });
    }

    #[test]
    fn loom_concurrent_drops_shrink_the_limit_twice() {
        model(|| {
            let gate = aimd(20);
            let t0 = Instant::now();
            on_threads(&gate, 2, move |gate, _| {
                let permit = gate.admit(t0).expect("below the limit");
                permit.record(GateOutcome::Throttled, t0);
            });
            // 20 → 18 → 16 in either order, both slots back.
            assert_eq!(gate.state(t0), concurrency(16, 0));
        });
    }

    #[test]
    fn loom_throttling_counts_are_exact_in_a_bin_and_across_a_bin_change() {
        // A throttle and an accept, answered at once. In one bin both count. Across a bin
        // change (two bins of 1 s: bin 0 and bin 32 share a slot of the ring), whatever the
        // order, at 32 s the window holds bins 31 and 32: the throttle only.
        let two_bins = AdaptiveThrottling::new()
            .bins(2)
            .window(Duration::from_secs(2));
        for (config, throttled_at, then) in [
            (AdaptiveThrottling::new(), 0, throttling(2, 1, 0.0)),
            (two_bins, 32, throttling(1, 0, 0.5)),
        ] {
            model(move || {
                let gate = Arc::new(AdmissionGate::adaptive_throttling(config));
                let t0 = Instant::now();
                let _ = gate.state(t0); // time 0 is t0
                let t = t0 + Duration::from_secs(throttled_at);
                on_threads(&gate, 2, move |gate, i| match i {
                    0 => answer(gate, t, GateOutcome::Throttled),
                    _ => answer(gate, t0, GateOutcome::Accepted),
                });
                assert_eq!(gate.state(t), then);
            });
        }
    }

    #[test]
    fn loom_the_quota_never_pays_more_than_it_holds() {
        model(|| {
            let quota = Arc::new(RetryQuota::new().tokens(30));
            let taken = on_threads(&quota, 3, |quota, _| {
                quota.acquire(FailureKind::TransientError)
            });
            assert_eq!(taken.iter().flatten().count(), 2, "{taken:?}");
            assert_eq!(quota.available(), 2);
        });
    }

    #[test]
    fn loom_two_answers_in_a_new_bucket_turn_it_once() {
        use super::super::rate::RateLimiter;
        model(|| {
            let limiter = Arc::new(RateLimiter::new(ClientRateLimit::new()));
            let t0 = Instant::now();
            let _ = limiter.snapshot(t0); // time 0
            let t1 = t0 + Duration::from_secs(1);
            on_threads(&limiter, 2, move |limiter, _| limiter.record(false, t1));
            // As botocore in either order: the first answer ends bucket 0 (1 answer in 1 s,
            // smoothed: 0.8), the second counts in bucket 1.0.
            let state = limiter.snapshot(t1);
            assert_eq!(
                (state.measured_rate, state.last_bucket, state.count),
                (0.8, 1.0, 1.0)
            );
        });
    }

    #[test]
    fn loom_an_answer_racing_the_first_throttle_is_counted_once() {
        use super::super::rate::RateLimiter;
        model(|| {
            let limiter = Arc::new(RateLimiter::new(ClientRateLimit::new()));
            let t0 = Instant::now();
            let _ = limiter.snapshot(t0);
            let t = t0 + Duration::from_millis(200);
            on_threads(&limiter, 2, move |limiter, i| limiter.record(i == 0, t));
            let state = limiter.snapshot(t);
            assert!(state.enabled);
            assert_eq!((state.last_bucket, state.count), (0.0, 2.0));
        });
    }

    #[test]
    fn loom_waiting_callers_reserve_successive_tokens() {
        model(|| {
            let gate = Arc::new(AdmissionGate::rate_limit(ClientRateLimit::new()));
            let t0 = Instant::now();
            // One throttled answer at t0 turns the bucket on at the minimum rate, 0.5/s.
            gate.admit(t0)
                .expect("off")
                .record(GateOutcome::Throttled, t0);
            let waits = on_threads(&gate, 2, move |gate, _| {
                let permit = gate.admit(t0).expect("waiting mode");
                let wait = permit.wait();
                std::mem::forget(permit);
                wait
            });
            let mut waits = waits;
            waits.sort();
            assert_eq!(waits, [Duration::from_secs(2), Duration::from_secs(4)]);
        });
    }
}

/// A rough measurement of the happy path, not a test:
///
/// ```text
/// cargo test -p retry-overload --release --lib tests::timing -- --ignored --nocapture
/// ```
///
/// prints nanoseconds per `admit` + `record(Accepted)` for each mode on one thread, against an
/// empty loop of the same shape. As `bench/benches/steady.rs` does, every round times one block
/// of 10,000 calls of each mode in turn, and each mode keeps its fastest block over 400 rounds:
/// load on a shared machine slows blocks down but never speeds one up.
/// `OVERLOAD_TIMING_ROUNDS=10 valgrind --tool=callgrind --toggle-collect='*timing::one_*'` on
/// the same test binary counts the instructions of each mode's `one_*` function.
#[cfg(not(loom))]
mod timing {
    use crate::{
        AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, FailureKind, GateOutcome,
        Gradient2, RetryQuota,
    };
    use std::hint::black_box;
    use std::time::{Duration, Instant};

    const BLOCK: u32 = 10_000;

    static THROTTLING: AdmissionGate =
        AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
    static RATE: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
    static AIMD: AdmissionGate = AdmissionGate::aimd(Aimd::new());
    static GRADIENT2: AdmissionGate = AdmissionGate::gradient2(Gradient2::new());
    static QUOTA: RetryQuota = RetryQuota::new();

    fn call(gate: &AdmissionGate, now: Instant) {
        match gate.admit(now) {
            Ok(permit) => permit.record(GateOutcome::Accepted, now),
            Err(rejected) => panic!("{rejected}"),
        }
    }

    #[inline(never)]
    fn one_empty(now: Instant) {
        black_box(now);
    }

    /// A `one_*` function for each gate: one `call` of it.
    macro_rules! one_call {
        ($($name:ident: $gate:ident),*) => {$(
            #[inline(never)]
            fn $name(now: Instant) {
                call(&$gate, now);
            }
        )*};
    }

    one_call!(
        one_throttling: THROTTLING,
        one_rate_limit: RATE,
        one_aimd: AIMD,
        one_gradient2: GRADIENT2
    );

    #[inline(never)]
    fn one_quota(_: Instant) {
        let cost = QUOTA.acquire(FailureKind::TransientError);
        QUOTA.refund(cost);
    }

    /// A mode's name and its `one_*` function.
    type Mode = (&'static str, fn(Instant));

    #[test]
    #[ignore = "a measurement: run in release with --ignored --nocapture"]
    fn happy_path_per_call() {
        let rounds: u32 = std::env::var("OVERLOAD_TIMING_ROUNDS")
            .ok()
            .and_then(|rounds| rounds.parse().ok())
            .unwrap_or(400);
        let modes: [Mode; 6] = [
            ("empty loop", one_empty),
            ("adaptive throttling", one_throttling),
            ("rate limit (before a throttle)", one_rate_limit),
            ("aimd", one_aimd),
            ("gradient2", one_gradient2),
            ("retry quota (acquire + refund)", one_quota),
        ];
        let t0 = Instant::now();
        // Times a microsecond apart: the clock of a busy caller.
        let nows: Vec<Instant> = (0..1024).map(|i| t0 + Duration::from_micros(i)).collect();
        let mut fastest = [Duration::MAX; 6];
        for _ in 0..rounds {
            for (fastest, (_, f)) in fastest.iter_mut().zip(modes) {
                let start = Instant::now();
                for i in 0..BLOCK {
                    f(black_box(nows[(i & 1023) as usize]));
                }
                *fastest = (*fastest).min(start.elapsed());
            }
        }
        let ns = fastest.map(|block| block.as_nanos() as f64 / f64::from(BLOCK));
        for ((name, _), per_call) in modes.iter().zip(ns) {
            let over = per_call - ns[0];
            println!("{name}: {per_call:.2} ns per call, {over:.2} over the empty loop");
        }
    }
}
