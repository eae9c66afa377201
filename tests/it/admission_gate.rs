//! `AdmissionGate`: each mode on an explicit virtual clock (instants built from one `t0`) or on
//! tokio's paused clock, with exact admissions; the references' tables (gRPC-Go's adaptive
//! throttler, the AWS SDKs' client rate limiter); cancellations that lose no capacity; threads.

use retry_runtime::{
    AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, GateMode, GateOutcome, GateState,
    Gradient2, RejectReason, Rejected, testing,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

/// Asks, and reports `outcome` at once.
fn answer(gate: &AdmissionGate, outcome: GateOutcome, now: Instant) {
    gate.admit_with(now, || 1.0)
        .expect("a draw of 1 is never shed")
        .record(outcome, now);
}

fn throttling_counts(gate: &AdmissionGate, now: Instant) -> (u64, u64, f64) {
    match gate.state(now) {
        GateState::AdaptiveThrottling {
            requests,
            accepts,
            rejection_probability,
        } => (requests, accepts, rejection_probability),
        other => panic!("not adaptive throttling: {other:?}"),
    }
}

fn concurrency(gate: &AdmissionGate, now: Instant) -> (u32, u32) {
    match gate.state(now) {
        GateState::Concurrency { limit, in_flight } => (limit, in_flight),
        other => panic!("not a concurrency limit: {other:?}"),
    }
}

fn rates(gate: &AdmissionGate, now: Instant) -> (bool, f64, f64, f64) {
    match gate.state(now) {
        GateState::RateLimit {
            enabled,
            fill_rate,
            measured_rate,
            tokens,
        } => (enabled, fill_rate, measured_rate, tokens),
        other => panic!("not a rate limit: {other:?}"),
    }
}

mod adaptive_throttling {
    use super::*;

    #[derive(Clone, Copy)]
    enum Response {
        None,
        Accepted,
        Throttled,
    }
    use Response::{Accepted as A, None as E, Throttled as T};

    /// gRPC-Go `balancer/rls/internal/adaptive/adaptive_test.go`, `TestRegisterBackendResponse`:
    /// `bins` bins of 1 ns each; after each tick's response, the window's accepts and throttles.
    #[test]
    fn grpc_register_backend_response_table() {
        /// Name, bins, ticks (ns), responses, then the accepts and throttles after each.
        type Case = (
            &'static str,
            u32,
            [u64; 3],
            [Response; 3],
            [u64; 3],
            [u64; 3],
        );
        let cases: [Case; 4] = [
            ("Accumulate", 3, [0, 1, 2], [A, T, E], [1, 1, 1], [0, 1, 1]),
            (
                "LightTimeTravel",
                3,
                [1, 0, 2],
                [A, T, E],
                [1, 1, 1],
                [0, 1, 1],
            ),
            (
                "HeavyTimeTravel",
                3,
                [8, 0, 9],
                [A, A, A],
                [1, 1, 2],
                [0, 0, 0],
            ),
            ("Rollover", 1, [0, 1, 2], [A, T, E], [1, 0, 0], [0, 1, 0]),
        ];
        for (name, bins, ticks, responses, accepts, throttles) in cases {
            let gate = AdmissionGate::adaptive_throttling(
                AdaptiveThrottling::new()
                    .bins(bins)
                    .window(Duration::from_nanos(u64::from(bins)))
                    .requests_padding(8.0),
            );
            // Time 0 of the bins is the gate's first use: the reference's is the Unix epoch.
            let t0 = Instant::now();
            let _ = gate.state(t0);
            for i in 0..3 {
                let now = t0 + Duration::from_nanos(ticks[i]);
                match responses[i] {
                    A => answer(&gate, GateOutcome::Accepted, now),
                    T => answer(&gate, GateOutcome::Throttled, now),
                    E => {}
                }
                let (requests, got_accepts, _) = throttling_counts(&gate, now);
                assert_eq!(
                    (got_accepts, requests - got_accepts),
                    (accepts[i], throttles[i]),
                    "{name}, index {i}"
                );
            }
        }
    }

    /// gRPC-Go `TestShouldThrottleOptions`: the responses below, each followed by a throttling
    /// decision with a random number of 0.5 (a local rejection counts as a throttle).
    #[test]
    fn grpc_should_throttle_options_table() {
        let responses = [T, T, T, T, T, T, T, T, T, A, A, A, A, A, A, T, T, T, T];
        let (n, y) = (false, true);
        let cases = [
            (
                "Baseline",
                1.1,
                8.0,
                [n, n, n, n, n, n, n, n, y, y, y, y, y, n, n, n, y, y, y],
            ),
            (
                "ChangePadding",
                1.1,
                7.0,
                [n, n, n, n, n, n, n, y, y, y, y, y, y, y, y, y, y, y, y],
            ),
            (
                "ChangeRatioForAccepts",
                1.4,
                8.0,
                [n, n, n, n, n, n, n, n, y, y, n, n, n, n, n, n, n, n, n],
            ),
        ];
        for (name, k, padding, want) in cases {
            let gate = AdmissionGate::adaptive_throttling(
                AdaptiveThrottling::new()
                    .k(k)
                    .requests_padding(padding)
                    .bins(1)
                    .window(Duration::from_nanos(1)),
            );
            let t0 = Instant::now();
            for (i, response) in responses.into_iter().enumerate() {
                match response {
                    A => answer(&gate, GateOutcome::Accepted, t0),
                    T => answer(&gate, GateOutcome::Throttled, t0),
                    E => {}
                }
                let shed = gate.admit_with(t0, || 0.5).is_err();
                assert_eq!(shed, want[i], "{name}, index {i}");
            }
        }
    }

    /// The SRE book's rule, step by step: `p = max(0, (R − K·A)/(R + 1))`, a draw below `p` is
    /// shed and counts as a request.
    fn model(mut requests: f64, accepts: f64, draws: &[f64]) -> Vec<bool> {
        draws
            .iter()
            .map(|&draw| {
                let p = ((requests - 2.0 * accepts) / (requests + 1.0)).max(0.0);
                let shed = draw < p;
                if shed {
                    requests += 1.0;
                }
                shed
            })
            .collect()
    }

    #[test]
    fn sheds_exactly_as_the_books_rule_with_given_draws() {
        static GATE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        let t0 = Instant::now();
        // The service accepted 10 requests and throttled 30: p = (40 − 20)/41.
        for _ in 0..10 {
            answer(&GATE, GateOutcome::Accepted, t0);
        }
        for _ in 0..30 {
            answer(&GATE, GateOutcome::Throttled, t0);
        }
        assert_eq!(throttling_counts(&GATE, t0), (40, 10, 20.0 / 41.0));
        // 1,000 attempts a millisecond apart (the same bin), with a low-discrepancy sequence
        // of draws; the admitted ones never report (their answers are still in flight).
        let draws: Vec<f64> = (0..1000)
            .map(|i| (f64::from(i) * 0.618_033_988_749_895) % 1.0)
            .collect();
        let shed: Vec<bool> = draws
            .iter()
            .enumerate()
            .map(|(i, &draw)| {
                let now = t0 + MS * i as u32;
                GATE.admit_with(now, || draw).is_err()
            })
            .collect();
        let expected = model(40.0, 10.0, &draws);
        assert_eq!(shed, expected);
        let shed_count = shed.iter().filter(|&&s| s).count() as u64;
        // 92 % shed, where the first draw faced 20/41: each rejection raises the probability.
        assert_eq!(shed_count, 919);
        assert_eq!(throttling_counts(&GATE, t0).0, 40 + shed_count);
    }

    #[test]
    fn nothing_is_shed_while_the_service_accepts_half() {
        let gate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        let t0 = Instant::now();
        for _ in 0..500 {
            answer(&gate, GateOutcome::Accepted, t0);
            answer(&gate, GateOutcome::Throttled, t0);
        }
        assert_eq!(throttling_counts(&gate, t0), (1000, 500, 0.0));
        assert!((0..1000).all(|_| gate.admit_with(t0, || 0.0).is_ok()));
    }

    #[test]
    fn the_window_slides_bin_by_bin() {
        // Defaults: 120 s in 16 bins of 7.5 s.
        let gate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        let t0 = Instant::now();
        for _ in 0..9 {
            answer(&gate, GateOutcome::Throttled, t0);
        }
        let t1 = t0 + Duration::from_millis(7_500); // the next bin
        answer(&gate, GateOutcome::Accepted, t1);
        assert_eq!(throttling_counts(&gate, t1), (10, 1, 8.0 / 11.0));
        // Bin 0 is in the window up to its 16th successor, bin 16, which starts at 120 s.
        let last = t0 + Duration::from_secs(120) - Duration::from_nanos(1);
        assert_eq!(throttling_counts(&gate, last).0, 10);
        assert!(gate.admit_with(last, || 0.7).is_err()); // 0.7 < 8/11, and now 11 requests
        let t120 = t0 + Duration::from_secs(120);
        assert_eq!(throttling_counts(&gate, t120), (2, 1, 0.0));
        // The accept (bin 1) leaves at 127.5 s; the local rejection at `last` (bin 15) counts
        // as a throttled request until bin 31 starts, at 232.5 s.
        let t127 = t0 + Duration::from_millis(127_500);
        assert_eq!(throttling_counts(&gate, t127), (1, 0, 0.5));
        let t232 = t0 + Duration::from_millis(232_500);
        assert_eq!(
            throttling_counts(&gate, t232 - Duration::from_nanos(1)),
            (1, 0, 0.5)
        );
        assert_eq!(throttling_counts(&gate, t232), (0, 0, 0.0));
        assert!(gate.admit_with(t232, || 0.0).is_ok());
    }

    #[test]
    fn a_report_older_than_the_window_is_ignored() {
        let gate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        let t0 = Instant::now();
        let late = gate.admit_with(t0, || 1.0).expect("empty window");
        answer(&gate, GateOutcome::Accepted, t0 + Duration::from_secs(200));
        // A report timed before the window: not counted.
        late.record(GateOutcome::Throttled, t0);
        assert_eq!(
            throttling_counts(&gate, t0 + Duration::from_secs(200)),
            (1, 1, 0.0)
        );
    }

    #[test]
    fn admit_draws_from_the_seeded_source_of_the_recording() {
        let shed_pattern = |seed| {
            testing::record_seeded(seed, || {
                let gate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
                let t0 = Instant::now();
                for _ in 0..100 {
                    answer(&gate, GateOutcome::Throttled, t0);
                }
                (0..64).map(|_| gate.admit(t0).is_err()).collect::<Vec<_>>()
            })
            .0
        };
        assert_eq!(shed_pattern(7), shed_pattern(7));
        assert_ne!(shed_pattern(7), shed_pattern(8));
        // p = 100/101 and rising: nearly all are shed.
        assert!(shed_pattern(7).iter().filter(|&&s| s).count() >= 60);
    }

    #[test]
    fn concurrent_reports_are_all_counted() {
        let gate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        let t0 = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for i in 0..1500 {
                        let outcome = if i % 3 == 0 {
                            GateOutcome::Throttled
                        } else {
                            GateOutcome::Accepted
                        };
                        answer(&gate, outcome, t0 + MS * (i / 100));
                    }
                });
            }
        });
        assert_eq!(throttling_counts(&gate, t0 + S), (12_000, 8000, 0.0));
    }
}

mod rate_limit {
    use super::*;

    /// aws-sdk-go-v2 `TestAdaptiveRateLimit_Update` "base" (smithy-rs `test_client_sending_rates`),
    /// through the gate: an attempt answered every 200 ms, throttled at 2.0 s and 3.2 s; the
    /// measured rate and the fill rate after each answer, to 1e-9.
    #[test]
    fn go_sending_rates_table_through_the_gate() {
        let table: [(bool, u64, f64, f64); 17] = [
            (false, 200, 0.0, 0.5),
            (false, 400, 0.0, 0.5),
            (false, 600, 4.8, 0.5),
            (false, 800, 4.8, 0.5),
            (false, 1000, 4.16, 0.5),
            (false, 1200, 4.16, 0.6912),
            (false, 1400, 4.16, 1.0976),
            (false, 1600, 5.632, 1.6384),
            (false, 1800, 5.632, 2.3328),
            (true, 2000, 4.3264, 3.02848),
            (false, 2200, 4.3264, 3.4866391734702598),
            (false, 2400, 4.3264, 3.8218744160402554),
            (false, 2600, 5.665280, 4.053385727709987),
            (false, 2800, 5.665280, 4.200373108479455),
            (false, 3000, 4.333056, 4.282036558348658),
            (true, 3200, 4.333056, 2.99742559084406),
            (false, 3400, 4.333056, 3.4522263943863463),
        ];
        static GATE: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
        let t0 = Instant::now();
        drop(GATE.admit(t0).expect("off")); // time 0 of the limiter
        for (throttled, ms, measured, fill) in table {
            let now = t0 + MS * ms as u32;
            let permit = GATE.admit(now).expect("waiting mode admits");
            let outcome = if throttled {
                GateOutcome::Throttled
            } else {
                GateOutcome::Accepted
            };
            permit.record(outcome, now);
            let (enabled, fill_rate, measured_rate, _) = rates(&GATE, now);
            assert!(
                (measured_rate - measured).abs() <= 1e-9,
                "{ms} ms: {measured_rate}"
            );
            assert!((fill_rate - fill).abs() <= 1e-9, "{ms} ms: {fill_rate}");
            assert_eq!(enabled, ms >= 2000, "{ms} ms");
        }
    }

    #[test]
    fn nothing_waits_before_the_first_throttle() {
        let gate = AdmissionGate::rate_limit(ClientRateLimit::new().fail_fast(true));
        let t0 = Instant::now();
        for i in 0..1000 {
            let permit = gate.admit(t0 + MS * i).expect("off until throttled");
            assert_eq!(permit.wait(), Duration::ZERO);
            permit.record(GateOutcome::Accepted, t0 + MS * i);
        }
        assert!(!rates(&gate, t0 + S).0);
    }

    /// A throttle as the very first answer: the measured rate is 0, so the fill rate is the
    /// minimum, 0.5 per second, and the bucket (of 1 token) is empty.
    fn throttled_at(gate: &AdmissionGate, t0: Instant) {
        gate.admit(t0)
            .expect("off")
            .record(GateOutcome::Throttled, t0);
        assert_eq!(rates(gate, t0), (true, 0.5, 0.0, 0.0));
    }

    #[test]
    fn fail_fast_rejects_with_the_wait_for_the_next_token() {
        let gate = AdmissionGate::rate_limit(ClientRateLimit::new().fail_fast(true)).name("s3");
        let t0 = Instant::now();
        throttled_at(&gate, t0);
        let rejected = gate.admit(t0).expect_err("no token");
        assert_eq!(rejected.reason(), RejectReason::RateLimited { wait: 2 * S });
        assert_eq!(rejected.retry_after(), Some(2 * S));
        assert_eq!(rejected.mode(), GateMode::RateLimit);
        assert_eq!(rejected.gate(), "s3");
        let half = gate.admit(t0 + S).expect_err("half a token");
        assert_eq!(half.retry_after(), Some(S));
        let permit = gate.admit(t0 + 2 * S).expect("one token");
        assert_eq!(permit.wait(), Duration::ZERO);
        assert!(gate.admit(t0 + 2 * S).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_callers_are_spaced_at_the_fill_rate() {
        static GATE: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
        let t0 = tokio::time::Instant::now();
        throttled_at(&GATE, t0.into_std());
        let callers: Vec<_> = (0..5)
            .map(|_| {
                let permit = GATE.admit(t0.into_std()).expect("waiting mode");
                tokio::spawn(async move {
                    tokio::time::sleep(permit.wait()).await;
                    let sent = tokio::time::Instant::now();
                    permit.record(GateOutcome::Accepted, sent.into_std());
                    sent - t0
                })
            })
            .collect();
        let mut sent = Vec::new();
        for caller in callers {
            sent.push(caller.await.expect("no panic"));
        }
        assert_eq!(sent, [2, 4, 6, 8, 10].map(|s| S * s));
    }

    #[test]
    fn a_cancelled_attempt_gives_its_token_back() {
        let gate = AdmissionGate::rate_limit(ClientRateLimit::new());
        let t0 = Instant::now();
        throttled_at(&gate, t0);
        let t2 = t0 + 2 * S;
        for _ in 0..100 {
            let permit = gate.admit(t2).expect("waiting mode");
            assert_eq!(permit.wait(), Duration::ZERO);
            drop(permit); // cancelled before its answer
        }
        assert_eq!(rates(&gate, t2).3, 1.0);
        // An ignored answer keeps the token spent.
        gate.admit(t2)
            .expect("waiting mode")
            .record(GateOutcome::Ignored, t2);
        assert_eq!(gate.admit(t2).expect("waiting mode").wait(), 2 * S);
    }

    #[test]
    fn concurrent_waiters_reserve_distinct_tokens() {
        let gate = AdmissionGate::rate_limit(ClientRateLimit::new());
        let t0 = Instant::now();
        throttled_at(&gate, t0);
        let mut waits: Vec<Duration> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        (0..100)
                            .map(|_| {
                                let permit = gate.admit(t0).expect("waiting mode");
                                let wait = permit.wait();
                                std::mem::forget(permit); // kept: the token stays reserved
                                wait
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().expect("no panic"))
                .collect()
        });
        waits.sort();
        let expected: Vec<Duration> = (1..=800).map(|i| 2 * S * i).collect();
        assert_eq!(waits, expected);
    }
}

mod concurrency_limits {
    use super::*;

    #[test]
    fn aimd_grows_when_used_and_shrinks_on_drops() {
        let gate = AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1).max_limit(12));
        let t0 = Instant::now();
        let permits: Vec<_> = (0..10)
            .map(|_| gate.admit(t0).expect("below the limit"))
            .collect();
        let refused = gate.admit(t0).expect_err("at the limit");
        assert_eq!(
            refused.reason(),
            RejectReason::ConcurrencyLimit { limit: 10 }
        );
        // Reported in order of admission: in flight 1..=10 at their admission. The first four
        // used less than half the limit; the fifth (5·2 ≥ 10) and the sixth (6·2 ≥ 11) grow it;
        // the rest find it at the maximum.
        let limits: Vec<u32> = permits
            .into_iter()
            .map(|permit| {
                permit.record(GateOutcome::Accepted, t0 + 20 * MS);
                concurrency(&gate, t0).0
            })
            .collect();
        assert_eq!(limits, [10, 10, 10, 10, 11, 12, 12, 12, 12, 12]);
        assert_eq!(concurrency(&gate, t0), (12, 0));
        // A throttle: ⌊12 × 0.9⌋ = 10. A success slower than the 5 s timeout: ⌊10 × 0.9⌋ = 9.
        gate.admit(t0)
            .expect("below")
            .record(GateOutcome::Throttled, t0 + MS);
        assert_eq!(concurrency(&gate, t0), (10, 0));
        gate.admit(t0)
            .expect("below")
            .record(GateOutcome::Accepted, t0 + 6 * S);
        assert_eq!(concurrency(&gate, t0), (9, 0));
        // Exactly 9 admitted now.
        let held: Vec<_> = (0..20).filter_map(|_| gate.admit(t0).ok()).collect();
        assert_eq!(held.len(), 9);
    }

    #[test]
    fn gradient2_follows_latency() {
        let gate = AdmissionGate::gradient2(Gradient2::new());
        let t0 = Instant::now();
        let ten_ms = t0 + 10 * MS;
        // 20 attempts of 10 ms, admitted together (in flight 1..=20) and reported in order:
        // the first nine used less than half the limit of 20; each of the other eleven adds
        // 0.2 × 4 (the latency is steady, so the gradient is 1): 20 + 11 × 0.8 = 28.8.
        let permits: Vec<_> = (0..20).map(|_| gate.admit(t0).expect("below")).collect();
        assert!(gate.admit(t0).is_err());
        for permit in permits {
            permit.record(GateOutcome::Accepted, ten_ms);
        }
        assert_eq!(concurrency(&gate, ten_ms), (28, 0));
        // Latency triples for an attempt that saw 15 in flight (≥ 28.8 / 2): the long average
        // moves by 2/601 of the difference, the gradient is 1.5 × long / 30 ms.
        let permits: Vec<_> = (0..15).map(|_| gate.admit(t0).expect("below")).collect();
        let mut permits = permits.into_iter();
        let slow = permits.next_back().expect("15 permits");
        slow.record(GateOutcome::Accepted, t0 + 30 * MS);
        let long = 10.0 + 20.0 * 2.0 / 601.0;
        let gradient = 1.5 * long / 30.0;
        let expected = 28.8 * 0.8 + (28.8 * gradient + 4.0) * 0.2;
        assert_eq!(concurrency(&gate, t0).0, expected as u32);
        assert_eq!(expected as u32, 26);
        drop(permits);
        assert_eq!(concurrency(&gate, t0), (26, 0));
    }

    #[test]
    fn concurrent_callers_never_exceed_a_fixed_limit() {
        const LIMIT: u32 = 4;
        let gate = AdmissionGate::aimd(
            Aimd::new()
                .initial_limit(LIMIT)
                .min_limit(LIMIT)
                .max_limit(LIMIT),
        );
        let t0 = Instant::now();
        let (in_flight, most, admitted) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
        std::thread::scope(|scope| {
            for thread in 0..8 {
                let (gate, in_flight, most, admitted) = (&gate, &in_flight, &most, &admitted);
                scope.spawn(move || {
                    for i in 0..5000 {
                        let Ok(permit) = gate.admit(t0) else { continue };
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::hint::spin_loop();
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        match (thread + i) % 3 {
                            0 => permit.record(GateOutcome::Accepted, t0),
                            1 => permit.record(GateOutcome::Throttled, t0),
                            _ => drop(permit),
                        }
                    }
                });
            }
        });
        assert!(most.into_inner() <= LIMIT);
        assert!(admitted.into_inner() > 0);
        assert_eq!(concurrency(&gate, t0), (LIMIT, 0));
    }
}

/// A timeout means what each reference makes of it.
#[test]
fn a_timeout_counts_as_each_reference_counts_it() {
    let t0 = Instant::now();
    let later = t0 + 100 * MS;
    // Adaptive throttling: a request the service did not accept.
    let sre = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
    answer(&sre, GateOutcome::TimedOut, t0);
    assert_eq!(throttling_counts(&sre, t0), (1, 0, 0.5));
    // The rate limiter: not a throttle, so it stays off.
    let rate = AdmissionGate::rate_limit(ClientRateLimit::new());
    answer(&rate, GateOutcome::TimedOut, t0);
    assert!(!rates(&rate, t0).0);
    // AIMD: a drop, ⌊10 × 0.9⌋ = 9, however fast.
    let aimd = AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1));
    aimd.admit(t0)
        .expect("below")
        .record(GateOutcome::TimedOut, later);
    assert_eq!(concurrency(&aimd, t0), (9, 0));
    // Gradient2: a latency sample like any other (app-limited here: the limit stays).
    let gradient2 = AdmissionGate::gradient2(Gradient2::new());
    gradient2
        .admit(t0)
        .expect("below")
        .record(GateOutcome::TimedOut, later);
    assert_eq!(concurrency(&gradient2, t0), (20, 0));
}

/// A permit dropped without a report (the caller's future was dropped) gives back what it
/// held and teaches the gate nothing, in every mode.
#[test]
fn cancelled_attempts_lose_no_capacity_in_any_mode() {
    let t0 = Instant::now();
    let gates = [
        AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()),
        AdmissionGate::rate_limit(ClientRateLimit::new()),
        AdmissionGate::aimd(Aimd::new().initial_limit(3).min_limit(1)),
        AdmissionGate::gradient2(Gradient2::new().initial_limit(3).min_limit(1)),
    ];
    for gate in &gates {
        // Some history first: one of each answer.
        answer(gate, GateOutcome::Accepted, t0);
        answer(gate, GateOutcome::Throttled, t0);
        let before = gate.state(t0 + S);
        for round in 0..1000u32 {
            let now = t0 + S;
            let permits: Vec<_> = (0..3)
                .filter_map(|_| gate.admit_with(now, || 1.0).ok())
                .collect();
            assert!(!permits.is_empty(), "{:?}, round {round}", gate.mode());
            drop(permits);
        }
        assert_eq!(gate.state(t0 + S), before, "{:?}", gate.mode());
    }
}

#[test]
fn a_rejection_says_what_shed_the_attempt() {
    let cases = [
        (
            GateMode::AdaptiveThrottling,
            RejectReason::Throttled {
                probability: 0.4236,
            },
            "admission gate `inventory` (adaptive_throttling): the service has been rejecting \
             requests, so this attempt was shed at the client (probability 42 %)",
        ),
        (
            GateMode::RateLimit,
            RejectReason::RateLimited {
                wait: Duration::from_micros(1),
            },
            "admission gate `inventory` (rate_limit): the client's rate limit after throttling \
             allows the next attempt in 1 ms",
        ),
        (
            GateMode::Gradient2,
            RejectReason::ConcurrencyLimit { limit: 20 },
            "admission gate `inventory` (gradient2): 20 attempts are already in flight, the \
             current concurrency limit",
        ),
    ];
    for (mode, reason, message) in cases {
        let rejected = Rejected::new(mode, reason, "inventory");
        assert_eq!(rejected.to_string(), message);
        assert_eq!((rejected.mode(), rejected.reason()), (mode, reason));
        let _: &dyn std::error::Error = &rejected;
    }
    // From a gate: its mode and name.
    let gate = AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1)).name("inventory");
    let t0 = Instant::now();
    let _held = gate.admit(t0).expect("below the limit");
    let rejected = gate.admit(t0).expect_err("at the limit");
    assert_eq!(
        (rejected.mode(), rejected.gate(), rejected.retry_after()),
        (GateMode::Aimd, "inventory", None)
    );
}
