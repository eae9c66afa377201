//! The loop state's own tests: what the expansion does with one attempt, step by step.

use super::*;
use crate::Jitter;
use std::fmt;

/// The state of a sync loop over `Result<T, E>` that judges errors with `classify`.
fn start<T, E: fmt::Debug, C: Fn(&E) -> V, V: IntoVerdict>(
    policy: &Policy,
    classify: C,
) -> Retry<'_, T, E, Started<C, E, Unset>> {
    Shape::<Result<T, E>>::new().start(policy, "f", classify, Unset)
}

fn transient(_: &&'static str) -> bool {
    true
}

/// The pause before the next attempt and the state for it, or the function's result.
type Step<'p, T, E, O> = ControlFlow<Result<T, E>, (Duration, Retry<'p, T, E, O>)>;

/// What the expansion does with one attempt whose body returns `outcome`: the pause before
/// the next attempt and the state for it, or the function's result.
fn step<T, E: fmt::Debug, C>(
    mut retry: Retry<'_, T, E, Started<C, E, Unset>>,
    outcome: Result<T, E>,
) -> Step<'_, T, E, Started<C, E, Unset>> {
    let attempted = retry.attempt(|| outcome);
    match retry.next(attempted) {
        ControlFlow::Break(result) => ControlFlow::Break(result),
        ControlFlow::Continue(retry) => ControlFlow::Continue((retry.decided_pause(), retry)),
    }
}

/// The pause `step` decided; panics on `Break`.
fn paused<T: fmt::Debug, E: fmt::Debug, O>(
    flow: Step<'_, T, E, O>,
) -> (Duration, Retry<'_, T, E, O>) {
    match flow {
        ControlFlow::Continue(next) => next,
        ControlFlow::Break(result) => panic!("expected a pause, got {result:?}"),
    }
}

#[test]
fn ok_breaks_at_once() {
    let policy = Policy::new();
    let retry = start::<i32, &str, _, _>(&policy, transient);
    assert_eq!(retry.retries(), 0);
    assert!(matches!(step(retry, Ok(1)), ControlFlow::Break(Ok(1))));
}

#[test]
fn transient_errors_pause_until_the_limit() {
    let policy = Policy::new().max(2).jitter(Jitter::None);
    let retry = start::<(), &str, _, _>(&policy, transient);
    let s = Duration::from_secs(1);
    let (pause, retry) = paused(step(retry, Err("a")));
    assert_eq!((pause, retry.retries()), (s, 1));
    let (pause, retry) = paused(step(retry, Err("b")));
    assert_eq!((pause, retry.retries()), (2 * s, 2));
    assert!(matches!(
        step(retry, Err("c")),
        ControlFlow::Break(Err("c"))
    ));
}

#[test]
fn permanent_errors_break_at_once() {
    let policy = Policy::new();
    let retry = start::<(), &str, _, _>(&policy, |_: &&str| false);
    assert!(matches!(
        step(retry, Err("no")),
        ControlFlow::Break(Err("no"))
    ));
}

thread_local! {
    static CLOCK_READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// A clock that counts how often it is read on this thread.
fn counted_clock() -> Instant {
    CLOCK_READS.with(|reads| reads.set(reads.get() + 1));
    Instant::now()
}

fn clock_reads() -> u32 {
    CLOCK_READS.with(std::cell::Cell::get)
}

/// Runs one attempt of `retry` whose body returns `Ok(())`, which ends the call at once.
macro_rules! ok_at_once {
    ($retry:ident) => {
        let attempted = $retry.attempt(|| Ok(()));
        assert!(matches!($retry.next(attempted), ControlFlow::Break(Ok(()))));
    };
}

/// Asserts that `retry`'s builder read no clock, and that its first attempt (which succeeds)
/// reads it once.
macro_rules! reads_the_clock_once_as_the_first_attempt_starts {
    ($retry:expr) => {
        let mut retry = $retry;
        assert_eq!(clock_reads(), 0, "the builder reads no clock");
        ok_at_once!(retry);
        assert_eq!(clock_reads(), 1);
    };
}

/// The state of a function that returns `Result<(), &str>` and retries every error.
type Plain<'p> =
    Retry<'p, (), &'static str, Started<fn(&&'static str) -> bool, &'static str, Unset>>;

/// `start` with the counting clock.
fn counted(policy: &Policy) -> Plain<'_> {
    CLOCK_READS.with(|reads| reads.set(0));
    let mut retry: Plain<'_> = start(policy, transient);
    retry.site.clock = counted_clock;
    retry.progress.started = policy.get_deadline().map(|_| counted_clock());
    retry
}

#[test]
fn the_happy_path_reads_no_clock_without_deadline_or_a_hook_that_hears_the_time() {
    let policy = Policy::new();
    let mut retry = counted(&policy)
        .on_result(|_| false)
        .on_give_up(|_: &&str| {});
    ok_at_once!(retry);
    assert_eq!(clock_reads(), 0);
}

#[test]
fn a_deadline_reads_the_clock_once_as_the_call_starts() {
    let policy = Policy::new().deadline(Duration::from_secs(10));
    let mut retry = counted(&policy).notify(|_: &&str, _: &RetryEvent| {});
    assert_eq!(clock_reads(), 1);
    assert!(retry.progress.started.is_some());
    ok_at_once!(retry);
    assert_eq!(clock_reads(), 1, "notify needs no second reading");
}

#[test]
fn a_hook_that_hears_the_time_reads_the_clock_once_as_the_first_attempt_starts() {
    // `notify`, `on_give_up` with a `GiveUp`, and `fallback` hear the time spent.
    let policy = Policy::new();
    reads_the_clock_once_as_the_first_attempt_starts!(
        counted(&policy).notify(|_: &&str, _: &RetryEvent| {})
    );
    reads_the_clock_once_as_the_first_attempt_starts!(
        counted(&policy).on_give_up(|_: &&str, _: &GiveUp| {})
    );
    reads_the_clock_once_as_the_first_attempt_starts!(counted(&policy).fallback(|e, _| Err(e)));
}

#[test]
fn a_failure_reads_no_clock_without_a_hook_deadline_budget_or_breaker() {
    let policy = Policy::new().jitter(Jitter::None);
    let mut retry = counted(&policy)
        .on_give_up(|_: &&str| {})
        .log_level(level::Warn);
    let attempted = retry.attempt(|| Err("busy"));
    assert!(matches!(retry.next(attempted), ControlFlow::Continue(_)));
    assert_eq!(clock_reads(), 0);
}

#[test]
fn a_gate_reads_the_clock_only_when_its_mode_needs_the_time() {
    use crate::{AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, Gradient2, Rejected};
    static THROTTLING: AdmissionGate =
        AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
    static RATE_LIMIT: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
    static AIMD: AdmissionGate = AdmissionGate::aimd(Aimd::new());
    static GRADIENT2: AdmissionGate = AdmissionGate::gradient2(Gradient2::new());
    #[derive(Debug)]
    struct Shed;
    impl From<Rejected> for Shed {
        fn from(_: Rejected) -> Self {
            Shed
        }
    }
    let policy = Policy::new();
    // The clock reads of one call whose first attempt is accepted.
    let reads = |gate: &AdmissionGate| {
        CLOCK_READS.with(|reads| reads.set(0));
        let mut retry = Shape::<Result<(), Shed>>::new()
            .start(&policy, "f", |_: &Shed| true, Unset)
            .gate(gate);
        retry.site.clock = counted_clock;
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        clock_reads()
    };
    // The first call fixes the gate's time 0 as it is admitted; after it, admitting needs no
    // time while nothing is throttled, and the answer is placed by its own time.
    assert_eq!([reads(&THROTTLING), reads(&THROTTLING)], [2, 1]);
    assert_eq!([reads(&RATE_LIMIT), reads(&RATE_LIMIT)], [2, 1]);
    // The concurrency limits learn from the attempt's latency: its start and its end.
    assert_eq!([reads(&AIMD), reads(&AIMD)], [2, 2]);
    assert_eq!([reads(&GRADIENT2), reads(&GRADIENT2)], [2, 2]);
}

#[test]
fn retry_now_takes_no_pause_and_counts_the_retry() {
    let policy = Policy::new().max(1);
    let retry = start::<(), &str, _, _>(&policy, |_: &&str| Verdict::RetryNow);
    let (pause, retry) = paused(step(retry, Err("a")));
    assert_eq!((pause, retry.retries()), (Duration::ZERO, 1));
    assert!(matches!(
        step(retry, Err("b")),
        ControlFlow::Break(Err("b"))
    ));
}

#[test]
fn the_budget_gets_its_deposit_as_the_first_attempt_starts() {
    static BUDGET: RetryBudget = RetryBudget::new().ratio(1.0);
    let policy = Policy::new().jitter(Jitter::None);
    let mut retry = start::<(), &str, _, _>(&policy, transient).budget(&BUDGET);
    assert_eq!(BUDGET.available(), 0.0, "the builder deposits nothing");
    let attempted = retry.attempt(|| Err("busy"));
    assert_eq!(BUDGET.available(), 1.0);
    // The retry takes this second's reserve, not the token; the second attempt deposits
    // nothing more.
    let ControlFlow::Continue(mut retry) = retry.next(attempted) else {
        panic!("expected a retry");
    };
    let _ = retry.attempt(|| Ok(()));
    assert_eq!(BUDGET.available(), 1.0);
}

#[test]
fn a_pause_past_the_deadline_is_not_taken() {
    let policy = Policy::new()
        .jitter(Jitter::None)
        .deadline(Duration::from_millis(2500));
    let retry = start::<(), &str, _, _>(&policy, transient);
    // 1 s fits; after 1 s more, 2 s does not.
    let (_, mut retry) = paused(step(retry, Err("a")));
    retry.progress.started = retry.progress.started.map(|t| t - Duration::from_secs(1));
    assert!(matches!(
        step(retry, Err("b")),
        ControlFlow::Break(Err("b"))
    ));
}

#[test]
fn a_suggested_pause_is_a_floor_and_too_long_gives_up() {
    let policy = Policy::new()
        .jitter(Jitter::None)
        .max_delay(Duration::from_secs(10));
    let suggest = |e: &Duration| Verdict::RetryAfter(*e);
    let retry = start::<(), Duration, _, _>(&policy, suggest);
    let s = Duration::from_secs(1);
    let (pause, retry) = paused(step(retry, Err(3 * s)));
    assert_eq!(pause, 3 * s);
    let (pause, retry) = paused(step(retry, Err(Duration::ZERO)));
    assert_eq!(pause, 2 * s);
    assert!(matches!(step(retry, Err(11 * s)), ControlFlow::Break(Err(e)) if e == 11 * s));
}
