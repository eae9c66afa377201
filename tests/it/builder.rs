//! `Retrier`: the attribute's options as methods, for a `Policy` chosen at run time and a
//! closure, sync and async. The same loop: call counts, exact virtual times on tokio's paused
//! clock, borrows of the surroundings, the attempt context, one retrying layer, the budget, the
//! breaker, the fallback, the deadline, the timeout, the hooks and the events; the timing
//! methods (`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`)
//! over the policy's, and a default `Retrier` against a `#[retry]` without arguments; and
//! `reset_after`, which starts the backoff afresh after a healthy attempt in a long-lived loop.

use crate::common::{Busy, MS, NEVER, S, fail, step};
use retry_runtime::{
    Backoff, CircuitBreaker, CircuitOpen, Elapsed, GiveUp, GiveUpReason, Jitter, Policy, Retrier,
    RetryBudget, RetryEvent, Verdict, attempt, level, retry, testing,
};
use std::cell::{Cell, RefCell};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A policy as a configuration file gives it: read at run time.
fn from_config(text: &str) -> Policy {
    text.parse().expect("a valid policy string")
}

// ---- sync ------------------------------------------------------------------------------------

#[test]
fn a_policy_from_a_string_drives_the_pauses() {
    let policy = from_config("max = 3, base = 1s, jitter = none");
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| Retrier::new(&policy).run(|| step(&calls, 3)));
    assert_eq!(result, Ok(3));
    assert_eq!(pauses, [S, 2 * S]);
}

#[test]
fn the_defaults_are_the_attributes() {
    let policy = Policy::new().jitter(Jitter::None);
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| Retrier::new(&policy).run(|| fail(&calls)));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [S, 2 * S, 4 * S]);
}

#[test]
fn the_closure_borrows_its_surroundings_mutably() {
    let policy = from_config("max = 3, base = 1ms");
    let mut log = Vec::new();
    let (result, _) = testing::record(|| {
        Retrier::new(&policy).run(|| {
            log.push(attempt().number());
            if log.len() < 3 {
                Err(Busy(log.len() as u32))
            } else {
                Ok(log.len())
            }
        })
    });
    assert_eq!(result, Ok(3));
    assert_eq!(log, [1, 2, 3]);
}

#[test]
fn on_names_the_classifier_and_a_permanent_error_is_returned_at_once() {
    let policy = from_config("max = 3, base = 1s");
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| {
        Retrier::new(&policy)
            .on(|e: &Busy| {
                if e.0 < 2 {
                    Verdict::Retry
                } else {
                    Verdict::Fail
                }
            })
            .run(|| fail(&calls))
    });
    assert_eq!((result, pauses.len(), calls.get()), (Err(Busy(2)), 1, 2));
}

#[test]
fn on_result_notify_and_on_give_up() {
    let policy = from_config("max = 2, base = 1s, jitter = none");
    // The hooks are `Send + Sync`: a `Mutex`, not a `RefCell`.
    let heard = Mutex::new(Vec::new());
    let gave_up = Mutex::new(Vec::new());
    let (result, _) = testing::record(|| {
        Retrier::new(&policy)
            .on_result(|status: &u16| *status == 503)
            .notify(|outcome: Result<&u16, &Busy>, event: &RetryEvent| {
                heard
                    .lock()
                    .unwrap()
                    .push((outcome.ok().copied(), event.pause));
            })
            .on_give_up(|outcome: Result<&u16, &Busy>, why: &GiveUp| {
                gave_up
                    .lock()
                    .unwrap()
                    .push((outcome.ok().copied(), why.reason));
            })
            .log_level(level::Warn)
            .run(|| Ok::<u16, Busy>(503))
    });
    assert_eq!(result, Ok(503));
    assert_eq!(*heard.lock().unwrap(), [(Some(503), S), (Some(503), 2 * S)]);
    assert_eq!(
        *gave_up.lock().unwrap(),
        [(Some(503), GiveUpReason::Exhausted)]
    );
}

#[test]
fn a_sync_fallback_makes_the_result() {
    let policy = from_config("max = 1, base = 1ms");
    let saved = Mutex::new(Vec::new());
    let result = Retrier::new(&policy)
        .fallback(|error: Busy, why: GiveUp| {
            saved.lock().unwrap().push((error, why.attempts));
            Ok::<u32, Busy>(0)
        })
        .run(|| Err(Busy(attempt().number())));
    assert_eq!(result, Ok(0));
    assert_eq!(*saved.lock().unwrap(), [(Busy(2), 2)]);
}

#[derive(Debug, PartialEq)]
enum CallError {
    Busy,
    TimedOut,
    Open,
}

impl retry_runtime::Transient for CallError {
    fn is_transient(&self) -> bool {
        !matches!(self, CallError::Open)
    }
}

impl From<Elapsed> for CallError {
    fn from(_: Elapsed) -> Self {
        CallError::TimedOut
    }
}

impl From<CircuitOpen> for CallError {
    fn from(_: CircuitOpen) -> Self {
        CallError::Open
    }
}

#[test]
fn the_breaker_opens_and_then_refuses_without_calling() {
    static BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(2)
        .open_for(Duration::from_secs(30));
    let policy = from_config("max = 5, base = 1ms");
    let calls = Cell::new(0);
    let body = || {
        calls.set(calls.get() + 1);
        Err::<(), _>(CallError::Busy)
    };
    let (first, _) = testing::record(|| Retrier::new(&policy).breaker(&BREAKER).run(body));
    assert_eq!((first, calls.get()), (Err(CallError::Busy), 2));
    let (second, _) = testing::record(|| Retrier::new(&policy).breaker(&BREAKER).run(body));
    assert_eq!((second, calls.get()), (Err(CallError::Open), 2));
}

#[test]
fn an_empty_budget_ends_the_loop() {
    // No reserve per second and a ratio that deposits a tenth of a token: no retry.
    static BUDGET: RetryBudget = RetryBudget::new().ratio(0.1).min_per_second(0);
    let policy = from_config("max = 3, base = 1s");
    let calls = Cell::new(0);
    let (result, pauses) =
        testing::record(|| Retrier::new(&policy).budget(&BUDGET).run(|| fail(&calls)));
    assert_eq!((result, pauses.len()), (Err(Busy(1)), 0));
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn handle_request(policy: &Policy, calls: &Cell<u32>) -> Result<u32, Busy> {
    Retrier::new(policy).run(|| fail(calls))
}

#[test]
fn inside_a_retrying_function_it_makes_one_attempt_unless_nested_retry() {
    let policy = from_config("max = 2, base = 1ms");
    let calls = Cell::new(0);
    let (result, _) = testing::record(|| handle_request(&policy, &calls));
    assert_eq!((result, calls.get()), (Err(Busy(4)), 4));

    let calls = Cell::new(0);
    let (result, _) = testing::record(|| {
        Retrier::new(&policy).run(|| Retrier::new(&policy).nested_retry().run(|| fail(&calls)))
    });
    assert_eq!((result, calls.get()), (Err(Busy(9)), 9));
}

#[test]
fn the_events_are_the_attributes_under_the_retriers_name() {
    use tracing::Level;
    let policy = from_config("max = 2, base = 1ms, jitter = none");
    let calls = Cell::new(0);
    let (result, events) = crate::tracing_events::capture(|| {
        Retrier::new(&policy)
            .name("read_tariffs")
            .run(|| fail(&calls))
    });
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(
        crate::tracing_events::levels(&events),
        [Level::INFO, Level::INFO, Level::ERROR]
    );
    for (n, event) in events[..2].iter().enumerate() {
        assert_eq!(event.field("function"), "read_tariffs");
        assert_eq!(event.field("attempt"), (n + 1).to_string());
        assert_eq!(event.field("pause"), format!("{}ms", 1 << n));
        assert_eq!(event.field("error"), format!("Busy({})", n + 1));
    }
    assert_eq!(events[2].field("reason"), "retries used up");
}

// ---- async, on the paused clock ----------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn run_async_pauses_on_tokios_clock() {
    let policy = from_config("max = 3, base = 1s, jitter = none");
    let seen = RefCell::new(Vec::new());
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .run_async(|| async {
            tokio::time::sleep(10 * MS).await;
            seen.borrow_mut().push(t0.elapsed());
            let n = seen.borrow().len();
            if n < 3 { Err(Busy(n as u32)) } else { Ok(n) }
        })
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!(*seen.borrow(), [10 * MS, S + 20 * MS, 3 * S + 30 * MS]);
}

/// The pauses `recorded_sleep` was asked for, and its own.
static SLEPT: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

fn recorded_sleep(pause: Duration) -> std::future::Ready<()> {
    SLEPT.lock().unwrap_or_else(|e| e.into_inner()).push(pause);
    std::future::ready(())
}

#[tokio::test(start_paused = true)]
async fn sleep_is_the_timer_of_a_run_with_and_without_hooks() {
    let policy = from_config("max = 2, base = 1s, jitter = none");
    for with_notify in [false, true] {
        SLEPT.lock().unwrap().clear();
        let (calls, heard) = (AtomicU32::new(0), AtomicU32::new(0));
        let mut retrier = Retrier::new(&policy).sleep(recorded_sleep);
        if with_notify {
            retrier = retrier.notify(|_: &Busy, _: &RetryEvent| {
                heard.fetch_add(1, Ordering::Relaxed);
            });
        }
        let t0 = Instant::now();
        let result = retrier
            .run_async(|| async { Err::<u32, _>(Busy(calls.fetch_add(1, Ordering::Relaxed))) })
            .await;
        assert_eq!(result, Err(Busy(2)));
        // Both pauses went to `sleep`, none to tokio's timer, whose clock did not move.
        assert_eq!(
            *SLEPT.lock().unwrap(),
            [S, 2 * S],
            "with notify: {with_notify}"
        );
        assert_eq!(t0.elapsed(), Duration::ZERO);
        assert_eq!(
            heard.load(Ordering::Relaxed),
            if with_notify { 2 } else { 0 }
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_closure_returning_a_future_works_too() {
    let policy = from_config("max = 2, base = 1s, jitter = none");
    let calls = Cell::new(0);
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .run_async(|| async { fail(&calls) })
        .await;
    assert_eq!((result, calls.get()), (Err(Busy(3)), 3));
    assert_eq!(t0.elapsed(), 3 * S);
}

#[tokio::test(start_paused = true)]
async fn timeout_cuts_off_each_attempt() {
    let policy = from_config("max = 2, base = 1s, jitter = none");
    let calls = Cell::new(0);
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .timeout(100 * MS)
        .run_async(|| async {
            calls.set(calls.get() + 1);
            let wait = if calls.get() < 3 { 3600 * S } else { 10 * MS };
            tokio::time::sleep(wait).await;
            Ok::<_, CallError>(calls.get())
        })
        .await;
    assert_eq!(result, Ok(3));
    assert_eq!(t0.elapsed(), 3 * S + 210 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_and_an_async_fallback() {
    let policy = from_config("max = 10, base = 1s, jitter = none, deadline = 5s");
    let gave_up = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .fallback(async |error: CallError, why: GiveUp| {
            gave_up.lock().unwrap().push((why.reason, why.attempts));
            tokio::time::sleep(S).await;
            Err(error)
        })
        .run_async(|| async { Err::<(), _>(CallError::Busy) })
        .await;
    assert_eq!(result, Err(CallError::Busy));
    assert_eq!(*gave_up.lock().unwrap(), [(GiveUpReason::Deadline, 3)]);
    // Pauses of 1 s and 2 s; 4 s more would end past 5 s; the fallback takes 1 s.
    assert_eq!(t0.elapsed(), 4 * S);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_async_is_send_when_its_closure_is() {
    static POLICY: Policy = Policy::new().max(2).base(Duration::from_millis(1));
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let task = tokio::spawn({
        let calls = calls.clone();
        async move {
            Retrier::new(&POLICY)
                .run_async(|| async {
                    let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
                    tokio::task::yield_now().await;
                    if n < 3 { Err(Busy(n)) } else { Ok(n) }
                })
                .await
        }
    });
    assert_eq!(task.await.expect("the task ran"), Ok(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_async_with_hooks_and_a_fallback_is_send() {
    static POLICY: Policy = Policy::new().max(1).base(Duration::from_millis(1));
    static HEARD: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    // Spawned: the boxed hooks and the async fallback keep the run's future `Send`.
    let task = tokio::spawn(async {
        Retrier::new(&POLICY)
            .notify(|error: &Busy, _: &RetryEvent| HEARD.lock().unwrap().push(error.0))
            .fallback(async |error: Busy, why: GiveUp| {
                tokio::task::yield_now().await;
                Ok::<u32, Busy>(error.0 * 10 + why.attempts)
            })
            .run_async(|| async { Err(Busy(attempt().number())) })
            .await
    });
    assert_eq!(task.await.expect("the task ran"), Ok(22));
    assert_eq!(*HEARD.lock().unwrap(), [1]);
}

#[test]
fn a_fallback_takes_the_error_or_the_whole_outcome_beside_on_result() {
    let policy = from_config("max = 1, base = 1ms");
    // Taking the error, it hears the errors only: a rejected `Ok` is returned as it is.
    let result = Retrier::new(&policy)
        .on_result(|status: &u16| *status == 503)
        .fallback(|_: Busy, _: GiveUp| Ok::<u16, Busy>(0))
        .run(|| Ok::<u16, Busy>(503));
    assert_eq!(result, Ok(503));
    // Taking the outcome, it hears the rejected `Ok` too.
    let result = Retrier::new(&policy)
        .on_result(|status: &u16| *status == 503)
        .fallback(|outcome: Result<u16, Busy>, why: GiveUp| {
            assert_eq!((outcome, why.attempts), (Ok(503), 2));
            Ok::<u16, Busy>(0)
        })
        .run(|| Ok::<u16, Busy>(503));
    assert_eq!(result, Ok(0));
    // And the error, from a failure.
    let result = Retrier::new(&policy)
        .fallback(|outcome: Result<u16, Busy>, _: GiveUp| outcome.or(Ok(1)))
        .run(|| Err(Busy(attempt().number())));
    assert_eq!(result, Ok(1));
}

// ---- a long-lived loop: reset_after --------------------------------------------------------------

/// A consumer that stays connected for the given times, then drops: each entry is how long one
/// connection lasts before it fails.
struct Connection<'a> {
    lifetimes: &'a RefCell<Vec<Duration>>,
    connects: &'a RefCell<Vec<Duration>>,
    t0: Instant,
}

impl Connection<'_> {
    async fn consume_until_dropped(&self) -> Result<(), Busy> {
        self.connects.borrow_mut().push(self.t0.elapsed());
        let lifetime = self.lifetimes.borrow_mut().remove(0);
        if lifetime == Duration::MAX {
            return Ok(()); // shut down cleanly
        }
        tokio::time::sleep(lifetime).await;
        Err(Busy(self.connects.borrow().len() as u32))
    }
}

#[tokio::test(start_paused = true)]
async fn reset_after_starts_the_backoff_afresh_after_a_healthy_connection() {
    let policy = from_config("max = 4, base = 1s, jitter = none");
    let t0 = Instant::now();
    // Two quick drops, an hour of health, two quick drops, then a clean end.
    let lifetimes = RefCell::new(vec![
        Duration::ZERO,
        Duration::ZERO,
        Duration::from_secs(3600),
        Duration::ZERO,
        Duration::ZERO,
        Duration::MAX,
    ]);
    let connects = RefCell::new(Vec::new());
    let connection = Connection {
        lifetimes: &lifetimes,
        connects: &connects,
        t0,
    };
    let result = Retrier::new(&policy)
        .reset_after(Duration::from_secs(60))
        .run_async(|| connection.consume_until_dropped())
        .await;
    assert_eq!(result, Ok(()));
    let h = Duration::from_secs(3600);
    // Pauses 1 s, 2 s; the healthy hour (at 3 s to 3 s + 1 h) resets them: 1 s, 2 s, 4 s again,
    // and the retries are counted afresh (six connections with `max = 4`).
    assert_eq!(
        *connects.borrow(),
        [
            Duration::ZERO,
            S,
            3 * S,
            3 * S + h + S,
            3 * S + h + 3 * S,
            3 * S + h + 7 * S
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn without_reset_after_the_pauses_keep_growing_and_the_retries_run_out() {
    let policy = from_config("max = 4, base = 1s, jitter = none");
    let t0 = Instant::now();
    let lifetimes = RefCell::new(vec![
        Duration::ZERO,
        Duration::ZERO,
        Duration::from_secs(3600),
        Duration::ZERO,
        Duration::ZERO,
        Duration::MAX,
    ]);
    let connects = RefCell::new(Vec::new());
    let connection = Connection {
        lifetimes: &lifetimes,
        connects: &connects,
        t0,
    };
    let result = Retrier::new(&policy)
        .run_async(|| connection.consume_until_dropped())
        .await;
    let h = Duration::from_secs(3600);
    assert_eq!(
        result,
        Err(Busy(5)),
        "the fifth connection's drop used up `max = 4`"
    );
    assert_eq!(
        *connects.borrow(),
        [
            Duration::ZERO,
            S,
            3 * S,
            3 * S + h + 4 * S,
            3 * S + h + 12 * S
        ]
    );
}

#[test]
fn reset_after_in_a_sync_loop_with_a_deadline_runs_the_deadline_afresh() {
    // Virtual time: the recorder's clock advances by each pause, and the body advances it by
    // its "work" through a pause of its own that the loop does not see.
    let policy =
        from_config("max = 100, base = 1s, jitter = none, backoff = constant, deadline = 3s");
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| {
        Retrier::new(&policy)
            .reset_after(Duration::ZERO) // every attempt counts as healthy
            .run(|| {
                calls.set(calls.get() + 1);
                if calls.get() < 8 {
                    Err(Busy(calls.get()))
                } else {
                    Ok(calls.get())
                }
            })
    });
    // A deadline of 3 s with pauses of 1 s would end after 3 pauses; each reset starts it anew.
    assert_eq!(result, Ok(8));
    assert_eq!(pauses, [S; 7]);
    let _ = NEVER;
}

// ---- the defaults, and the timing methods ------------------------------------------------------

#[retry]
fn attribute_defaults(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[retry]
async fn attribute_defaults_async(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[retry(jitter = none)]
async fn attribute_without_jitter(
    calls: &Cell<u32>,
    seen: &RefCell<Vec<Duration>>,
    t0: Instant,
) -> Result<u32, Busy> {
    seen.borrow_mut().push(t0.elapsed());
    fail(calls)
}

#[test]
fn a_default_retrier_retries_and_pauses_as_retry_without_arguments() {
    let policy = Policy::default();
    for seed in [1, 2, 3] {
        let (attribute_calls, retrier_calls) = (Cell::new(0), Cell::new(0));
        let attribute = testing::record_seeded(seed, || attribute_defaults(&attribute_calls));
        let retrier =
            testing::record_seeded(seed, || Retrier::new(&policy).run(|| fail(&retrier_calls)));
        assert_eq!(retrier, attribute, "seed {seed}");
        assert_eq!((retrier.0, retrier_calls.get()), (Err(Busy(4)), 4));
        // 1 s, 2 s, 4 s, each with up to half more at random.
        for (pause, nominal) in retrier.1.iter().zip([S, 2 * S, 4 * S]) {
            assert!(*pause >= nominal && *pause < nominal * 3 / 2, "{pause:?}");
        }
    }
}

#[tokio::test]
async fn a_default_retrier_retries_and_pauses_as_retry_without_arguments_async() {
    let policy = Policy::default();
    let (attribute_calls, retrier_calls) = (Cell::new(0), Cell::new(0));
    let attribute = testing::record_async(attribute_defaults_async(&attribute_calls)).await;
    let retrier =
        testing::record_async(Retrier::new(&policy).run_async(|| async { fail(&retrier_calls) }))
            .await;
    assert_eq!(retrier, attribute);
    assert_eq!((retrier.1.len(), retrier_calls.get()), (3, 4));
}

#[tokio::test(start_paused = true)]
async fn on_the_paused_clock_a_default_retrier_with_jitter_none_is_retry_jitter_none() {
    let policy = Policy::default();
    let t0 = Instant::now();
    let (calls, seen) = (Cell::new(0), RefCell::new(Vec::new()));
    let attribute = attribute_without_jitter(&calls, &seen, t0).await;
    let attribute = (attribute, calls.get(), seen.take(), t0.elapsed());

    let t0 = Instant::now();
    let calls = Cell::new(0);
    let retrier = Retrier::new(&policy)
        .jitter(Jitter::None)
        .run_async(|| async {
            seen.borrow_mut().push(t0.elapsed());
            fail(&calls)
        })
        .await;
    let retrier = (retrier, calls.get(), seen.take(), t0.elapsed());
    assert_eq!(retrier, attribute);
    assert_eq!(retrier.2, [Duration::ZERO, S, 3 * S, 7 * S]);
}

/// A body that always fails with `Busy(call)`, noting the virtual time each call started at.
fn noted(
    seen: &RefCell<Vec<Duration>>,
    t0: Instant,
) -> impl FnMut() -> std::future::Ready<Result<u32, Busy>> + '_ {
    move || {
        seen.borrow_mut().push(t0.elapsed());
        std::future::ready(Err(Busy(seen.borrow().len() as u32)))
    }
}

#[tokio::test(start_paused = true)]
async fn max_and_attempts_set_the_limit_over_the_policys() {
    let policy = from_config("max = 5, base = 1s, jitter = none");
    let seen = RefCell::new(Vec::new());
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .max(1)
        .run_async(noted(&seen, t0))
        .await;
    assert_eq!(result, Err(Busy(2)));
    assert_eq!(seen.take(), [Duration::ZERO, S]);

    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .attempts(3)
        .run_async(noted(&seen, t0))
        .await;
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(seen.take(), [Duration::ZERO, S, 3 * S]);

    // `attempts = 0` does not compile in the attribute; here it is one call, as `attempts(1)`.
    for calls in [0, 1] {
        let t0 = Instant::now();
        let result = Retrier::new(&policy)
            .attempts(calls)
            .run_async(noted(&seen, t0))
            .await;
        assert_eq!((result, seen.take()), (Err(Busy(1)), vec![Duration::ZERO]));
    }

    // The policy itself is unchanged: a retrier without the method makes its 6 calls.
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .base(MS)
        .run_async(noted(&seen, t0))
        .await;
    assert_eq!((result, seen.take().len()), (Err(Busy(6)), 6));
}

#[tokio::test(start_paused = true)]
async fn base_factor_backoff_and_max_delay_shape_the_pauses() {
    let policy = from_config("max = 3, jitter = none");
    let seen = RefCell::new(Vec::new());
    let ms = |n: u32| n * MS;

    let t0 = Instant::now();
    let _ = Retrier::new(&policy)
        .base(ms(100))
        .factor(3.0)
        .run_async(noted(&seen, t0))
        .await;
    // Pauses 100, 300, 900 ms.
    assert_eq!(seen.take(), [ms(0), ms(100), ms(400), ms(1300)]);

    let t0 = Instant::now();
    let _ = Retrier::new(&policy)
        .base(ms(100))
        .backoff(Backoff::Linear)
        .run_async(noted(&seen, t0))
        .await;
    // Pauses 100, 200, 300 ms.
    assert_eq!(seen.take(), [ms(0), ms(100), ms(300), ms(600)]);

    let t0 = Instant::now();
    let _ = Retrier::new(&policy)
        .base(ms(100))
        .max_delay(ms(250))
        .run_async(noted(&seen, t0))
        .await;
    // Pauses 100, 200, then 400 capped at 250 ms.
    assert_eq!(seen.take(), [ms(0), ms(100), ms(300), ms(550)]);
}

#[tokio::test(start_paused = true)]
async fn deadline_ends_the_loop_when_the_next_pause_would_pass_it() {
    // No deadline in the policy: the method gives this retrier one.
    let policy = from_config("max = 10, base = 1s, jitter = none");
    let seen = RefCell::new(Vec::new());
    let gave_up = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .deadline(5 * S)
        .on_give_up(|_: &Busy, why: &GiveUp| {
            gave_up.lock().unwrap().push((why.reason, why.attempts))
        })
        .run_async(noted(&seen, t0))
        .await;
    // Calls at 0, 1 s and 3 s; a pause of 4 s more would end at 7 s, past 5 s.
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(seen.take(), [Duration::ZERO, S, 3 * S]);
    assert_eq!(t0.elapsed(), 3 * S);
    assert_eq!(*gave_up.lock().unwrap(), [(GiveUpReason::Deadline, 3)]);
}

#[tokio::test(start_paused = true)]
async fn deadline_replaces_the_policys_and_clips_a_timeout() {
    let policy = from_config("max = 10, base = 1s, jitter = none, deadline = 1h");
    let calls = Cell::new(0);
    let t0 = Instant::now();
    let result = Retrier::new(&policy)
        .deadline(2500 * MS)
        .timeout(S)
        .run_async(|| async {
            calls.set(calls.get() + 1);
            tokio::time::sleep(3600 * S).await;
            Ok::<u32, CallError>(calls.get())
        })
        .await;
    // Cut off at 1 s, a pause of 1 s, then the second attempt's limit is clipped to the 0.5 s
    // left; the next pause would pass the deadline.
    assert_eq!((result, calls.get()), (Err(CallError::TimedOut), 2));
    assert_eq!(t0.elapsed(), 2500 * MS);
}

#[test]
fn deadline_in_a_sync_loop_on_the_recorders_clock() {
    let policy = from_config("max = 10, base = 1s, jitter = none");
    let calls = Cell::new(0);
    let (result, pauses) =
        testing::record(|| Retrier::new(&policy).deadline(5 * S).run(|| fail(&calls)));
    assert_eq!((result, calls.get()), (Err(Busy(3)), 3));
    assert_eq!(pauses, [S, 2 * S]);
}

// A run whose deadline or `reset_after` reads the clock before its first attempt makes that
// attempt in the out-of-line loop, not on the inline happy path: the same results either way.

#[test]
fn with_a_deadline_or_reset_after_a_first_ok_is_returned_after_one_call() {
    for policy in ["max = 3, base = 1s, deadline = 5s", "max = 3, base = 1s"] {
        let policy = from_config(policy);
        let calls = Cell::new(0);
        let (result, pauses) = testing::record(|| {
            Retrier::new(&policy)
                .reset_after(Duration::from_secs(60))
                .run(|| step(&calls, 1))
        });
        assert_eq!((result, calls.get()), (Ok(1), 1));
        assert_eq!(pauses, []);
    }
}

#[test]
fn with_a_deadline_the_classifier_and_the_pauses_are_the_same() {
    for deadline in ["", ", deadline = 1h"] {
        let policy = from_config(&format!("max = 5, base = 1s, jitter = none{deadline}"));
        let calls = Cell::new(0);
        let (result, pauses) = testing::record(|| {
            Retrier::new(&policy)
                .on(|error: &Busy| error.0 < 3)
                .run(|| fail(&calls))
        });
        assert_eq!((result, calls.get()), (Err(Busy(3)), 3), "{deadline}");
        assert_eq!(pauses, [S, 2 * S], "{deadline}");
    }
}

#[test]
fn the_elapsed_time_in_the_events_counts_from_the_first_attempt_with_or_without_a_deadline() {
    for deadline in ["", ", deadline = 1h"] {
        let policy = from_config(&format!("max = 3, base = 1s, jitter = none{deadline}"));
        let (calls, elapsed) = (Cell::new(0), Mutex::new(Vec::new()));
        let (result, pauses) = testing::record(|| {
            Retrier::new(&policy)
                .notify(|_: &Busy, event: &RetryEvent| elapsed.lock().unwrap().push(event.elapsed))
                .run(|| fail(&calls))
        });
        assert_eq!(result, Err(Busy(4)), "{deadline}");
        assert_eq!(pauses, [S, 2 * S, 4 * S], "{deadline}");
        assert_eq!(
            *elapsed.lock().unwrap(),
            [Duration::ZERO, S, 3 * S],
            "{deadline}"
        );
    }
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn handle_request_with_a_deadline(policy: &Policy, calls: &Cell<u32>) -> Result<u32, Busy> {
    Retrier::new(policy)
        .deadline(Duration::from_secs(3600))
        .run(|| fail(calls))
}

#[test]
fn with_a_deadline_inside_a_retrying_function_it_makes_one_attempt() {
    let policy = from_config("max = 5, base = 1ms");
    let calls = Cell::new(0);
    let (result, _) = testing::record(|| handle_request_with_a_deadline(&policy, &calls));
    assert_eq!((result, calls.get()), (Err(Busy(3)), 3));
}

#[test]
fn an_ok_that_on_result_accepts_is_judged_once_and_returned() {
    let policy = from_config("max = 3, base = 1s, jitter = none");
    let (calls, judged) = (Cell::new(0), AtomicU32::new(0));
    let (result, pauses) = testing::record(|| {
        Retrier::new(&policy)
            .on_result(|status: &u16| {
                judged.fetch_add(1, Ordering::Relaxed);
                *status == 503
            })
            .run(|| {
                calls.set(calls.get() + 1);
                Ok::<u16, Busy>(if calls.get() < 2 { 503 } else { 200 })
            })
    });
    assert_eq!(result, Ok(200));
    assert_eq!(
        (calls.get(), judged.into_inner()),
        (2, 2),
        "each Ok judged once"
    );
    assert_eq!(pauses, [S]);
}
