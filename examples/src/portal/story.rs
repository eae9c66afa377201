//! How the portal tells its story on the terminal: scenes, the time within a scene, and the
//! lines the retry loop's hooks print.

use retry_runtime::{GiveUp, RetryEvent};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// When the current scene began. The attempts print their time from it, so that the output
/// shows the pauses as they were really taken, next to the pauses `notify` announced.
static SCENE_STARTED: Mutex<Option<Instant>> = Mutex::new(None);

/// Prints a scene's title and starts its clock.
pub fn scene(number: &str, title: &str) {
    println!("\nScene {number}: {title}");
    *SCENE_STARTED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
}

/// Seconds since [`scene`] was last called (or since the process started its first scene).
pub fn scene_time() -> f64 {
    let mut started = SCENE_STARTED.lock().unwrap_or_else(PoisonError::into_inner);
    started
        .get_or_insert_with(Instant::now)
        .elapsed()
        .as_secs_f64()
}

/// The `notify` hook of the retried functions. The loop calls it after a transient failure and
/// before the pause, so the line appears while the portal waits, and the pause it names is the
/// one about to be taken, jitter included.
pub fn announce_pause<E: fmt::Display>(error: &E, event: &RetryEvent) {
    println!(
        "      {error} (transient); next attempt in {:.2} s",
        event.pause.as_secs_f64()
    );
}

/// The `on_give_up` hook: the loop gives up on a failure it could have retried, and `why` says
/// why (retries used up, the breaker open, ...). The error itself goes to the fallback, or back
/// to the caller unchanged; this line only tells the story.
pub fn announce_give_up<E: fmt::Display>(error: &E, why: &GiveUp) {
    println!("      {error}; giving up: {}", why.reason);
}
