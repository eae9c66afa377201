//! Polling a benchmarked future once, where it was made: every async variant of `steady.rs` and
//! `gate_steady.rs` is ready at its first poll (none of them sleeps), so no runtime's work is
//! counted.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Polls the future of `$call` once, where it was made. A macro, not a function taking the
/// future, so that the future is written in place and never moved: moving a freshly made future
/// reads it back in wide words before its narrow stores are done, a stall that would be the
/// harness's cost, not the variant's.
macro_rules! ready {
    ($call:expr) => {{
        let mut future = std::pin::pin!($call);
        $crate::poll::poll_once(future.as_mut())
    }};
}

/// Polls `future` once with a waker that does nothing; it must be ready.
#[inline(always)]
pub fn poll_once<F: Future>(future: Pin<&mut F>) -> F::Output {
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a benchmarked future was not ready at its first poll"),
    }
}
