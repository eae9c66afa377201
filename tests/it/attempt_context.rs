//! `retry_runtime::attempt()` inside a body: the running attempt's number (1 for the first call)
//! and, in a `#[non_idempotent]` function, the idempotency key, the same on every attempt. Sync
//! and async, across `.await` points and threads, per task, and per function when annotated
//! functions nest. Outside any annotated function it is a first attempt without a key.

use retry_runtime::{IdempotencyKey, attempt, non_idempotent, retry};
use std::cell::RefCell;
use std::io;
use std::sync::Mutex;
use std::time::Duration;

fn reset() -> io::Error {
    io::ErrorKind::ConnectionReset.into()
}

/// Fails until attempt `ok_on`, noting each attempt's number and key as the body sees it.
fn note(seen: &RefCell<Vec<(u32, Option<String>)>>, ok_on: u32) -> io::Result<u32> {
    let now = attempt();
    assert_eq!(now.is_retry(), now.number() > 1);
    seen.borrow_mut()
        .push((now.number(), now.key().map(|k| k.as_str().to_owned())));
    if now.number() < ok_on {
        Err(reset())
    } else {
        Ok(now.number())
    }
}

fn numbers(seen: &RefCell<Vec<(u32, Option<String>)>>) -> Vec<u32> {
    seen.borrow().iter().map(|(n, _)| *n).collect()
}

#[test]
fn outside_it_is_a_first_attempt_without_a_key() {
    assert_eq!(attempt().number(), 1);
    assert!(!attempt().is_retry());
    assert_eq!(attempt().key(), None);
}

// ---- sync --------------------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn sync_numbers(seen: &RefCell<Vec<(u32, Option<String>)>>, ok_on: u32) -> io::Result<u32> {
    note(seen, ok_on)
}

#[test]
fn sync_each_attempt_sees_its_number() {
    let seen = RefCell::new(Vec::new());
    assert_eq!(sync_numbers(&seen, 3).unwrap(), 3);
    assert_eq!(*seen.borrow(), [(1, None), (2, None), (3, None)]);
    // The frame is gone once the function returns.
    assert_eq!(attempt().number(), 1);
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", jitter = none)]
fn pay_out(key: &IdempotencyKey, seen: &RefCell<Vec<(u32, Option<String>)>>) -> io::Result<u32> {
    note(seen, 99)
}

#[test]
fn sync_the_key_is_the_same_on_every_attempt() {
    let (key, seen) = (
        IdempotencyKey::from("payout-4711"),
        RefCell::new(Vec::new()),
    );
    assert!(pay_out(&key, &seen).is_err());
    let key = Some("payout-4711".to_owned());
    assert_eq!(
        *seen.borrow(),
        [(1, key.clone()), (2, key.clone()), (3, key)]
    );
}

#[non_idempotent]
#[retry(max = 1, base = "1ms", jitter = none)]
fn pay_out_by_str(
    #[idempotency_key] reference: &str,
    seen: &RefCell<Vec<(u32, Option<String>)>>,
) -> io::Result<u32> {
    note(seen, 2)
}

#[test]
fn sync_a_marked_str_parameter_is_the_key() {
    let seen = RefCell::new(Vec::new());
    assert_eq!(pay_out_by_str("claim-17", &seen).unwrap(), 2);
    let key = Some("claim-17".to_owned());
    assert_eq!(*seen.borrow(), [(1, key.clone()), (2, key)]);
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn panics_on_first(seen: &RefCell<Vec<(u32, Option<String>)>>) -> io::Result<u32> {
    let error = note(seen, 99).expect_err("the first attempt fails");
    panic!("attempt failed: {error}");
}

#[test]
fn sync_a_panicking_body_leaves_no_frame_behind() {
    let seen = RefCell::new(Vec::new());
    let panicked =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| panics_on_first(&seen)));
    assert!(panicked.is_err());
    assert_eq!(numbers(&seen), [1]);
    assert_eq!(attempt().number(), 1);
}

// ---- nested: each function sees its own attempt --------------------------------------------------

#[retry(max = 2, base = "1ms", jitter = none, nested = retry)]
fn inner_retrying(inner: &RefCell<Vec<(u32, Option<String>)>>) -> io::Result<u32> {
    note(inner, 99)
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn inner_single(inner: &RefCell<Vec<(u32, Option<String>)>>) -> io::Result<u32> {
    note(inner, 99)
}

#[non_idempotent]
#[retry(max = 1, base = "1ms", jitter = none)]
fn outer(
    key: &IdempotencyKey,
    retrying: bool,
    outer_seen: &RefCell<Vec<(u32, Option<String>)>>,
    inner: &RefCell<Vec<(u32, Option<String>)>>,
) -> io::Result<u32> {
    let before = attempt();
    let result = if retrying {
        inner_retrying(inner)
    } else {
        inner_single(inner)
    };
    // Back in the outer body, its own attempt again.
    assert_eq!(attempt(), before);
    note(outer_seen, 99)?;
    result
}

#[test]
fn sync_nested_functions_each_see_their_own_number_and_key() {
    let key = IdempotencyKey::from("outer-key");
    let (outer_seen, inner) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
    assert!(outer(&key, true, &outer_seen, &inner).is_err());
    let k = Some("outer-key".to_owned());
    assert_eq!(*outer_seen.borrow(), [(1, k.clone()), (2, k)]);
    // `nested = retry`: 3 attempts of its own per outer attempt, numbered from 1, and no key:
    // the key belongs to the outer function.
    assert_eq!(numbers(&inner), [1, 2, 3, 1, 2, 3]);
    assert!(inner.borrow().iter().all(|(_, key)| key.is_none()));
}

#[test]
fn sync_a_single_attempt_inner_function_is_always_on_attempt_1() {
    let key = IdempotencyKey::from("outer-key");
    let (outer_seen, inner) = (RefCell::new(Vec::new()), RefCell::new(Vec::new()));
    assert!(outer(&key, false, &outer_seen, &inner).is_err());
    assert_eq!(numbers(&outer_seen), [1, 2]);
    // The outer function retries, so the inner one makes one attempt each time: attempt 1.
    assert_eq!(numbers(&inner), [1, 1]);
}

// ---- async ---------------------------------------------------------------------------------------

/// Reads the attempt before and after several `.await`s that can move the task to another
/// worker thread, and between which other tasks run on this one.
async fn note_across_awaits(trace: &Mutex<Vec<u32>>, ok_on: u32) -> io::Result<u32> {
    let before = attempt();
    for _ in 0..3 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_micros(50)).await;
        assert_eq!(attempt(), before, "the attempt changed across an .await");
    }
    trace.lock().expect("not poisoned").push(before.number());
    if before.number() < ok_on {
        Err(reset())
    } else {
        Ok(before.number())
    }
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn async_numbers(trace: &Mutex<Vec<u32>>, ok_on: u32) -> io::Result<u32> {
    note_across_awaits(trace, ok_on).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_each_attempt_sees_its_number_across_awaits_and_threads() {
    let trace = Mutex::new(Vec::new());
    assert_eq!(async_numbers(&trace, 3).await.unwrap(), 3);
    assert_eq!(*trace.lock().unwrap(), [1, 2, 3]);
    assert_eq!(attempt().number(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_concurrent_tasks_do_not_see_each_others_attempts() {
    // 64 tasks on 4 threads, each succeeding on a different attempt: their polls interleave on
    // the same threads, and each must see only its own numbers.
    let tasks: Vec<_> = (0..64u32)
        .map(|i| {
            tokio::spawn(async move {
                let trace = Mutex::new(Vec::new());
                let ok_on = i % 4 + 1;
                let got = async_numbers(&trace, ok_on).await.unwrap();
                (ok_on, got, trace.into_inner().unwrap())
            })
        })
        .collect();
    for task in tasks {
        let (ok_on, got, trace) = task.await.unwrap();
        assert_eq!(got, ok_on);
        assert_eq!(trace, (1..=ok_on).collect::<Vec<_>>());
    }
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", jitter = none)]
async fn async_pay_out(key: IdempotencyKey, keys: &Mutex<Vec<(u32, String)>>) -> io::Result<()> {
    tokio::task::yield_now().await;
    let now = attempt();
    let key = now
        .key()
        .expect("a key inside a #[non_idempotent] function");
    keys.lock()
        .expect("not poisoned")
        .push((now.number(), key.as_str().to_owned()));
    Err(reset())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_the_key_is_the_same_on_every_attempt() {
    let keys = Mutex::new(Vec::new());
    let key = IdempotencyKey::from("payout-9");
    assert!(async_pay_out(key, &keys).await.is_err());
    let key = "payout-9".to_owned();
    assert_eq!(
        *keys.lock().unwrap(),
        [(1, key.clone()), (2, key.clone()), (3, key)]
    );
}

#[retry(max = 2, base = "1ms", jitter = none, nested = retry)]
async fn async_inner(trace: &Mutex<Vec<u32>>) -> io::Result<u32> {
    note_across_awaits(trace, 99).await
}

#[retry(max = 1, base = "1ms", jitter = none)]
async fn async_outer(outer: &Mutex<Vec<u32>>, inner: &Mutex<Vec<u32>>) -> io::Result<u32> {
    let before = attempt().number();
    let result = async_inner(inner).await;
    tokio::task::yield_now().await;
    assert_eq!(attempt().number(), before);
    outer.lock().expect("not poisoned").push(before);
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_nested_functions_each_see_their_own_number() {
    let (outer, inner) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    assert!(async_outer(&outer, &inner).await.is_err());
    assert_eq!(*outer.lock().unwrap(), [1, 2]);
    assert_eq!(*inner.lock().unwrap(), [1, 2, 3, 1, 2, 3]);
}

#[retry(max = 2, base = "1ms", jitter = none, timeout = "1s")]
async fn with_timeout(trace: &Mutex<Vec<u32>>) -> io::Result<u32> {
    note_across_awaits(trace, 3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_with_a_timeout_each_attempt_sees_its_number() {
    let trace = Mutex::new(Vec::new());
    assert_eq!(with_timeout(&trace).await.unwrap(), 3);
    assert_eq!(*trace.lock().unwrap(), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_outside_between_awaits_it_is_a_first_attempt() {
    let trace = Mutex::new(Vec::new());
    let _ = async_numbers(&trace, 2).await;
    tokio::task::yield_now().await;
    assert_eq!(attempt().number(), 1);
    assert_eq!(attempt().key(), None);
}

// ---- the closure that makes an attempt (issue 29, item 1) -------------------------------------
//
// A `Retrier`'s closure (and the one `retry_block!` makes of a block) is part of the attempt it
// makes: `attempt()` read in it, before its future is made, gives that attempt's number, as a
// request built there (`get(url(attempt().number()))`) needs.

fn four_attempts() -> retry_runtime::Policy {
    retry_runtime::Policy::new()
        .max(3)
        .base(Duration::from_millis(1))
        .jitter(retry_runtime::Jitter::None)
}

#[test]
fn retrier_run_closure_reads_its_attempt() {
    let policy = four_attempts();
    let mut seen = Vec::new();
    let answer = retry_runtime::Retrier::new(&policy).run(|| {
        seen.push(attempt().number());
        if seen.len() < 4 {
            Err(reset())
        } else {
            Ok(seen.len())
        }
    });
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(seen, [1, 2, 3, 4]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retrier_run_async_closure_reads_its_attempt_before_making_the_future() {
    let policy = four_attempts();
    let seen = Mutex::new(Vec::new());
    let answer = retry_runtime::Retrier::new(&policy)
        .run_async(|| {
            // Read in the closure, not in the future: the URL of the request it makes.
            let number = attempt().number();
            let seen = &seen;
            async move {
                seen.lock().unwrap().push(number);
                if number < 4 { Err(reset()) } else { Ok(number) }
            }
        })
        .await;
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retrier_run_async_mut_and_run_hedged_closures_read_their_attempt() {
    let policy = four_attempts();
    let mut seen = Vec::new();
    let answer = retry_runtime::Retrier::new(&policy)
        .run_async_mut(async || {
            seen.push(attempt().number());
            if seen.len() < 4 {
                Err(reset())
            } else {
                Ok(seen.len())
            }
        })
        .await;
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(seen, [1, 2, 3, 4]);

    static HEDGE: retry_runtime::Hedge = retry_runtime::Hedge::after(Duration::from_secs(60));
    let hedged = Mutex::new(Vec::new());
    let answer = retry_runtime::Retrier::new(&policy)
        .run_hedged(&HEDGE, || {
            let number = attempt().number();
            hedged.lock().unwrap().push(number);
            async move { if number < 4 { Err(reset()) } else { Ok(number) } }
        })
        .await;
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(*hedged.lock().unwrap(), [1, 2, 3, 4]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn block_reads_its_attempt_everywhere_in_the_block() {
    // An async block is the body of an async closure: all of it, up to its first `.await`
    // included, runs inside the attempt.
    let mut seen = Vec::new();
    let answer = retry_runtime::retry_block!(max = 3, base = "1ms", jitter = none => async {
        let number = attempt().number();
        seen.push(number);
        tokio::task::yield_now().await;
        if number < 4 { Err(reset()) } else { Ok(number) }
    })
    .await;
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(seen, [1, 2, 3, 4]);

    let mut seen = Vec::new();
    let answer = retry_runtime::retry_block!(max = 3, base = "1ms", jitter = none => {
        seen.push(attempt().number());
        if seen.len() < 4 { Err(reset()) } else { Ok(seen.len()) }
    });
    assert_eq!(answer.unwrap(), 4);
    assert_eq!(seen, [1, 2, 3, 4]);
}
