//! `retry_block!`: the attribute's arguments and loop for a block that borrows its
//! surroundings, sync and async. Call counts, exact virtual times on tokio's paused clock, the
//! borrows (shared and mutable) of the surroundings, the attempt context, the one retrying
//! layer, the idempotency key and the events, as the attribute's tests assert them.

use crate::common::{Busy, MS, NEVER, S, fail, step};
use retry_runtime::{
    CircuitBreaker, CircuitOpen, Elapsed, GiveUp, GiveUpReason, IdempotencyKey, RetryBudget,
    RetryEvent, attempt, retry, retry_block, testing,
};
use std::cell::{Cell, RefCell};
use std::io;
use std::time::Duration;
use tokio::time::Instant;

// ---- sync ------------------------------------------------------------------------------------

#[test]
fn a_sync_block_retries_until_it_succeeds_with_the_pauses_of_the_policy() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(
        || retry_block!(max = 3, base = "1s", jitter = none => { step(&calls, 3) }),
    );
    assert_eq!(result, Ok(3));
    assert_eq!(calls.get(), 3);
    assert_eq!(pauses, [S, 2 * S]);
}

#[test]
fn a_sync_block_gives_up_with_the_last_error() {
    let calls = Cell::new(0);
    let (result, pauses) =
        testing::record(|| retry_block!(max = 2, base = "1s", jitter = none => { fail(&calls) }));
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(pauses, [S, 2 * S]);
}

#[test]
fn the_defaults_are_the_attributes() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| retry_block!(jitter = none => { fail(&calls) }));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [S, 2 * S, 4 * S]);
}

#[test]
fn a_sync_block_borrows_its_surroundings_mutably_and_sees_its_changes() {
    // The block pushes to a `Vec` it borrows mutably, and reads a `String` it borrows.
    let mut log = Vec::new();
    let path = String::from("tariffs.toml");
    let (result, _) = testing::record(|| {
        retry_block!(max = 3, base = "1ms" => {
            log.push(format!("read {path}"));
            if log.len() < 3 { Err(Busy(log.len() as u32)) } else { Ok(log.len()) }
        })
    });
    assert_eq!(result, Ok(3));
    assert_eq!(log, ["read tariffs.toml"; 3]);
    // The borrow ended with the block: both are usable again.
    log.clear();
    assert_eq!(path.len(), 12);
}

#[test]
fn question_mark_and_return_end_the_attempt_not_the_function() {
    fn parse(calls: &Cell<u32>) -> Result<u32, Busy> {
        let n = step(calls, 2)?;
        Ok(n * 10)
    }
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| {
        retry_block!(max = 3, base = "1s", jitter = none => {
            if calls.get() == 10 {
                return Ok(0);
            }
            let n = parse(&calls)?;
            Ok::<u32, Busy>(n + 1)
        })
    });
    assert_eq!(result, Ok(21));
    assert_eq!(pauses, [S]);
}

#[test]
fn a_permanent_error_is_returned_at_once() {
    let calls = Cell::new(0);
    let (result, pauses) =
        testing::record(|| retry_block!(max = 3, on = |_: &Busy| false => { fail(&calls) }));
    assert_eq!((result, calls.get(), pauses.len()), (Err(Busy(1)), 1, 0));
}

#[test]
fn a_named_classifier_needs_no_annotation() {
    fn is_transient(error: &io::Error) -> bool {
        error.kind() == io::ErrorKind::Interrupted
    }
    let calls = Cell::new(0);
    let (result, _) = testing::record(|| {
        retry_block!(max = 3, on = is_transient => {
            calls.set(calls.get() + 1);
            Err::<(), _>(io::Error::from(io::ErrorKind::Interrupted))
        })
    });
    assert_eq!(
        result.map_err(|e| e.kind()),
        Err(io::ErrorKind::Interrupted)
    );
    assert_eq!(calls.get(), 4);
}

#[test]
fn the_attempt_context_is_the_blocks() {
    let seen = RefCell::new(Vec::new());
    let (result, _) = testing::record(|| {
        retry_block!(max = 2, base = "1ms" => {
            seen.borrow_mut().push((attempt().number(), attempt().is_retry(), attempt().key().is_some()));
            Err::<(), _>(Busy(attempt().number()))
        })
    });
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(
        *seen.borrow(),
        [(1, false, false), (2, true, false), (3, true, false)]
    );
}

/// A non-idempotent block sends the same key on every attempt, and `attempt().key()` gives it.
#[test]
fn a_non_idempotent_block_lends_its_key_to_every_attempt() {
    let key = IdempotencyKey::new();
    let sent = RefCell::new(Vec::new());
    let (result, _) = testing::record(|| {
        retry_block!(non_idempotent, key = key, max = 2, base = "1ms" => {
            sent.borrow_mut().push(attempt().key().map(|k| k.to_string()));
            Err::<(), _>(Busy(attempt().number()))
        })
    });
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(*sent.borrow(), vec![Some(key.to_string()); 3]);
}

#[test]
fn a_key_can_be_what_identifies_the_operation() {
    struct Order {
        number: u64,
    }
    let order = Order { number: 4711 };
    let by_ref: &str = "claim-9";
    let (keys, _) = testing::record(|| {
        let a = retry_block!(non_idempotent, key = order.number => {
            Ok::<_, Busy>(attempt().key().map(|k| k.to_string()))
        });
        let b = retry_block!(key = *by_ref => {
            Ok::<_, Busy>(attempt().key().map(|k| k.to_string()))
        });
        (a, b)
    });
    assert_eq!(keys.0, Ok(Some("4711".to_owned())));
    assert_eq!(keys.1, Ok(Some("claim-9".to_owned())));
}

// ---- one retrying layer ------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn handle_request(calls: &Cell<u32>) -> Result<u32, Busy> {
    retry_block!(max = 2, base = "1ms" => { fail(calls) })
}

#[test]
fn a_block_inside_a_retrying_function_makes_one_attempt() {
    let calls = Cell::new(0);
    let (result, _) = testing::record(|| handle_request(&calls));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(calls.get(), 4, "4 × 1, not 4 × 3");
}

#[test]
fn a_block_inside_a_block_makes_one_attempt_and_nested_retry_opts_out() {
    let calls = Cell::new(0);
    let (result, _) = testing::record(|| {
        retry_block!(max = 3, base = "1ms" => {
            retry_block!(max = 2, base = "1ms" => { fail(&calls) })
        })
    });
    assert_eq!((result, calls.get()), (Err(Busy(4)), 4));

    let calls = Cell::new(0);
    let (result, _) = testing::record(|| {
        retry_block!(max = 1, base = "1ms" => {
            retry_block!(max = 2, base = "1ms", nested = retry => { fail(&calls) })
        })
    });
    assert_eq!((result, calls.get()), (Err(Busy(6)), 6));
}

// ---- async, on the paused clock ----------------------------------------------------------------

struct Client {
    calls: Cell<u32>,
    ok_on: u32,
}

impl Client {
    async fn coverage(&self, claim: &str) -> Result<String, Busy> {
        tokio::time::sleep(10 * MS).await;
        step(&self.calls, self.ok_on).map(|n| format!("{claim} covered on call {n}"))
    }
}

#[tokio::test(start_paused = true)]
async fn an_async_block_pauses_on_tokios_clock() {
    let client = Client {
        calls: Cell::new(0),
        ok_on: 3,
    };
    let claim = String::from("claim 4711");
    let t0 = Instant::now();
    let coverage =
        retry_block!(max = 3, base = "1s", jitter = none => async { client.coverage(&claim).await })
            .await;
    assert_eq!(coverage.as_deref(), Ok("claim 4711 covered on call 3"));
    // Three calls of 10 ms, pauses of 1 s and 2 s.
    assert_eq!(t0.elapsed(), 3 * S + 30 * MS);
}

#[tokio::test(start_paused = true)]
async fn an_async_block_gives_up_after_the_retries() {
    let client = Client {
        calls: Cell::new(0),
        ok_on: NEVER,
    };
    let t0 = Instant::now();
    let coverage = retry_block!(max = 2, base = "1s", jitter = none => async {
        client.coverage("c").await
    })
    .await;
    assert_eq!(coverage, Err(Busy(3)));
    assert_eq!(t0.elapsed(), 3 * S + 30 * MS);
}

#[tokio::test(start_paused = true)]
async fn an_async_block_borrows_its_surroundings_mutably() {
    let mut seen = Vec::new();
    let t0 = Instant::now();
    let result = retry_block!(max = 3, base = "1s", jitter = none => async {
        tokio::time::sleep(MS).await;
        seen.push(t0.elapsed());
        if seen.len() < 3 { Err(Busy(seen.len() as u32)) } else { Ok(seen.len()) }
    })
    .await;
    assert_eq!(result, Ok(3));
    assert_eq!(seen, [MS, S + 2 * MS, 3 * S + 3 * MS]);
}

#[tokio::test(start_paused = true)]
async fn an_async_move_block_owns_what_it_moves_and_lends_it_to_each_attempt() {
    let names = ["a".to_owned(), "b".to_owned()];
    let calls = Cell::new(0);
    let calls = &calls;
    let result = retry_block!(max = 3, base = "1s", jitter = none => async move {
        calls.set(calls.get() + 1);
        if calls.get() < 2 { Err(Busy(calls.get())) } else { Ok(names.join(",")) }
    })
    .await;
    assert_eq!(result.as_deref(), Ok("a,b"));
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

#[tokio::test(start_paused = true)]
async fn timeout_cuts_off_each_attempt_of_an_async_block() {
    let calls = Cell::new(0);
    let t0 = Instant::now();
    let result = retry_block!(max = 2, base = "1s", jitter = none, timeout = "100ms" => async {
        calls.set(calls.get() + 1);
        tokio::time::sleep(HOUR_OR_SHORT[calls.get() as usize - 1]).await;
        Ok::<_, CallError>(calls.get())
    })
    .await;
    // 100 ms cut off, 1 s pause, 100 ms cut off, 2 s pause, then 10 ms.
    assert_eq!(result, Ok(3));
    assert_eq!(t0.elapsed(), 3 * S + 210 * MS);
}

const HOUR_OR_SHORT: [Duration; 3] = [
    Duration::from_secs(3600),
    Duration::from_secs(3600),
    Duration::from_millis(10),
];

#[tokio::test(start_paused = true)]
async fn deadline_fallback_budget_breaker_and_hooks_in_an_async_block() {
    static BREAKER: CircuitBreaker = CircuitBreaker::new().consecutive_failures(10);
    static BUDGET: RetryBudget = RetryBudget::new();
    let notified = RefCell::new(Vec::new());
    let gave_up = RefCell::new(Vec::new());
    let t0 = Instant::now();
    let result = retry_block!(
        max = 10, base = "1s", jitter = none, deadline = "5s",
        budget = BUDGET, breaker = BREAKER,
        notify = |_: &CallError, e: &RetryEvent| notified.borrow_mut().push(e.pause),
        fallback = async |error: CallError, why: GiveUp| {
            gave_up.borrow_mut().push((why.reason, why.attempts));
            Err(error)
        }
        => async { Err::<(), _>(CallError::Busy) }
    )
    .await;
    assert_eq!(result, Err(CallError::Busy));
    // 1 s and 2 s fit in 5 s; 4 s more would end past it.
    assert_eq!(*notified.borrow(), [S, 2 * S]);
    assert_eq!(*gave_up.borrow(), [(GiveUpReason::Deadline, 3)]);
    assert_eq!(t0.elapsed(), 3 * S);
}

// ---- what the compiler and the runtime see ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_block_is_send_when_its_body_is() {
    let shared = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let task = tokio::spawn({
        let shared = shared.clone();
        async move {
            retry_block!(max = 2, base = "1ms" => async {
                let n = shared.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                tokio::task::yield_now().await;
                if n < 3 { Err(Busy(n)) } else { Ok(n) }
            })
            .await
        }
    });
    assert_eq!(task.await.expect("the task ran"), Ok(3));
}

/// An error type without `Debug`: no bound is added, and the log shows its type name.
struct Opaque;

impl retry_runtime::Transient for Opaque {
    fn is_transient(&self) -> bool {
        true
    }
}

#[test]
fn an_error_without_debug_is_logged_by_its_type_name() {
    let calls = Cell::new(0);
    let (result, events) = crate::tracing_events::capture(|| {
        retry_block!(max = 1, base = "1ms" => {
            calls.set(calls.get() + 1);
            Err::<(), _>(Opaque)
        })
    });
    assert!(result.is_err());
    assert_eq!(calls.get(), 2);
    assert!(
        events[0].field("error").ends_with("::Opaque` (no `Debug`)"),
        "{:?}",
        events[0]
    );
}

#[tokio::test(start_paused = true)]
async fn an_async_error_without_debug_compiles_too() {
    let result = retry_block!(max = 1, base = "1s" => async { Err::<(), _>(Opaque) }).await;
    assert!(result.is_err());
}

/// The attribute's events, with the block's file and line where a function has its name.
#[test]
fn the_events_are_the_attributes() {
    use tracing::Level;
    let calls = Cell::new(0);
    let line = line!() + 2;
    let (result, events) = crate::tracing_events::capture(
        || retry_block!(max = 2, base = "1ms", jitter = none => { fail(&calls) }),
    );
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(
        crate::tracing_events::levels(&events),
        [Level::INFO, Level::INFO, Level::ERROR]
    );
    let here = format!("it::block_form:{line}");
    for (n, event) in events[..2].iter().enumerate() {
        assert_eq!(event.field("function"), here);
        assert_eq!(event.field("attempt"), (n + 1).to_string());
        assert_eq!(event.field("pause"), format!("{}ms", 1 << n));
        assert_eq!(event.field("error"), format!("Busy({})", n + 1));
        assert_eq!(event.field("message"), "attempt failed; retrying");
    }
    assert_eq!(events[2].field("function"), here);
    assert_eq!(events[2].field("reason"), "retries used up");
    assert_eq!(events[2].field("message"), "giving up");

    // The happy path logs nothing.
    let (_, events) = crate::tracing_events::capture(|| retry_block!(=> { Ok::<_, Busy>(1) }));
    assert!(events.is_empty(), "{events:?}");
}
