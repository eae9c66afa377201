//! `#[retry]` on an executor that is not tokio: `futures::executor::block_on` with the
//! thread-based `futures-timer`.
//!
//! ```sh
//! cargo run --example other_runtime
//! ```
//!
//! `sleep = pause` names the function the loop awaits between attempts; it can be any
//! `Fn(Duration) -> impl Future<Output = ()>`, such as `smol::Timer::after` wrapped in an
//! `async fn`, or async-std's `task::sleep`. The deadline, if any, is then measured on
//! `std::time::Instant`.

use retry_runtime::{attempt, retry};
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

async fn pause(duration: Duration) {
    futures_timer::Delay::new(duration).await;
}

static CALLS: AtomicU32 = AtomicU32::new(0);

/// Fails twice with a dropped connection, then answers.
#[retry(max = 3, base = "100ms", jitter = none, sleep = pause)]
async fn fetch_tariffs() -> io::Result<&'static str> {
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    println!("  attempt {} (call {n})", attempt().number());
    if n < 3 {
        Err(io::ErrorKind::ConnectionReset.into())
    } else {
        Ok("tariffs 2027")
    }
}

fn main() -> io::Result<()> {
    println!("fetching tariffs on futures::executor::block_on, pausing with futures-timer");
    let started = Instant::now();
    let tariffs = futures::executor::block_on(fetch_tariffs())?;
    let waited = started.elapsed();
    println!(
        "got {tariffs:?} after {} calls and {waited:.2?}",
        CALLS.load(Ordering::SeqCst)
    );
    // Pauses of 100 ms and 200 ms, slept by futures-timer.
    assert_eq!(CALLS.load(Ordering::SeqCst), 3);
    assert!(waited >= Duration::from_millis(300));
    Ok(())
}
