//! Why the async happy path costs more than a plain `async fn`, and what would fix it:
//! `cargo bench -p retry-bench --bench future_size`.
//!
//! Each variant is the expansion of `#[retry(max = 3, base = "1s")]` written out by hand, changed
//! in one way. The generated future embeds tokio's `Sleep` (96 bytes) and the loop state, and its
//! size, not the work done, sets the happy path's cost (a 192-byte dummy future in place of
//! `Sleep` costs the same). Sizes are printed before the measurements.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use retry_runtime::__private as rt;
use retry_runtime::{Transient, retry};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};

#[derive(Debug)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

const POLICY: rt::Policy = rt::Policy::new().max_retries(3);

#[inline(always)]
fn answer(x: u64) -> Result<u64, Busy> {
    Ok(x.wrapping_mul(3))
}

#[inline(never)]
async fn plain(x: u64) -> Result<u64, Busy> {
    answer(x)
}

#[inline(never)]
#[retry(max = 3, base = "1s")]
async fn attribute(x: u64) -> Result<u64, Busy> {
    answer(x)
}

/// Today's expansion with the pause boxed: `Sleep` leaves the state machine, and a box is
/// allocated only when a pause is taken.
#[inline(never)]
async fn boxed_sleep(x: u64) -> Result<u64, Busy> {
    let mut state = rt::Retry::start_async(&POLICY);
    loop {
        let outcome = async { answer(x) }.await;
        match state.next(outcome, rt::is_transient) {
            rt::ControlFlow::Break(result) => return result,
            rt::ControlFlow::Continue(pause) => Box::pin(rt::sleep(pause)).await,
        }
    }
}

/// Also boxed, and the first attempt runs before any loop state exists.
#[inline(never)]
async fn first_attempt_first(x: u64) -> Result<u64, Busy> {
    let mut outcome = async { answer(x) }.await;
    if outcome.is_ok() {
        return outcome;
    }
    let mut state = rt::Retry::start_async(&POLICY);
    loop {
        match state.next(outcome, rt::is_transient) {
            rt::ControlFlow::Break(result) => return result,
            rt::ControlFlow::Continue(pause) => Box::pin(rt::sleep(pause)).await,
        }
        outcome = async { answer(x) }.await;
    }
}

/// The control: no `Sleep` at all, a 96-byte future that is ready at once in its place.
#[inline(never)]
async fn dummy_96_bytes(x: u64) -> Result<u64, Busy> {
    let mut state = rt::Retry::start_async(&POLICY);
    loop {
        let outcome = async { answer(x) }.await;
        match state.next(outcome, rt::is_transient) {
            rt::ControlFlow::Break(result) => return result,
            rt::ControlFlow::Continue(pause) => Ready96([pause.as_nanos() as u64; 12]).await,
        }
    }
}

struct Ready96([u64; 12]);

impl Future for Ready96 {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        black_box(&self.0);
        Poll::Ready(())
    }
}

fn future_size(c: &mut Criterion) {
    eprintln!(
        "future sizes (bytes): plain {}, attribute {}, boxed_sleep {}, first_attempt_first {}, \
         dummy_96_bytes {}; tokio::time::Sleep {}",
        size_of_val(&plain(1)),
        size_of_val(&attribute(1)),
        size_of_val(&boxed_sleep(1)),
        size_of_val(&first_attempt_first(1)),
        size_of_val(&dummy_96_bytes(1)),
        size_of::<tokio::time::Sleep>(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let mut g = c.benchmark_group("future size");
    g.bench_function("plain", |b| b.to_async(&rt).iter(|| plain(black_box(7))));
    g.bench_function("attribute", |b| {
        b.to_async(&rt).iter(|| attribute(black_box(7)))
    });
    g.bench_function("boxed sleep", |b| {
        b.to_async(&rt).iter(|| boxed_sleep(black_box(7)))
    });
    g.bench_function("first attempt first", |b| {
        b.to_async(&rt).iter(|| first_attempt_first(black_box(7)))
    });
    g.bench_function("dummy 96 bytes", |b| {
        b.to_async(&rt).iter(|| dummy_96_bytes(black_box(7)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = future_size
}
criterion_main!(benches);
