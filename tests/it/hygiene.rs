//! The expansion compiles cleanly under strict lints and cannot be broken by the user's names:
//! local modules named `core`, `std` and `retry_runtime`, items named like the runtime's, and
//! locals or parameters named like the generated ones.
#![deny(warnings, unused_qualifications, unused_results, rust_2018_idioms)]

// Local modules that shadow crates for relative paths; the expansion only uses `::` paths.
mod core {}
mod std {}
mod retry_runtime {}
mod tokio {}
// Named like the alias the expansion gives the runtime inside the function.
mod __retry_rt {}

// With a local `retry_runtime` module, a relative `use retry_runtime::…` would be ambiguous.
use ::retry_runtime::{IdempotencyKey, Transient, non_idempotent, retry};
use ::std::cell::Cell;
use ::std::ops::ControlFlow;
use ::std::time::Duration;

// Items named like the runtime's, imported or defined where the expansion lands.
#[allow(dead_code)]
struct Retry;
#[allow(dead_code)]
struct Policy;
#[allow(dead_code)]
enum Jitter {}
#[allow(dead_code)]
enum Backoff {}
#[allow(dead_code)]
fn attempt() {}
#[allow(dead_code)]
fn sleep() {}
#[allow(dead_code)]
fn sleep_blocking() {}
#[allow(dead_code)]
fn output_type() {}
#[allow(dead_code)]
const __RETRY_POLICY: u8 = 0;

/// A user function named like the default classifier, answering the opposite of the
/// `Transient` impl: the expansion must call it only when `on` names it.
fn is_transient(_: &Busy) -> bool {
    false
}

#[derive(Debug, PartialEq)]
struct Busy(u32);

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        self.0 < 100
    }
}

fn step(calls: &Cell<u32>, ok_on: u32) -> ::core::result::Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() >= ok_on {
        Ok(calls.get())
    } else {
        Err(Busy(calls.get()))
    }
}

#[retry(max = 3, base = "1ms", jitter = none, max_delay = "1s", deadline = "1s")]
fn generated_names_as_locals(calls: &Cell<u32>) -> Result<u32, Busy> {
    let __retry = 1;
    let __retry_outcome = 2;
    let __retry_result = 3;
    let __retry_pause = 4;
    let attempt = 5;
    let pause = 6;
    let policy = 7;
    let sum = __retry + __retry_outcome + __retry_result + __retry_pause + attempt + pause + policy;
    step(calls, 3).map(|n| n * 100 + sum)
}

#[test]
fn locals_named_like_generated_ones() {
    let calls = Cell::new(0);
    assert_eq!(generated_names_as_locals(&calls), Ok(328));
    assert_eq!(calls.get(), 3);
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn generated_names_as_parameters(
    __retry: &Cell<u32>,
    __retry_outcome: u32,
    __retry_pause: Duration,
    policy: ControlFlow<()>,
) -> Result<u32, Busy> {
    let _ = (__retry_pause, policy);
    step(__retry, __retry_outcome)
}

#[test]
fn parameters_named_like_generated_ones() {
    let calls = Cell::new(0);
    let answer = generated_names_as_parameters(&calls, 2, Duration::ZERO, ControlFlow::Break(()));
    assert_eq!(answer, Ok(2));
    assert_eq!(calls.get(), 2);
}

/// A policy by name (never configured: the written timings), with a parameter and a local named
/// like the runtime's lookup and the generated local.
#[retry(policy = "it.hygiene.never-configured", max = 3, base = "1ms", jitter = none)]
fn named_policy_with_generated_names(named: &Cell<u32>) -> Result<u32, Busy> {
    let __retry_named = 3;
    step(named, __retry_named)
}

#[test]
fn a_named_policy_under_strict_lints_and_names() {
    let calls = Cell::new(0);
    assert_eq!(named_policy_with_generated_names(&calls), Ok(3));
    assert_eq!(calls.get(), 3);
}

/// Without `on`, the `Transient` impl decides, not the `is_transient` fn in scope.
#[retry(max = 3, base = "1ms", jitter = none)]
fn default_classifier(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 3)
}

/// With `on = is_transient`, the user's function is the one meant.
#[retry(max = 3, base = "1ms", jitter = none, on = is_transient)]
fn named_classifier(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 3)
}

#[test]
fn the_users_is_transient_is_called_only_when_named() {
    let calls = Cell::new(0);
    assert_eq!(default_classifier(&calls), Ok(3));
    let calls = Cell::new(0);
    assert_eq!(named_classifier(&calls), Err(Busy(1)));
}

#[retry(max = 3, base = "1s", jitter, deadline = "10s")]
async fn async_generated_names(__retry: &Cell<u32>) -> Result<u32, Busy> {
    let __retry_outcome = 1;
    let attempt = __retry;
    step(attempt, 2).map(|n| n + __retry_outcome)
}

/// `#[tokio::test]` itself does not survive a local `mod tokio`, so the runtime is built here.
fn on_paused_clock<F: Future>(future: F) -> F::Output {
    ::tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
        .block_on(future)
}

#[test]
fn async_locals_named_like_generated_ones() {
    let calls = Cell::new(0);
    let (answer, elapsed) = on_paused_clock(async {
        let t0 = ::tokio::time::Instant::now();
        (async_generated_names(&calls).await, t0.elapsed())
    });
    assert_eq!(answer, Ok(3));
    assert!(elapsed >= Duration::from_secs(1) && elapsed <= Duration::from_millis(1500));
}

#[non_idempotent]
#[retry(max = 3, base = "1ms", jitter = full, on = |e: &Busy| e.0 < 2)]
fn strict_non_idempotent(calls: &Cell<u32>, key: &IdempotencyKey) -> Result<String, Busy> {
    step(calls, 3).map(|_| key.to_string())
}

#[test]
fn non_idempotent_under_strict_lints() {
    let calls = Cell::new(0);
    let key = IdempotencyKey::from("k");
    // The closure rejects the second error.
    assert_eq!(strict_non_idempotent(&calls, &key), Err(Busy(2)));
}

// Regression: a one-line async body became the tail of the generated `async` block, and rustc
// reported `unused_braces` on the user's braces (an error under `#![deny(warnings)]`).
#[rustfmt::skip]
#[retry(max = 1, base = "1ms", jitter = none)]
async fn one_line_async(calls: &Cell<u32>) -> Result<u32, Busy> { step(calls, 2) }

#[rustfmt::skip]
#[retry(max = 1, base = "1ms", jitter = none)]
fn one_line_sync(calls: &Cell<u32>) -> Result<u32, Busy> { step(calls, 2) }

#[test]
fn one_line_bodies_draw_no_unused_braces() {
    let calls = Cell::new(0);
    assert_eq!(on_paused_clock(one_line_async(&calls)), Ok(2));
    let calls = Cell::new(0);
    assert_eq!(one_line_sync(&calls), Ok(2));
}

/// A module without the prelude: the expansion names nothing from it.
mod no_prelude {
    #![no_implicit_prelude]

    #[::retry_runtime::retry(max = 2, base = "1ms", jitter = none)]
    pub(super) fn bare(
        calls: &::std::cell::Cell<u32>,
    ) -> ::std::result::Result<u32, ::std::io::Error> {
        calls.set(calls.get() + 1);
        ::std::result::Result::Err(::std::io::Error::new(
            ::std::io::ErrorKind::TimedOut,
            "slow",
        ))
    }

    #[::retry_runtime::retry(max = 2, base = "1ms", jitter = decorrelated, on = |_| true)]
    pub(super) async fn bare_async(
        calls: &::std::cell::Cell<u32>,
    ) -> ::std::result::Result<u32, ()> {
        calls.set(calls.get() + 1);
        ::std::result::Result::Err(())
    }
}

#[test]
fn a_module_without_the_prelude() {
    let calls = Cell::new(0);
    assert!(no_prelude::bare(&calls).is_err());
    assert_eq!(calls.get(), 3);
}

#[test]
fn an_async_fn_in_a_module_without_the_prelude() {
    let calls = Cell::new(0);
    assert_eq!(on_paused_clock(no_prelude::bare_async(&calls)), Err(()));
    assert_eq!(calls.get(), 3);
}

/// `retry_block!` under the same lints and names: locals named like the generated ones (which
/// the block borrows), a one-line block, an async block and a keyed one.
#[test]
fn blocks_under_strict_lints_and_names() {
    let __retry = Cell::new(0);
    let __retry_body = 2;
    let __retry_key = IdempotencyKey::from("k");
    let result =
        ::retry_runtime::retry_block!(max = 2, base = "1ms" => { step(&__retry, __retry_body) });
    assert_eq!(result, Ok(2));
    let keyed = ::retry_runtime::retry_block!(non_idempotent, key = __retry_key, base = "1ms" => {
        step(&__retry, 4)
    });
    assert_eq!(keyed, Ok(4));
    let awaited = on_paused_clock(async {
        ::retry_runtime::retry_block!(max = 2, base = "1s" => async { step(&__retry, 6) }).await
    });
    assert_eq!(awaited, Ok(6));
}
