//! The loop's faults through the `Retrier` (by its `name`) and a door on the engine.

use crate::common::{CallError, within_four_sigma};
use retry_chaos::{Attempts, Rule, Site};
use retry_runtime::engine::{self, Counters, DynHooks, Settings};
use retry_runtime::{Jitter, Policy, Retrier, TokioTimer, Verdict, attempt};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

const NO_RETRY: Policy = Policy::new().max(0);

/// A `Retrier` told that its error type can be injected: 10,000 one-attempt runs at 0.3,
/// within 4 standard deviations of 3,000; without `injectable` the same site injects none.
#[test]
fn a_retrier_takes_the_rate_of_its_sites_name() {
    let site = Site::new("retrier-rate")
        .seed(11)
        .rule(Rule::error().rate(0.3))
        .install();
    let failed = (0..10_000)
        .filter(|_| {
            Retrier::new(&NO_RETRY)
                .name("retrier-rate")
                .injectable()
                .run(|| Ok::<u32, CallError>(attempt().number()))
                .is_err()
        })
        .count() as u64;
    assert!(within_four_sigma(failed, 10_000, 0.3), "{failed}");
    assert_eq!(site.stats().errors, failed);
    // Not `injectable`: the error type is not asked, and the attempts run.
    let ran = (0..1_000)
        .filter(|_| {
            Retrier::new(&NO_RETRY)
                .name("retrier-rate")
                .run(|| Ok::<u32, CallError>(1))
                .is_ok()
        })
        .count();
    assert_eq!(ran, 1_000);
    site.remove();
}

/// An async `Retrier` with a 2 s timeout: an injected 3 s latency on attempt 1 times it out at
/// 2 s exactly, and the retry (after 500 ms) answers.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retriers_injected_latency_is_cut_by_its_timeout() {
    let site = Site::new("retrier-slow")
        .seed(12)
        .rule(Rule::latency(Duration::from_secs(3)).attempts(Attempts::Only(1)))
        .install();
    let started = Instant::now();
    let answer = Retrier::new(&Policy::new().max(1).base(Duration::from_millis(500)))
        .jitter(Jitter::None)
        .name("retrier-slow")
        .timeout(Duration::from_secs(2))
        .run_async(|| async { Ok::<u32, CallError>(attempt().number()) })
        .await;
    assert_eq!(answer, Ok(2));
    assert_eq!(started.elapsed(), Duration::from_millis(2_500));
    site.remove();
}

/// A door on the engine (`engine::drive` with `DynHooks::injectable`): the injected error is
/// judged by the door's classifier as a real one (retried), and each fault is an
/// `Event::Injected` on the door's sink, beside its retries.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_engine_door_hears_each_injected_fault_on_its_sink() {
    let site = Site::new("engine-door")
        .seed(13)
        .rule(Rule::error().attempts(Attempts::Only(1)))
        .install();
    let policy = Policy::new()
        .max(2)
        .base(Duration::from_millis(100))
        .jitter(Jitter::None);
    let counters = Counters::default();
    let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Injected(_)));
    let body_ran = AtomicU32::new(0);
    let started = Instant::now();
    for _ in 0..5 {
        let settings = Settings::new(&policy).name("engine-door").sink(&counters);
        let hooks = DynHooks::new(&classify).injectable();
        let answer = engine::drive(&settings, hooks, TokioTimer, || async {
            body_ran.fetch_add(1, Ordering::Relaxed);
            Ok::<u32, CallError>(attempt().number())
        })
        .await;
        assert_eq!(answer, Ok(2));
    }
    assert_eq!(started.elapsed(), Duration::from_millis(500));
    assert_eq!(body_ran.load(Ordering::Relaxed), 5);
    assert_eq!((counters.injected(), counters.retries()), (5, 5));
    // A classifier that does not retry the injected error returns it as the answer.
    let never = |_: &CallError| Verdict::Fail;
    let settings = Settings::new(&policy).name("engine-door");
    let answer = engine::drive(
        &settings,
        DynHooks::new(&never).injectable(),
        TokioTimer,
        || async { Ok::<u32, CallError>(1) },
    )
    .await;
    assert_eq!(answer, Err(CallError::Injected(1)));
    site.remove();
}
