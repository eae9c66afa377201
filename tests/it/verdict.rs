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
async fn jitter_never_brings_a_pause_below_the_suggestion_and_spreads_above_it() {
    // Full jitter above a floor: `floor + U[0, max(d, floor)]`, here 5 s + U[0, 5 s] for each
    // of d = 1, 2 and 4 s: never under the 5 s asked, never over 10 s.
    let server = Server::new([Err(Unavailable(secs(5)))]);
    let _ = get_full_jitter(&server).await;
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 4);
    let pauses: Vec<Duration> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        pauses.iter().all(|p| *p >= 5 * S && *p <= 10 * S),
        "{pauses:?}"
    );
    assert!(pauses.iter().any(|p| *p != 5 * S), "no spread: {pauses:?}");
}

/// The default jitter, with a base shorter than what servers ask for.
#[retry(max = 3, base = "100ms")]
async fn get_quick_default_jitter(server: &Server) -> Result<u32, HttpError> {
    server.call()
}

/// 500 callers told `Retry-After: 1` at once, with the default jitter: none comes back before
/// the second the server asked for, and their retries spread over at least 400 ms (5th to 95th
/// percentile), so that they do not hit the server again all in the same instant. (Taking the
/// longer of the policy's 100–150 ms and the 1 s asked brought all 500 back at exactly 1 s.)
#[tokio::test(start_paused = true)]
async fn five_hundred_callers_told_retry_after_1_s_spread_above_it() {
    const CALLERS: usize = 500;
    let t0 = Instant::now();
    let callers = tokio::task::LocalSet::new();
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| {
            callers.spawn_local(async move {
                let server = Server::new([Err(Unavailable(secs(1))), Ok(7)]);
                assert_eq!(get_quick_default_jitter(&server).await, Ok(7));
                server.arrivals()[1]
            })
        })
        .collect();
    let mut second_calls = Vec::with_capacity(CALLERS);
    callers
        .run_until(async {
            for task in tasks {
                second_calls.push(task.await.expect("no panic"));
            }
        })
        .await;
    assert!(t0.elapsed() >= S);
    second_calls.sort();
    assert!(
        second_calls[0] >= S,
        "a retry before the second asked: {:?}",
        second_calls[0]
    );
    let p5 = second_calls[CALLERS * 5 / 100];
    let p95 = second_calls[CALLERS * 95 / 100];
    assert!(
        p95 - p5 >= 400 * MS,
        "the retries spread over only {:?} (5th {p5:?}, 95th {p95:?})",
        p95 - p5
    );
    // Still bounded by the jitter's share: 1 s + U[0, 0.5 s) above the 1 s floor (tokio's timer
    // rounds up to its 1 ms tick).
    assert!(*second_calls.last().expect("500") <= 1500 * MS);
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

// ---- `Verdict::RetryNow`: a one-off fault, retried at once ------------------------------------

#[retry(max = 2, base = "1s", jitter = none, on = |e: &u16| if *e == 499 { Verdict::RetryNow } else { Verdict::from(*e >= 500) })]
async fn fetch_once_more(
    codes: &RefCell<Vec<u16>>,
    t0: Instant,
    arrivals: &RefCell<Vec<Duration>>,
) -> Result<(), u16> {
    arrivals.borrow_mut().push(t0.elapsed());
    Err(codes.borrow_mut().remove(0))
}

#[tokio::test(start_paused = true)]
async fn retry_now_retries_at_once_and_counts_against_the_limit() {
    let (t0, arrivals) = (Instant::now(), RefCell::new(Vec::new()));
    // 499 (one-off): at once; 500: the policy's second pause, 2 s; then the limit.
    let codes = RefCell::new(vec![499, 500, 503]);
    assert_eq!(fetch_once_more(&codes, t0, &arrivals).await, Err(503));
    assert_eq!(*arrivals.borrow(), [Duration::ZERO, Duration::ZERO, 2 * S]);
    // Three in a row: two retries at once, then the limit.
    let (t0, arrivals) = (Instant::now(), RefCell::new(Vec::new()));
    let codes = RefCell::new(vec![499, 499, 499]);
    assert_eq!(fetch_once_more(&codes, t0, &arrivals).await, Err(499));
    assert_eq!(*arrivals.borrow(), [Duration::ZERO; 3]);
}

#[retry(max = 5, base = "1s", deadline = "1500ms", jitter = none, on = |_: &u16| Verdict::RetryNow)]
async fn slow_once_more(calls: &std::cell::Cell<u32>) -> Result<(), u16> {
    calls.set(calls.get() + 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    Err(499)
}

#[tokio::test(start_paused = true)]
async fn retry_now_respects_the_deadline() {
    let calls = std::cell::Cell::new(0);
    let t0 = Instant::now();
    assert_eq!(slow_once_more(&calls).await, Err(499));
    // 0.6 s and 1.2 s fit; at 1.8 s the deadline has passed.
    assert_eq!((calls.get(), t0.elapsed()), (3, 1800 * MS));
}
