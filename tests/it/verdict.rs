//! Verdicts and server-suggested pauses: `on` may return a `Verdict`, and `Transient::retry_after`
//! carries a pause the server asked for (HTTP `Retry-After`, gRPC pushback).
//!
//! The rule: the next pause is at least the suggested one, never shorter; a suggestion longer
//! than `max_delay`, or one that would end past the `deadline`, gives up at once with the error;
//! the retry limit holds whatever the server says. On tokio's paused clock, with exact times.

use crate::common::{MS, S};
use retry_runtime::{Transient, Verdict, retry, testing};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Debug, PartialEq)]
enum HttpError {
    /// 429 or 503, with the `Retry-After` the server sent, if any.
    Unavailable(Option<Duration>),
    /// 400: waiting will not help, whatever the server says.
    BadRequest(Option<Duration>),
}

impl Transient for HttpError {
    fn is_transient(&self) -> bool {
        matches!(self, Unavailable(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Unavailable(after) | BadRequest(after) => *after,
        }
    }
}

use HttpError::{BadRequest, Unavailable};

/// A server that gives the scripted answers in order, then keeps failing with the last one, and
/// notes when each call arrives.
struct Server {
    t0: Instant,
    script: RefCell<VecDeque<Result<u32, HttpError>>>,
    arrivals: RefCell<Vec<Duration>>,
}

impl Server {
    fn new(script: impl IntoIterator<Item = Result<u32, HttpError>>) -> Self {
        Server {
            t0: Instant::now(),
            script: RefCell::new(script.into_iter().collect()),
            arrivals: RefCell::new(Vec::new()),
        }
    }

    fn call(&self) -> Result<u32, HttpError> {
        self.arrivals.borrow_mut().push(self.t0.elapsed());
        let mut script = self.script.borrow_mut();
        if script.len() > 1 {
            script.pop_front().expect("not empty")
        } else {
            script.front().cloned().expect("a script")
        }
    }

    fn arrivals(&self) -> Vec<Duration> {
        self.arrivals.borrow().clone()
    }
}

fn secs(s: u64) -> Option<Duration> {
    Some(Duration::from_secs(s))
}

// ---- the error type's `retry_after`, through the default classifier ------------------------

#[retry(max = 3, base = "1s", jitter = none)]
async fn get(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_longer_suggestion_replaces_the_policy_pause() {
    let server = Server::new([Err(Unavailable(secs(3))), Ok(7)]);
    assert_eq!(get(&server).await, Ok(7));
    // The policy says 1 s; the server said 3 s.
    assert_eq!(server.arrivals(), [Duration::ZERO, 3 * S]);
}

#[tokio::test(start_paused = true)]
async fn a_shorter_suggestion_never_shortens_the_policy_pause() {
    let server = Server::new([
        Err(Unavailable(secs(5))),
        Err(Unavailable(Some(500 * MS))),
        Ok(7),
    ]);
    assert_eq!(get(&server).await, Ok(7));
    // 5 s as asked, then the policy's 2 s rather than the 500 ms asked.
    assert_eq!(server.arrivals(), [Duration::ZERO, 5 * S, 7 * S]);
}

#[tokio::test(start_paused = true)]
async fn without_a_suggestion_the_policy_decides() {
    let server = Server::new([Err(Unavailable(None)), Err(Unavailable(None)), Ok(7)]);
    assert_eq!(get(&server).await, Ok(7));
    assert_eq!(server.arrivals(), [Duration::ZERO, S, 3 * S]);
}

#[tokio::test(start_paused = true)]
async fn the_retry_limit_holds_whatever_the_server_says() {
    let server = Server::new([Err(Unavailable(Some(10 * MS)))]);
    assert_eq!(get(&server).await, Err(Unavailable(Some(10 * MS))));
    // max = 3: 4 calls, with the policy's pauses of 1, 2 and 4 s.
    assert_eq!(server.arrivals(), [0, 1, 3, 7].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_with_a_suggestion_is_not_retried() {
    let server = Server::new([Err(BadRequest(secs(1)))]);
    let t0 = Instant::now();
    assert_eq!(get(&server).await, Err(BadRequest(secs(1))));
    assert_eq!(server.arrivals().len(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

// ---- longer than `max_delay`: give up at once -----------------------------------------------

#[retry(max = 3, base = "1s", max_delay = "10s", jitter = none)]
async fn get_capped(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_suggestion_longer_than_max_delay_gives_up_at_once() {
    let server = Server::new([Err(Unavailable(Some(10 * S + MS))), Ok(7)]);
    let t0 = Instant::now();
    assert_eq!(
        get_capped(&server).await,
        Err(Unavailable(Some(10 * S + MS)))
    );
    assert_eq!(server.arrivals().len(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_suggestion_of_exactly_max_delay_is_honoured() {
    let server = Server::new([Err(Unavailable(secs(10))), Ok(7)]);
    assert_eq!(get_capped(&server).await, Ok(7));
    assert_eq!(server.arrivals(), [Duration::ZERO, 10 * S]);
}

#[tokio::test(start_paused = true)]
async fn the_default_cap_of_30_s_applies_to_suggestions_too() {
    let server = Server::new([Err(Unavailable(secs(31))), Ok(7)]);
    assert_eq!(get(&server).await, Err(Unavailable(secs(31))));
    assert_eq!(server.arrivals().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_later_suggestion_too_long_stops_the_loop_there() {
    let server = Server::new([Err(Unavailable(secs(2))), Err(Unavailable(secs(60))), Ok(7)]);
    let t0 = Instant::now();
    assert_eq!(get_capped(&server).await, Err(Unavailable(secs(60))));
    assert_eq!(server.arrivals(), [Duration::ZERO, 2 * S]);
    assert_eq!(t0.elapsed(), 2 * S);
}

// ---- past the deadline: give up at once -----------------------------------------------------

#[retry(max = 5, base = "1s", deadline = "5s", jitter = none)]
async fn get_within_5_s(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_suggestion_that_would_end_past_the_deadline_gives_up_at_once() {
    let server = Server::new([Err(Unavailable(secs(6))), Ok(7)]);
    let t0 = Instant::now();
    assert_eq!(get_within_5_s(&server).await, Err(Unavailable(secs(6))));
    assert_eq!(server.arrivals().len(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_counts_from_the_first_call_for_suggestions_too() {
    // 2 s fits (ends at 2 s); then 1 s asked, the policy's 2 s taken (ends at 4 s); then 2 s
    // asked, the policy's 4 s would end at 8 s > 5 s: give up at 4 s.
    let server = Server::new([
        Err(Unavailable(secs(2))),
        Err(Unavailable(secs(1))),
        Err(Unavailable(secs(2))),
        Ok(7),
    ]);
    let t0 = Instant::now();
    assert_eq!(get_within_5_s(&server).await, Err(Unavailable(secs(2))));
    assert_eq!(server.arrivals(), [Duration::ZERO, 2 * S, 4 * S]);
    assert_eq!(t0.elapsed(), 4 * S);
}

#[tokio::test(start_paused = true)]
async fn a_suggestion_ending_exactly_at_the_deadline_is_honoured() {
    let server = Server::new([Err(Unavailable(secs(5))), Ok(7)]);
    assert_eq!(get_within_5_s(&server).await, Ok(7));
    assert_eq!(server.arrivals(), [Duration::ZERO, 5 * S]);
}

// ---- with jitter, the suggestion is still a floor -------------------------------------------

#[retry(max = 3, base = "1s", jitter = full)]
async fn get_full_jitter(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn jitter_never_brings_a_pause_below_the_suggestion() {
    // Full jitter draws from [0, 1 s], [0, 2 s], [0, 4 s]: all at most the 5 s asked.
    let server = Server::new([Err(Unavailable(secs(5)))]);
    let _ = get_full_jitter(&server).await;
    assert_eq!(server.arrivals(), [0, 5, 10, 15].map(Duration::from_secs));
}

#[retry(max = 3, base = "1s")]
async fn get_default_jitter(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_short_suggestion_leaves_the_jittered_pause_alone() {
    // The default jitter draws from [1 s, 1.5 s): above the 1 ms asked.
    let server = Server::new([Err(Unavailable(Some(MS))), Ok(7)]);
    assert_eq!(get_default_jitter(&server).await, Ok(7));
    let pause = server.arrivals()[1];
    assert!(pause >= S && pause < 1500 * MS, "{pause:?}");
}

// ---- `on` returning a `Verdict` -------------------------------------------------------------

/// Reads a status code and a `Retry-After` in seconds, as a client's classifier would.
fn by_status(error: &(u16, Option<u64>)) -> Verdict {
    match error {
        (429 | 503, Some(seconds)) => Verdict::RetryAfter(Duration::from_secs(*seconds)),
        (429 | 503, None) | (502 | 504, _) => Verdict::Retry,
        _ => Verdict::Fail,
    }
}

#[retry(max = 3, base = "1s", jitter = none, on = by_status)]
async fn fetch(t0: Instant, arrivals: &RefCell<Vec<Duration>>) -> Result<u32, (u16, Option<u64>)> {
    arrivals.borrow_mut().push(t0.elapsed());
    match arrivals.borrow().len() {
        1 => Err((503, Some(4))),
        2 => Err((502, None)),
        3 => Err((404, Some(1))),
        _ => Ok(7),
    }
}

#[tokio::test(start_paused = true)]
async fn on_returning_a_verdict() {
    let (t0, arrivals) = (Instant::now(), RefCell::new(Vec::new()));
    // 503 asks 4 s; 502 takes the policy's 2 s; 404 fails at once.
    assert_eq!(fetch(t0, &arrivals).await, Err((404, Some(1))));
    assert_eq!(*arrivals.borrow(), [Duration::ZERO, 4 * S, 6 * S]);
    assert_eq!(t0.elapsed(), 6 * S);
}

#[retry(max = 2, base = "1s", jitter = none, on = |e: &u16| if *e == 429 { Verdict::RetryAfter(Duration::from_secs(9)) } else { Verdict::from(*e >= 500) })]
async fn fetch_by_closure(codes: &RefCell<Vec<u16>>) -> Result<(), u16> {
    Err(codes.borrow_mut().remove(0))
}

#[tokio::test(start_paused = true)]
async fn on_a_closure_returning_a_verdict() {
    let t0 = Instant::now();
    let codes = RefCell::new(vec![429, 500, 400]);
    assert_eq!(fetch_by_closure(&codes).await, Err(400));
    // 9 s asked, then the policy's 2 s, then 400 is not retried.
    assert_eq!(t0.elapsed(), 11 * S);
}

// ---- sync functions, with the recorder --------------------------------------------------------

#[retry(max = 4, base = "1s", max_delay = "20s", jitter = none)]
fn get_blocking(script: &RefCell<VecDeque<HttpError>>) -> Result<u32, HttpError> {
    match script.borrow_mut().pop_front() {
        Some(error) => Err(error),
        None => Ok(7),
    }
}

#[test]
fn sync_pauses_follow_the_same_rule() {
    let script = RefCell::new(VecDeque::from([
        Unavailable(secs(3)),
        Unavailable(None),
        Unavailable(Some(100 * MS)),
    ]));
    let (result, pauses) = testing::record(|| get_blocking(&script));
    assert_eq!(result, Ok(7));
    assert_eq!(pauses, [3 * S, 2 * S, 4 * S]);
}

#[test]
fn sync_a_suggestion_longer_than_max_delay_gives_up_at_once() {
    let script = RefCell::new(VecDeque::from([Unavailable(None), Unavailable(secs(21))]));
    let (result, pauses) = testing::record(|| get_blocking(&script));
    assert_eq!(result, Err(Unavailable(secs(21))));
    assert_eq!(pauses, [S]);
}
