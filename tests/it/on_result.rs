//! `on_result = pred`: an `Ok` value that `pred(&T)` marks is retried like a transient error,
//! for clients whose "503 Service Unavailable" comes back as `Ok(response)`. When the retries
//! or the deadline run out, the last `Ok` value is returned as it was. `pred` may return a
//! `bool` or, like `on`, a `Verdict`: a server's `Retry-After` is then honoured for an `Ok` too.
//!
//! Async on tokio's paused clock with exact times; sync with the recorder.

use crate::common::S;
use retry_runtime::{Transient, Verdict, retry, testing};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// A response, deliberately neither `Clone` nor `Copy`: the value returned is the one the last
/// attempt produced, moved out, not a copy of an earlier one.
#[derive(Debug, PartialEq)]
struct Response {
    status: u16,
    call: u32,
}

fn unavailable(response: &Response) -> bool {
    response.status == 503
}

#[derive(Debug, PartialEq)]
struct Dropped(u32);

impl Transient for Dropped {
    fn is_transient(&self) -> bool {
        true
    }
}

/// Answers with the scripted statuses in order (`0` for a dropped connection), then `200`.
struct Server {
    t0: Instant,
    script: RefCell<VecDeque<u16>>,
    calls: Cell<u32>,
    arrivals: RefCell<Vec<Duration>>,
}

impl Server {
    fn new(script: &[u16]) -> Self {
        Server {
            t0: Instant::now(),
            script: RefCell::new(script.iter().copied().collect()),
            calls: Cell::new(0),
            arrivals: RefCell::new(Vec::new()),
        }
    }

    fn call(&self) -> Result<Response, Dropped> {
        self.calls.set(self.calls.get() + 1);
        self.arrivals.borrow_mut().push(self.t0.elapsed());
        let call = self.calls.get();
        match self.script.borrow_mut().pop_front().unwrap_or(200) {
            0 => Err(Dropped(call)),
            status => Ok(Response { status, call }),
        }
    }

    fn arrivals(&self) -> Vec<Duration> {
        self.arrivals.borrow().clone()
    }
}

#[retry(max = 3, base = "1s", jitter = none, on_result = unavailable)]
async fn get(server: &Server) -> Result<Response, Dropped> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_marked_value_is_retried_until_a_good_one() {
    let server = Server::new(&[503, 503]);
    let response = get(&server).await;
    assert_eq!(
        response,
        Ok(Response {
            status: 200,
            call: 3
        })
    );
    // Pauses of the policy, as for errors.
    assert_eq!(server.arrivals(), [0, 1, 3].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn the_last_marked_value_is_returned_when_retries_run_out() {
    let server = Server::new(&[503; 10]);
    let t0 = Instant::now();
    let response = get(&server).await;
    assert_eq!(
        response,
        Ok(Response {
            status: 503,
            call: 4
        })
    );
    assert_eq!(server.calls.get(), 4);
    assert_eq!(t0.elapsed(), 7 * S);
}

#[tokio::test(start_paused = true)]
async fn an_unmarked_value_is_returned_at_once() {
    let server = Server::new(&[404]);
    let t0 = Instant::now();
    assert_eq!(
        get(&server).await,
        Ok(Response {
            status: 404,
            call: 1
        })
    );
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn errors_and_marked_values_share_one_retry_count() {
    // 0 is a dropped connection (a transient error): 503, drop, 503, drop uses all 3 retries.
    let server = Server::new(&[503, 0, 503, 0, 200]);
    assert_eq!(get(&server).await, Err(Dropped(4)));
    assert_eq!(server.arrivals(), [0, 1, 3, 7].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn a_marked_value_after_the_last_error_is_what_comes_back() {
    let server = Server::new(&[0, 0, 0, 503]);
    assert_eq!(
        get(&server).await,
        Ok(Response {
            status: 503,
            call: 4
        })
    );
}

#[retry(deadline = "2500ms", max = 10, base = "1s", jitter = none, on_result = |r: &Response| r.status >= 500)]
async fn get_within_deadline(server: &Server) -> Result<Response, Dropped> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn the_deadline_returns_the_last_marked_value() {
    let server = Server::new(&[502; 10]);
    let t0 = Instant::now();
    // Call 2 at 1 s; its 2 s pause would end at 3 s > 2.5 s.
    assert_eq!(
        get_within_deadline(&server).await,
        Ok(Response {
            status: 502,
            call: 2
        })
    );
    assert_eq!(t0.elapsed(), S);
}

#[retry(max = 2, base = "1s", jitter = none, on_result = Vec::is_empty)]
async fn poll_queue(batches: &RefCell<VecDeque<Vec<u32>>>) -> Result<Vec<u32>, Dropped> {
    Ok(batches.borrow_mut().pop_front().unwrap_or_default())
}

#[tokio::test(start_paused = true)]
async fn on_result_with_a_method_path() {
    let batches = RefCell::new(VecDeque::from([vec![], vec![], vec![4, 7]]));
    assert_eq!(poll_queue(&batches).await, Ok(vec![4, 7]));
}

// ---- sync ------------------------------------------------------------------------------------

#[retry(max = 3, base = "1s", jitter = none, on_result = unavailable)]
fn get_blocking(server: &Server) -> Result<Response, Dropped> {
    server.call()
}

#[test]
fn sync_a_marked_value_is_retried_with_the_policy_pauses() {
    let server = Server::new(&[503, 503]);
    let (response, pauses) = testing::record(|| get_blocking(&server));
    assert_eq!(
        response,
        Ok(Response {
            status: 200,
            call: 3
        })
    );
    assert_eq!(pauses, [S, 2 * S]);
}

#[test]
fn sync_the_last_marked_value_is_returned_when_retries_run_out() {
    let server = Server::new(&[503; 10]);
    let (response, pauses) = testing::record(|| get_blocking(&server));
    assert_eq!(
        response,
        Ok(Response {
            status: 503,
            call: 4
        })
    );
    assert_eq!(pauses, [S, 2 * S, 4 * S]);
}

#[retry(max = 3, base = "1s", jitter = none, on_result = |n: &u32| *n < 3)]
fn early_return(calls: &Cell<u32>) -> Result<u32, Dropped> {
    calls.set(calls.get() + 1);
    if calls.get() < 10 {
        return Ok(calls.get());
    }
    Err(Dropped(calls.get()))
}

#[test]
fn sync_a_value_from_return_is_checked_too() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| early_return(&calls));
    assert_eq!(result, Ok(3));
    assert_eq!(pauses.len(), 2);
}

// ---- a `Verdict` ---------------------------------------------------------------------------------

/// Reads a response as `response_verdict` does: 503 with a pause to wait, 502 worth an
/// immediate retry, anything else the answer.
fn judge(response: &Response) -> Verdict {
    match response.status {
        503 => Verdict::RetryAfter(3 * S),
        502 => Verdict::RetryNow,
        _ => Verdict::Fail,
    }
}

#[retry(max = 3, base = "1s", jitter = none, on_result = judge)]
async fn get_judged(server: &Server) -> Result<Response, Dropped> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_verdict_on_an_ok_value_is_honoured() {
    // 503 asks for 3 s (not the policy's 1 s); 502 is retried at once (no pause, but counted).
    let server = Server::new(&[503, 502, 200]);
    assert_eq!(
        get_judged(&server).await,
        Ok(Response {
            status: 200,
            call: 3
        })
    );
    assert_eq!(server.arrivals(), [0, 3, 3].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn retry_now_still_counts_against_the_limit() {
    let server = Server::new(&[502; 10]);
    assert_eq!(
        get_judged(&server).await,
        Ok(Response {
            status: 502,
            call: 4
        })
    );
    assert_eq!(server.arrivals(), [Duration::ZERO; 4]);
}

#[retry(max = 3, base = "1s", jitter = none, on_result = |r: &Response| if r.status == 503 { Verdict::RetryAfter(Duration::from_secs(60)) } else { Verdict::Fail })]
async fn get_told_to_wait_too_long(server: &Server) -> Result<Response, Dropped> {
    server.call()
}

#[tokio::test(start_paused = true)]
async fn a_pause_beyond_max_delay_on_an_ok_value_returns_it_at_once() {
    let server = Server::new(&[503]);
    let t0 = Instant::now();
    assert_eq!(
        get_told_to_wait_too_long(&server).await,
        Ok(Response {
            status: 503,
            call: 1
        })
    );
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[test]
fn sync_a_verdict_on_an_ok_value_is_honoured() {
    #[retry(max = 3, base = "1s", jitter = none, on_result = judge)]
    fn get_judged_blocking(server: &Server) -> Result<Response, Dropped> {
        server.call()
    }
    let server = Server::new(&[503, 502, 200]);
    let (response, pauses) = testing::record(|| get_judged_blocking(&server));
    assert_eq!(response.map(|r| r.status), Ok(200));
    assert_eq!(pauses, [3 * S, Duration::ZERO]);
}
