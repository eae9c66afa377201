//! The loop's faults through the attribute and `retry_block!`, by the call site's name.

use crate::common::{CallError, within_four_sigma};
use retry_chaos::{Attempts, Rule, Site};
use retry_runtime::{attempt, retry, retry_block};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

#[retry(max = 0)]
fn rated() -> Result<u32, CallError> {
    Ok(attempt().number())
}

/// 10,000 calls of one attempt each at a rate of 0.3: the injected errors are within 4
/// standard deviations of 3,000 (±183), the site counted each one, and the same seed injects
/// into the same calls again.
#[test]
fn the_rate_holds_over_ten_thousand_seeded_calls_and_the_seed_replays_them() {
    let run = || {
        let site = Site::new("rated")
            .seed(2026)
            .rule(Rule::error().rate(0.3))
            .install();
        let failed: Vec<bool> = (0..10_000).map(|_| rated().is_err()).collect();
        let stats = site.stats();
        site.remove();
        (failed, stats)
    };
    let (failed, stats) = run();
    let injected = failed.iter().filter(|f| **f).count() as u64;
    assert!(
        within_four_sigma(injected, 10_000, 0.3),
        "{injected} of 10,000"
    );
    assert_eq!((stats.asked, stats.errors), (10_000, injected));
    // Every failure is the injected error, made by `From<Injected>` for attempt 1.
    assert!(
        (0..100).all(|_| matches!(rated(), Ok(1))),
        "removed: no faults"
    );
    let (again, _) = run();
    assert_eq!(failed, again, "the same seed injects into the same calls");
}

static RAN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

#[retry(max = 3, base = "10ms", jitter = none)]
fn filtered() -> Result<u32, CallError> {
    let n = attempt().number();
    RAN.lock().expect("not poisoned").push(n);
    // A real failure on the first attempt.
    if n == 1 {
        return Err(CallError::Unavailable);
    }
    Ok(n)
}

/// `Attempts::Only(2)` at rate 1: every call's second attempt is injected (its body does not
/// run), and no other; the first fails for real, the third answers.
#[test]
fn the_attempt_filter_faults_exactly_the_attempt_it_names() {
    let site = Site::new("filtered")
        .seed(1)
        .rule(Rule::error().attempts(Attempts::Only(2)))
        .install();
    for _ in 0..20 {
        assert_eq!(filtered(), Ok(3));
    }
    site.remove();
    let ran = RAN.lock().expect("not poisoned").clone();
    assert_eq!(
        ran,
        [1, 3].repeat(20),
        "the body ran on attempts 1 and 3 only"
    );
    assert_eq!(site.stats().errors, 20);
}

#[retry(max = 1, base = "1s", jitter = none, timeout = "2s")]
async fn slow(calls: &AtomicU32) -> Result<u32, CallError> {
    calls.fetch_add(1, Ordering::Relaxed);
    Ok(attempt().number())
}

/// A 3 s latency on the first attempt, whose timeout is 2 s: the attempt times out at 2 s (its
/// body never answers), the retry runs 1 s later without latency. A 1 s latency on another
/// site's attempt stays inside its timeout and the attempt answers at 1 s.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_injected_latency_runs_inside_the_attempts_timeout() {
    let site = Site::new("slow")
        .seed(3)
        .rule(Rule::latency(Duration::from_secs(3)).attempts(Attempts::Only(1)))
        .install();
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    assert_eq!(slow(&calls).await, Ok(2));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "2 s timeout + 1 s pause"
    );
    // The first attempt was cut off while its latency ran, before its body was polled.
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    site.remove();

    let site = Site::new("slow")
        .seed(3)
        .rule(Rule::latency(Duration::from_secs(1)))
        .install();
    let started = Instant::now();
    assert_eq!(slow(&calls).await, Ok(1));
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(site.stats().latencies, 1);
    site.remove();
}

/// `retry_block!` by its `name`, async: a seeded rate over 2,000 blocks (0.25, within 4
/// standard deviations: ±77), each retried once after an injected error.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_block_is_found_by_its_name() {
    let site = Site::new("checkout-block")
        .seed(99)
        .rule(Rule::error().rate(0.25).attempts(Attempts::Only(1)))
        .install();
    let mut second_attempts = 0;
    for _ in 0..2_000 {
        let answer =
            retry_block!(name = "checkout-block", max = 1, base = "5ms", jitter = none => async {
                Ok::<u32, CallError>(attempt().number())
            })
            .await;
        match answer {
            Ok(2) => second_attempts += 1,
            Ok(1) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    site.remove();
    assert!(
        within_four_sigma(second_attempts, 2_000, 0.25),
        "{second_attempts}"
    );
    assert_eq!(site.stats().errors, second_attempts);
}

#[retry(max = 2, base = "100ms", jitter = none)]
async fn switched(calls: &AtomicU32) -> Result<(), CallError> {
    calls.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// The site's switch turned off and on again while calls run in another task: the calls that
/// start while it is off take no fault, those while it is on take one on each attempt.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_sites_switch_turns_while_calls_run() {
    let site = Site::new("switched").seed(5).rule(Rule::error()).install();
    let body_ran = std::sync::Arc::new(AtomicU32::new(0));
    let ran = std::sync::Arc::clone(&body_ran);
    // One call every second; each ends after its two retries (300 ms) while the switch is on.
    let calls = tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for _ in 0..9 {
            outcomes.push(switched(&ran).await.is_ok());
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        outcomes
    });
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    site.disable();
    tokio::time::sleep(Duration::from_secs(3)).await;
    site.enable();
    let outcomes = calls.await.unwrap();
    site.remove();
    // On: a call fails after its two retries (300 ms), the next starts 1 s later. Calls at 0
    // and 1.3 s fail; off from 2.5 s, the calls at 2.6, 3.6 and 4.6 s pass at once; on again
    // from 5.5 s, the calls at 5.6, 6.9, 8.2 and 9.5 s fail.
    let expected = [false, false, true, true, true, false, false, false, false];
    assert_eq!(outcomes, expected);
    assert_eq!(
        body_ran.load(Ordering::Relaxed),
        3,
        "the body ran only while off"
    );
}
