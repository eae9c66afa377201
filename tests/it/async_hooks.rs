//! Hooks that await: `notify` and `on_give_up` as async closures or functions, in async
//! functions and `retry_block!`'s async blocks. `notify` is awaited before the pause it
//! announces, and its time is taken out of that pause; a deadline bounds it (a hook still
//! running then is dropped, and the next attempt, the last one, starts at the deadline); a
//! dropped call drops the hook's future; a panic in a hook, sync or async, is contained: the call
//! goes on as if the hook had returned, and the panic is reported once (an `ERROR` line naming
//! the function and the hook, `Event::HookPanicked` on the door's sink). A panic in the fallback,
//! whose value is the call's answer, unwinds as the body's does. `on_give_up` is awaited before
//! the fallback and before the call returns. Exact virtual times on tokio's paused clock.

use crate::common::{Busy, MS, S};
use crate::reqwest_middleware::in_process;
use crate::tower_layer::{UNAVAILABLE, full, request, scripted, stack};
use crate::tracing_events::{Captured, capture, capture_async};
use http::Method;
use retry_http::reqwest::RetryMiddleware;
use retry_http::tower::RetryLayer;
use retry_http::{HttpRetry, Resend};
use retry_runtime::engine::{self, HookFuture};
use retry_runtime::{
    CircuitOpen, Elapsed, GiveUp, GiveUpReason, Jitter, Policy, Retrier, RetryEvent, TokioTimer,
    Verdict, retry, retry_block,
};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, sleep};
use tower::ServiceExt;
use tracing::Level;

/// What a call saw, as times since `t0`.
#[derive(Default)]
struct Seen {
    /// When each attempt began.
    attempts: Mutex<Vec<Duration>>,
    /// When each `notify` began and ended, and the pause it announced.
    notified: Mutex<Vec<(Duration, Duration, Duration)>>,
    /// When `on_give_up` ended.
    gave_up: Mutex<Option<Duration>>,
}

impl Seen {
    fn attempts(&self) -> Vec<Duration> {
        self.attempts.lock().expect("not poisoned").clone()
    }
    fn notified(&self) -> Vec<(Duration, Duration, Duration)> {
        self.notified.lock().expect("not poisoned").clone()
    }
}

/// An attempt that fails at once with its number.
fn fail(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    let mut attempts = seen.attempts.lock().expect("not poisoned");
    attempts.push(t0.elapsed());
    Err(Busy(attempts.len() as u32))
}

/// A `notify` that works for `work` before it returns.
async fn slow_notify(seen: &Seen, t0: Instant, event: &RetryEvent, work: Duration) {
    let began = t0.elapsed();
    sleep(work).await;
    seen.notified
        .lock()
        .expect("not poisoned")
        .push((began, t0.elapsed(), event.pause));
}

#[retry(
    max = 2,
    base = "1s",
    jitter = none,
    notify = async |_: &Busy, event: &RetryEvent| slow_notify(seen, t0, event, 300 * MS).await,
)]
async fn notify_for_300ms(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn an_async_notify_is_awaited_before_the_pause_it_announces() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(notify_for_300ms(&seen, t0).await, Err(Busy(3)));
    // Each hook began as its attempt failed and ran 300 ms; the pause it announced went on
    // from there, so the next attempt began where the pause alone would have put it.
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(seen.attempts(), [Duration::ZERO, S, 3 * S]);
    assert_eq!(t0.elapsed(), 3 * S);
}

/// A hook that outlasts its pause: the next attempt waits for it. Not an async closure: a
/// closure that returns a future (which borrows none of its arguments).
async fn notify_for(seen: &Seen, t0: Instant, event: RetryEvent, work: Duration) {
    slow_notify(seen, t0, &event, work).await
}

#[retry(
    max = 1,
    base = "1s",
    jitter = none,
    notify = |_: &Busy, event: &RetryEvent| notify_for(seen, t0, *event, 1500 * MS),
)]
async fn notify_longer_than_the_pause(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn a_hook_longer_than_its_pause_delays_the_next_attempt_to_its_end() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(notify_longer_than_the_pause(&seen, t0).await, Err(Busy(2)));
    assert_eq!(seen.notified(), [(Duration::ZERO, 1500 * MS, S)]);
    assert_eq!(seen.attempts(), [Duration::ZERO, 1500 * MS]);
}

/// Counts when it is dropped: a hook's future that was dropped before it ended.
struct DropGuard(Arc<AtomicU32>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A `notify` that never ends; it holds `guard` while it waits.
async fn never_ends(started: &AtomicU32, dropped: &Arc<AtomicU32>) {
    started.fetch_add(1, Ordering::SeqCst);
    let _guard = DropGuard(Arc::clone(dropped));
    std::future::pending::<()>().await
}

#[retry(
    max = 5,
    base = "1s",
    jitter = none,
    deadline = "2s",
    notify = async |_: &Busy, _: &RetryEvent| never_ends(started, dropped).await,
)]
async fn endless_hook_with_a_deadline(
    seen: &Seen,
    t0: Instant,
    started: &AtomicU32,
    dropped: &Arc<AtomicU32>,
) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_a_hook_and_the_last_attempt_starts_at_it() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let (started, dropped) = (AtomicU32::new(0), Arc::new(AtomicU32::new(0)));
    let result = endless_hook_with_a_deadline(&seen, t0, &started, &dropped).await;
    // The hook after the first attempt was cut off at the deadline (2 s) and dropped; the
    // second attempt, the last the deadline allows, began then, and the loop gave up after it.
    assert_eq!(result, Err(Busy(2)));
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S]);
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(t0.elapsed(), 2 * S);
}

#[retry(
    max = 5,
    base = "1s",
    notify = async |_: &Busy, _: &RetryEvent| never_ends(started, dropped).await,
)]
async fn endless_hook(
    seen: &Seen,
    t0: Instant,
    started: &AtomicU32,
    dropped: &Arc<AtomicU32>,
) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_drops_its_hooks_future() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let (started, dropped) = (AtomicU32::new(0), Arc::new(AtomicU32::new(0)));
    // Without a deadline the loop waits for the hook; the caller's own timeout drops the call.
    let call = endless_hook(&seen, t0, &started, &dropped);
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(t0.elapsed(), 5 * S);
    assert_eq!(seen.attempts(), [Duration::ZERO]);
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

// ---- A hook's panic is contained. ----

/// The hooks' panics that the loop contained, as its `ERROR` lines name them: (function, hook).
fn hook_panics(events: &[Captured]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| Some((e.level, e.get("function")?, e.get("hook")?)))
        .map(|(level, function, hook)| {
            assert_eq!(level, Level::ERROR);
            (function.to_owned(), hook.to_owned())
        })
        .collect()
}

fn named(function: &str, hook: &str) -> (String, String) {
    (function.to_owned(), hook.to_owned())
}

/// The third attempt succeeds.
fn third_succeeds(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    match fail(seen, t0) {
        Err(Busy(3)) => Ok(3),
        other => other,
    }
}

#[retry(
    max = 2,
    base = "1s",
    jitter = none,
    notify = async |error: &Busy, _: &RetryEvent| {
        sleep(10 * MS).await;
        if error.0 == 1 {
            panic!("the hook panicked");
        }
    },
)]
async fn panicking_notify(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    third_succeeds(seen, t0)
}

#[test]
fn an_async_notifys_panic_is_contained_and_reported_once() {
    let seen = Seen::default();
    let (result, events) = capture_async(|| async {
        let t0 = Instant::now();
        let result = panicking_notify(&seen, t0).await;
        (result, seen.attempts(), t0.elapsed())
    });
    // The pauses (1 s, 2 s) as if the hook had returned: its 10 ms inside the first.
    assert_eq!(result, (Ok(3), vec![Duration::ZERO, S, 3 * S], 3 * S));
    assert_eq!(hook_panics(&events), [named("panicking_notify", "notify")]);
}

#[retry(
    max = 2,
    base = "1ms",
    jitter = none,
    notify = |error: &Busy, _: &RetryEvent| assert_ne!(error.0, 1, "the hook panicked"),
)]
fn panicking_sync_notify(calls: &AtomicU32) -> Result<u32, Busy> {
    match calls.fetch_add(1, Ordering::SeqCst) + 1 {
        3 => Ok(3),
        n => Err(Busy(n)),
    }
}

#[test]
fn a_sync_notifys_panic_is_contained_and_reported_once() {
    let calls = AtomicU32::new(0);
    let (result, events) = capture(|| panicking_sync_notify(&calls));
    assert_eq!(result, Ok(3));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        hook_panics(&events),
        [named("panicking_sync_notify", "notify")]
    );
}

#[retry(
    max = 1,
    base = "1ms",
    on_give_up = |error: &Busy| assert_ne!(error.0, 2, "the hook panicked"),
    fallback = |error: Busy, _| Ok(error.0 * 10),
)]
fn panicking_sync_give_up(calls: &AtomicU32) -> Result<u32, Busy> {
    Err(Busy(calls.fetch_add(1, Ordering::SeqCst) + 1))
}

#[test]
fn a_sync_on_give_ups_panic_is_contained_and_the_fallback_answers() {
    let calls = AtomicU32::new(0);
    let (result, events) = capture(|| panicking_sync_give_up(&calls));
    assert_eq!(result, Ok(20));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        hook_panics(&events),
        [named("panicking_sync_give_up", "on_give_up")]
    );
}

#[retry(
    max = 1,
    base = "1s",
    jitter = none,
    on_give_up = async |_: &Busy, _: &GiveUp| {
        sleep(200 * MS).await;
        panic!("the hook panicked");
    },
    fallback = |error: Busy, why: GiveUp| Ok(error.0 * 10 + why.attempts),
)]
async fn panicking_give_up(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[test]
fn an_async_on_give_ups_panic_is_contained_and_the_fallback_answers() {
    let seen = Seen::default();
    let (result, events) = capture_async(|| async {
        let t0 = Instant::now();
        let result = panicking_give_up(&seen, t0).await;
        (result, seen.attempts(), t0.elapsed())
    });
    assert_eq!(result, (Ok(22), vec![Duration::ZERO, S], S + 200 * MS));
    assert_eq!(
        hook_panics(&events),
        [named("panicking_give_up", "on_give_up")]
    );
}

#[retry(max = 1, base = "1s", fallback = |_: Busy, _| -> Result<u32, Busy> { panic!("the fallback panicked") })]
async fn panicking_fallback() -> Result<u32, Busy> {
    Err(Busy(1))
}

#[tokio::test(start_paused = true)]
async fn a_fallbacks_panic_unwinds_out_of_the_call_as_the_bodys_does() {
    // The fallback's value is the call's answer: there is none to go on with.
    let panic = tokio::spawn(panicking_fallback())
        .await
        .expect_err("the fallback's panic ends the call");
    assert_eq!(
        panic.into_panic().downcast_ref::<&str>(),
        Some(&"the fallback panicked")
    );
}

#[retry(
    max = 1,
    base = "1s",
    jitter = none,
    on_give_up = async |error: &Busy, why: &GiveUp| {
        assert_eq!((error, why.reason), (&Busy(2), GiveUpReason::Exhausted));
        sleep(500 * MS).await;
        *seen.gave_up.lock().expect("not poisoned") = Some(t0.elapsed());
    },
    fallback = |error: Busy, _| {
        // The hook ended before the fallback runs.
        assert_eq!(*seen.gave_up.lock().expect("not poisoned"), Some(1500 * MS));
        Err(Busy(error.0 * 10))
    },
)]
async fn awaited_give_up(seen: &Seen, t0: Instant) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn an_async_on_give_up_is_awaited_before_the_fallback_and_the_return() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(awaited_give_up(&seen, t0).await, Err(Busy(20)));
    assert_eq!(seen.attempts(), [Duration::ZERO, S]);
    assert_eq!(*seen.gave_up.lock().expect("not poisoned"), Some(1500 * MS));
    assert_eq!(t0.elapsed(), 1500 * MS);
}

#[retry(
    max = 1,
    base = "1s",
    on_give_up = async |_: &Busy| never_ends(started, dropped).await,
)]
async fn endless_give_up(
    seen: &Seen,
    t0: Instant,
    started: &AtomicU32,
    dropped: &Arc<AtomicU32>,
) -> Result<u32, Busy> {
    fail(seen, t0)
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_drops_its_on_give_up_future() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let (started, dropped) = (AtomicU32::new(0), Arc::new(AtomicU32::new(0)));
    let call = endless_give_up(&seen, t0, &started, &dropped);
    assert!(tokio::time::timeout(10 * S, call).await.is_err());
    assert_eq!(seen.attempts().len(), 2);
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_blocks_async_hooks_are_awaited_as_a_functions() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let finished = AtomicBool::new(false);
    let result = retry_block!(
        max = 2,
        base = "1s",
        jitter = none,
        notify = async |_: &Busy, event: &RetryEvent| slow_notify(&seen, t0, event, 300 * MS).await,
        on_give_up = async |_: &Busy| {
            sleep(200 * MS).await;
            finished.store(true, Ordering::SeqCst);
        } => async { fail(&seen, t0) }
    )
    .await;
    assert_eq!(result, Err(Busy(3)));
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(seen.attempts(), [Duration::ZERO, S, 3 * S]);
    assert_eq!(t0.elapsed(), 3 * S + 200 * MS);
}

static NOTIFIED: AtomicU32 = AtomicU32::new(0);

/// An `async fn` as a hook, named by its path.
async fn count_retry(error: &Busy, event: &RetryEvent) {
    sleep(MS).await;
    NOTIFIED.fetch_add(error.0 * 10 + event.attempt, Ordering::SeqCst);
}

/// The call's future is `Send` with async hooks, so that it can be spawned.
#[retry(
    max = 1,
    base = "1ms",
    notify = count_retry,
    on_give_up = async |_: &Busy| sleep(MS).await,
)]
async fn spawnable() -> Result<u32, Busy> {
    Err(Busy(1))
}

#[tokio::test(start_paused = true)]
async fn a_call_with_async_hooks_can_be_spawned() {
    assert_eq!(
        tokio::spawn(spawnable()).await.expect("the call ends"),
        Err(Busy(1))
    );
    assert_eq!(NOTIFIED.load(Ordering::SeqCst), 11);
}

// ---- The `Retrier`: its hooks are boxed, so an async one returns a `Send` future that owns
// what it needs. ----

/// A `Retrier` `notify` that works for `work`, on shared state.
fn retrier_notify(
    seen: &Arc<Seen>,
    t0: Instant,
    work: Duration,
) -> impl Fn(&Busy, &RetryEvent) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync
{
    let seen = Arc::clone(seen);
    move |_: &Busy, event: &RetryEvent| {
        let (seen, event) = (Arc::clone(&seen), *event);
        Box::pin(async move { slow_notify(&seen, t0, &event, work).await })
    }
}

#[tokio::test(start_paused = true)]
async fn a_retriers_async_hooks_are_awaited_as_the_attributes() {
    let (t0, seen) = (Instant::now(), Arc::new(Seen::default()));
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let gave_up = Arc::new(Mutex::new(None));
    let result = Retrier::new(&policy)
        .notify(retrier_notify(&seen, t0, 300 * MS))
        .on_give_up({
            let gave_up = Arc::clone(&gave_up);
            move |_: &Busy, why: &GiveUp| {
                let (gave_up, attempts) = (Arc::clone(&gave_up), why.attempts);
                async move {
                    sleep(200 * MS).await;
                    *gave_up.lock().expect("not poisoned") = Some((attempts, t0.elapsed()));
                }
            }
        })
        .run_async(|| async { fail(&seen, t0) })
        .await;
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(seen.attempts(), [Duration::ZERO, S, 3 * S]);
    // `on_give_up` ended before the call returned.
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        Some((3, 3 * S + 200 * MS))
    );
    assert_eq!(t0.elapsed(), 3 * S + 200 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_retriers_async_hook_is_bounded_by_the_deadline_and_dropped_with_the_call() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let started = Arc::new(AtomicU32::new(0));
    let dropped = Arc::new(AtomicU32::new(0));
    let endless = {
        let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
        move |_: &Busy, _: &RetryEvent| {
            let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
            async move { never_ends(&started, &dropped).await }
        }
    };
    let policy = Policy::new().max(5).base(S).jitter(Jitter::None);
    // With a deadline: cut off at 2 s, the second attempt then, and the end.
    let result = Retrier::new(&policy)
        .deadline(2 * S)
        .notify(endless.clone())
        .run_async(|| async { fail(&seen, t0) })
        .await;
    assert_eq!(result, Err(Busy(2)));
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S]);
    assert_eq!(started.load(Ordering::SeqCst), 1);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // Without one: the loop waits; the caller's timeout drops the call and the hook.
    let call = Retrier::new(&policy)
        .notify(endless)
        .run_async(|| async { fail(&seen, t0) });
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S, 2 * S]);
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn a_retriers_panicking_hooks_are_contained_and_reported_once() {
    let seen = Seen::default();
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let (result, events) = capture_async(|| async {
        let t0 = Instant::now();
        let result = Retrier::new(&policy)
            .name("retrier")
            .notify(|error: &Busy, _: &RetryEvent| {
                let first = error.0 == 1;
                async move {
                    sleep(MS).await;
                    assert!(!first, "the hook panicked");
                }
            })
            .on_give_up(|error: &Busy| assert_ne!(error.0, 3, "the hook panicked"))
            .run_async(|| async { fail(&seen, t0) })
            .await;
        (result, seen.attempts(), t0.elapsed())
    });
    // Every attempt made, at the policy's times, as if the hooks had returned.
    assert_eq!(
        result,
        (Err(Busy(3)), vec![Duration::ZERO, S, 3 * S], 3 * S)
    );
    assert_eq!(
        hook_panics(&events),
        [named("retrier", "notify"), named("retrier", "on_give_up")]
    );
}

// ---- The engine's `DynHooks`, which the HTTP and gRPC doors build on. ----

#[derive(Debug, PartialEq)]
enum DoorError {
    Busy(u32),
    Other,
}

impl From<Elapsed> for DoorError {
    fn from(_: Elapsed) -> Self {
        DoorError::Other
    }
}

impl From<CircuitOpen> for DoorError {
    fn from(_: CircuitOpen) -> Self {
        DoorError::Other
    }
}

#[tokio::test(start_paused = true)]
async fn the_engines_async_hooks_are_awaited_as_the_attributes() {
    let (t0, seen) = (Instant::now(), Arc::new(Seen::default()));
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let settings = engine::Settings::new(&policy);
    let classify = |_: &DoorError| Verdict::Retry;
    // The door keeps the hooks; each future owns what it needs (`'static`).
    let notify = {
        let seen = Arc::clone(&seen);
        move |_: Result<&u32, &DoorError>, event: &RetryEvent| -> HookFuture<'static> {
            let (seen, event) = (Arc::clone(&seen), *event);
            Box::pin(async move { slow_notify(&seen, t0, &event, 300 * MS).await })
        }
    };
    let gave_up = Arc::new(Mutex::new(None));
    let on_give_up = {
        let gave_up = Arc::clone(&gave_up);
        move |_: Result<&u32, &DoorError>, _: &GiveUp| -> HookFuture<'static> {
            let gave_up = Arc::clone(&gave_up);
            Box::pin(async move {
                sleep(200 * MS).await;
                *gave_up.lock().expect("not poisoned") = Some(t0.elapsed());
            })
        }
    };
    let hooks = engine::DynHooks::new(&classify)
        .notify_async(Some(&notify))
        .on_give_up_async(Some(&on_give_up));
    let result = engine::drive(&settings, hooks, TokioTimer, || async {
        fail(&seen, t0).map_err(|Busy(n)| DoorError::Busy(n))
    })
    .await;
    assert_eq!(result, Err(DoorError::Busy(3)));
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(seen.attempts(), [Duration::ZERO, S, 3 * S]);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        Some(3 * S + 200 * MS)
    );
}

#[tokio::test(start_paused = true)]
async fn the_engines_async_hook_is_bounded_by_the_deadline_and_dropped_with_the_call() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let (started, dropped) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let classify = |_: &DoorError| Verdict::Retry;
    let notify = |_: Result<&u32, &DoorError>, _: &RetryEvent| -> HookFuture<'static> {
        let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
        Box::pin(async move { never_ends(&started, &dropped).await })
    };
    let policy = Policy::new().max(5).base(S).jitter(Jitter::None);
    let attempt = || async { fail(&seen, t0).map_err(|Busy(n)| DoorError::Busy(n)) };
    // With a deadline: the hook is cut off at 2 s, and the last attempt made then.
    let bounded = policy.deadline(2 * S);
    let hooks = engine::DynHooks::new(&classify).notify_async(Some(&notify));
    let result = engine::drive(&engine::Settings::new(&bounded), hooks, TokioTimer, attempt).await;
    assert_eq!(result, Err(DoorError::Busy(2)));
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S]);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // Without one: awaited as long as it runs; the caller's timeout drops the call and the hook.
    let hooks = engine::DynHooks::new(&classify).notify_async(Some(&notify));
    let settings = engine::Settings::new(&policy);
    let call = engine::drive(&settings, hooks, TokioTimer, attempt);
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S, 2 * S]);
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn the_engines_panicking_hooks_are_contained_logged_and_counted() {
    let seen = Arc::new(Seen::default());
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let counters = engine::Counters::default();
    let settings = engine::Settings::new(&policy).name("door").sink(&counters);
    let classify = |_: &DoorError| Verdict::Retry;
    let notify = |_: Result<&u32, &DoorError>, event: &RetryEvent| -> HookFuture<'static> {
        let first = event.attempt == 1;
        Box::pin(async move {
            sleep(MS).await;
            assert!(!first, "the hook panicked");
        })
    };
    let on_give_up = |_: Result<&u32, &DoorError>, _: &GiveUp| panic!("the hook panicked");
    let (result, events) = capture_async(|| async {
        let t0 = Instant::now();
        let hooks = engine::DynHooks::new(&classify)
            .notify_async(Some(&notify))
            .on_give_up(Some(&on_give_up));
        let result = engine::drive(&settings, hooks, TokioTimer, || async {
            fail(&seen, t0).map_err(|Busy(n)| DoorError::Busy(n))
        })
        .await;
        (result, seen.attempts(), t0.elapsed())
    });
    assert_eq!(
        result,
        (
            Err(DoorError::Busy(3)),
            vec![Duration::ZERO, S, 3 * S],
            3 * S
        )
    );
    assert_eq!(
        hook_panics(&events),
        [named("door", "notify"), named("door", "on_give_up")]
    );
    // The door's sink hears each panic once.
    assert_eq!(counters.hooks_panicked(), 2);
}

// ---- The HTTP doors: `HttpRetry::notify_async` and `on_give_up_async`, through the tower layer
// and the reqwest middleware. ----

/// A door's async hooks on shared state: `notify` works 300 ms, `on_give_up` 200 ms; each
/// records when it began and ended.
fn http_hooks(config: HttpRetry, t0: Instant, seen: &Arc<Seen>) -> HttpRetry {
    let (notified, gave_up) = (Arc::clone(seen), Arc::clone(seen));
    config
        .notify_async(move |resend: &Resend| {
            let (seen, event) = (Arc::clone(&notified), resend.event);
            async move { slow_notify(&seen, t0, &event, 300 * MS).await }
        })
        .on_give_up_async(move |_: &GiveUp| {
            let seen = Arc::clone(&gave_up);
            async move {
                sleep(200 * MS).await;
                *seen.gave_up.lock().expect("not poisoned") = Some(t0.elapsed());
            }
        })
}

#[tokio::test(start_paused = true)]
async fn the_reqwest_middlewares_async_hooks_are_awaited_as_the_attributes() {
    let (t0, seen) = (Instant::now(), Arc::new(Seen::default()));
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let ours = RetryMiddleware::new(http_hooks(HttpRetry::new(policy), t0, &seen));
    let (client, calls) = in_process(ours, &[(Duration::ZERO, 503)]);
    let response = client.get("http://payments/pay").send().await;
    assert_eq!(response.expect("an answer").status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(
        *seen.gave_up.lock().expect("not poisoned"),
        Some(3 * S + 200 * MS)
    );
    assert_eq!(t0.elapsed(), 3 * S + 200 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_reqwest_middlewares_async_hook_is_bounded_by_the_deadline_and_dropped_with_the_call() {
    let t0 = Instant::now();
    let (started, dropped) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let endless = |started: &Arc<AtomicU32>, dropped: &Arc<AtomicU32>| {
        let (started, dropped) = (Arc::clone(started), Arc::clone(dropped));
        move |_: &Resend| {
            let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
            async move { never_ends(&started, &dropped).await }
        }
    };
    let policy = Policy::new().max(5).base(S).jitter(Jitter::None);
    // With a deadline: the hook is cut off at 2 s, the last attempt made then.
    let config = HttpRetry::new(policy.deadline(2 * S)).notify_async(endless(&started, &dropped));
    let (client, calls) = in_process(RetryMiddleware::new(config), &[(Duration::ZERO, 503)]);
    let response = client.get("http://payments/pay").send().await;
    assert_eq!(response.expect("an answer").status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(t0.elapsed(), 2 * S);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // Without one: the caller's timeout drops the call, and the hook with it.
    let config = HttpRetry::new(policy).notify_async(endless(&started, &dropped));
    let (client, calls) = in_process(RetryMiddleware::new(config), &[(Duration::ZERO, 503)]);
    let call = client.get("http://payments/pay").send();
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_tower_layers_async_hooks_are_awaited_as_the_attributes() {
    let (url, received) = scripted(&[UNAVAILABLE]).await;
    let (t0, seen) = (Instant::now(), Arc::new(Seen::default()));
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let (service, _) = stack(RetryLayer::new(http_hooks(
        HttpRetry::new(policy),
        t0,
        &seen,
    )));
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 503);
    assert_eq!(received.lock().expect("not poisoned").len(), 3);
    assert_eq!(
        seen.notified(),
        [(Duration::ZERO, 300 * MS, S), (S, S + 300 * MS, 2 * S)]
    );
    assert_eq!(
        *seen.gave_up.lock().expect("not poisoned"),
        Some(3 * S + 200 * MS)
    );
    assert_eq!(t0.elapsed(), 3 * S + 200 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_tower_layers_panicking_async_hook_is_contained_and_counted() {
    let (url, received) = scripted(&[UNAVAILABLE]).await;
    let t0 = Instant::now();
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let config = HttpRetry::new(policy).notify_async(|_: &Resend| async {
        sleep(MS).await;
        panic!("the hook panicked");
    });
    let layer = RetryLayer::new(config);
    let counters = layer.counters();
    let (service, _) = stack(layer);
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    // Every attempt made, at the policy's times; each pause's panic counted once.
    assert_eq!(response.status(), 503);
    assert_eq!(received.lock().expect("not poisoned").len(), 3);
    assert_eq!(t0.elapsed(), 3 * S);
    assert_eq!(counters.hooks_panicked(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_tower_layers_async_hook_is_bounded_by_the_deadline_and_dropped_with_the_call() {
    let (url, received) = scripted(&[UNAVAILABLE]).await;
    let t0 = Instant::now();
    let (started, dropped) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let endless = |started: &Arc<AtomicU32>, dropped: &Arc<AtomicU32>| {
        let (started, dropped) = (Arc::clone(started), Arc::clone(dropped));
        move |_: &Resend| {
            let (started, dropped) = (Arc::clone(&started), Arc::clone(&dropped));
            async move { never_ends(&started, &dropped).await }
        }
    };
    let policy = Policy::new().max(5).base(S).jitter(Jitter::None);
    let config = HttpRetry::new(policy.deadline(2 * S)).notify_async(endless(&started, &dropped));
    let (service, _) = stack(RetryLayer::new(config));
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 503);
    assert_eq!(received.lock().expect("not poisoned").len(), 2);
    assert_eq!(t0.elapsed(), 2 * S);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    let config = HttpRetry::new(policy).notify_async(endless(&started, &dropped));
    let (service, _) = stack(RetryLayer::new(config));
    let call = service.oneshot(request(Method::GET, &url, full("")));
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(received.lock().expect("not poisoned").len(), 3);
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_reqwest_middlewares_panicking_async_hooks_are_contained() {
    let t0 = Instant::now();
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let config = HttpRetry::new(policy)
        .notify_async(|resend: &Resend| {
            let first = resend.event.attempt == 1;
            async move {
                sleep(MS).await;
                assert!(!first, "the hook panicked");
            }
        })
        .on_give_up_async(|_: &GiveUp| async {
            sleep(MS).await;
            panic!("the hook panicked");
        });
    let middleware = RetryMiddleware::new(config);
    let counters = middleware.counters();
    let (client, calls) = in_process(middleware, &[(Duration::ZERO, 503)]);
    let response = client.get("http://payments/pay").send().await;
    // The answer, after every attempt, as if the hooks had returned: the pauses 1 s and 2 s,
    // then `on_give_up`'s 1 ms before it panicked.
    assert_eq!(response.expect("an answer").status(), 503);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(t0.elapsed(), 3 * S + MS);
    // The door counts each panic once: `notify`'s (the first pause) and `on_give_up`'s.
    assert_eq!(counters.hooks_panicked(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_blocks_async_hook_is_bounded_by_the_deadline_and_dropped_with_the_call() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let (started, dropped) = (AtomicU32::new(0), Arc::new(AtomicU32::new(0)));
    let result = retry_block!(
        max = 5,
        base = "1s",
        jitter = none,
        deadline = "2s",
        notify = async |_: &Busy, _: &RetryEvent| never_ends(&started, &dropped).await
            => async { fail(&seen, t0) }
    )
    .await;
    assert_eq!(result, Err(Busy(2)));
    assert_eq!(seen.attempts(), [Duration::ZERO, 2 * S]);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    let call = async {
        retry_block!(
            max = 5,
            base = "1s",
            notify = async |_: &Busy, _: &RetryEvent| never_ends(&started, &dropped).await
                => async { fail(&seen, t0) }
        )
        .await
    };
    assert!(tokio::time::timeout(5 * S, call).await.is_err());
    assert_eq!(started.load(Ordering::SeqCst), 2);
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn a_blocks_panicking_async_hook_is_contained_and_reported_once() {
    let seen = Seen::default();
    let (result, events) = capture_async(|| async {
        let t0 = Instant::now();
        let result = retry_block!(
            name = "block",
            max = 2,
            base = "1s",
            jitter = none,
            notify = async |error: &Busy, _: &RetryEvent| {
                sleep(MS).await;
                assert_ne!(error.0, 1, "the hook panicked");
            } => async { third_succeeds(&seen, t0) }
        )
        .await;
        (result, seen.attempts(), t0.elapsed())
    });
    assert_eq!(result, (Ok(3), vec![Duration::ZERO, S, 3 * S], 3 * S));
    assert_eq!(hook_panics(&events), [named("block", "notify")]);
}

#[test]
fn a_blocking_engine_call_does_not_call_an_async_hook() {
    let policy = Policy::new().max(2).base(S).jitter(Jitter::None);
    let settings = engine::Settings::new(&policy);
    let classify = |_: &DoorError| Verdict::Retry;
    let called = AtomicU32::new(0);
    let notify = |_: Result<&u32, &DoorError>, _: &RetryEvent| -> HookFuture<'static> {
        called.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(()))
    };
    let hooks = engine::DynHooks::new(&classify).notify_async(Some(&notify));
    let attempts = AtomicU32::new(0);
    // Recorded, not slept: the pauses are the loop's as if no hook were there.
    let (result, pauses) = retry_runtime::testing::record(|| {
        engine::drive_blocking(&settings, hooks, || {
            Err::<u32, _>(DoorError::Busy(attempts.fetch_add(1, Ordering::SeqCst) + 1))
        })
    });
    assert_eq!(result, Err(DoorError::Busy(3)));
    assert_eq!(pauses, [S, 2 * S]);
    assert_eq!(called.load(Ordering::SeqCst), 0);
}
