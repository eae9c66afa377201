//! The decision seam as a door's author meets it: a decider of the door's own
//! (`engine::Decide`), handed to the engine with `DynHooks::decide`, decides what follows each
//! failed attempt in place of the policy, while the budget, the breaker, the deadline and the
//! hooks stay the engine's; with hedging, it says when the next copy goes. Under tokio's paused
//! clock, with exact call counts and virtual times.

use retry_runtime::engine::{self, Decide, DynHooks, Failure, Next, NextCopy, Settings};
use retry_runtime::{
    CircuitBreaker, CircuitOpen, Elapsed, GiveUp, GiveUpReason, Hedge, Jitter, Policy, RetryBudget,
    TokioTimer, Verdict, attempt,
};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq)]
enum CallError {
    Busy,
    Bad,
    Timeout,
    Open,
}

impl From<Elapsed> for CallError {
    fn from(_: Elapsed) -> Self {
        CallError::Timeout
    }
}

impl From<CircuitOpen> for CallError {
    fn from(_: CircuitOpen) -> Self {
        CallError::Open
    }
}

const SECOND: Duration = Duration::from_secs(1);

fn classify(error: &CallError) -> Verdict {
    Verdict::from(*error == CallError::Busy)
}

/// A policy that would never retry: whatever retries below, the decider asked for it.
fn never_retries() -> Policy {
    Policy::new().max(0).jitter(Jitter::None)
}

/// What a decider saw of one failure.
#[derive(Debug, PartialEq)]
struct Seen {
    attempt: u32,
    copy: u16,
    verdict: Verdict,
    error: Option<CallError>,
    previous_pause: Duration,
    elapsed: Duration,
}

impl Seen {
    fn of(failure: &Failure<'_, CallError>) -> Seen {
        Seen {
            attempt: failure.attempt,
            copy: failure.copy,
            verdict: failure.verdict,
            error: failure.error.map(|error| match error {
                CallError::Busy => CallError::Busy,
                CallError::Bad => CallError::Bad,
                CallError::Timeout => CallError::Timeout,
                CallError::Open => CallError::Open,
            }),
            previous_pause: failure.previous_pause,
            elapsed: failure.elapsed,
        }
    }
}

/// A door's decider that answers from a script, one `Next` per failure, and keeps what it saw.
struct Scripted {
    script: Vec<Next>,
    seen: Vec<Seen>,
    accepted: Vec<u32>,
    /// Run as it decides (another call tripping a breaker).
    on_next: fn(),
}

impl Scripted {
    fn new(script: &[Next]) -> Scripted {
        Scripted {
            script: script.iter().rev().copied().collect(),
            seen: Vec::new(),
            accepted: Vec::new(),
            on_next: || {},
        }
    }
}

impl Decide<CallError> for Scripted {
    fn next(&mut self, failure: &Failure<'_, CallError>) -> Next {
        self.seen.push(Seen::of(failure));
        (self.on_next)();
        self.script.pop().unwrap_or(Next::Return)
    }

    fn accepted(&mut self, attempts: u32) {
        self.accepted.push(attempts);
    }
}

/// Attempts that fail with `Busy` until `ok_at` (never with 0), each start's time kept.
struct Door {
    started: Instant,
    starts: Mutex<Vec<Duration>>,
    ok_at: u32,
}

impl Door {
    fn new(ok_at: u32) -> Door {
        Door {
            started: Instant::now(),
            starts: Mutex::new(Vec::new()),
            ok_at,
        }
    }

    fn attempt(&self) -> impl Future<Output = Result<u32, CallError>> + use<> {
        self.starts
            .lock()
            .expect("not poisoned")
            .push(self.started.elapsed());
        let n = attempt().number();
        let ok = n == self.ok_at;
        async move { if ok { Ok(n) } else { Err(CallError::Busy) } }
    }

    fn starts(&self) -> Vec<Duration> {
        self.starts.lock().expect("not poisoned").clone()
    }
}

/// Drives `door` with `decider` under `settings`, `on_give_up` heard.
async fn drive(
    settings: &Settings<'_>,
    decider: &mut Scripted,
    door: &Door,
    gave_up: &Mutex<Vec<(GiveUpReason, u32)>>,
) -> Result<u32, CallError> {
    let heard = |_: Result<&u32, &CallError>, why: &GiveUp| {
        gave_up
            .lock()
            .expect("not poisoned")
            .push((why.reason, why.attempts));
    };
    let hooks = DynHooks::new(&classify)
        .on_give_up(Some(&heard))
        .decide(decider);
    engine::drive(settings, hooks, TokioTimer, || door.attempt()).await
}

#[tokio::test(start_paused = true)]
async fn the_deciders_pauses_are_taken_exactly_in_place_of_the_policys() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Retry(3 * SECOND), Next::Retry(7 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    // The third failure: the script is out, `Return`.
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(door.starts(), [Duration::ZERO, 3 * SECOND, 10 * SECOND]);
    let busy = |attempt, previous_pause, elapsed| Seen {
        attempt,
        copy: 0,
        verdict: Verdict::Retry,
        error: Some(CallError::Busy),
        previous_pause,
        elapsed,
    };
    assert_eq!(
        decider.seen,
        [
            busy(1, Duration::ZERO, Duration::ZERO),
            busy(2, 3 * SECOND, 3 * SECOND),
            busy(3, 7 * SECOND, 10 * SECOND),
        ]
    );
    // `Return` is the answer, not a give-up: `on_give_up` hears nothing; `accepted` neither.
    assert!(gave_up.lock().expect("not poisoned").is_empty());
    assert!(decider.accepted.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_error_not_worth_retrying_is_asked_too_and_return_ends_the_call_with_it() {
    let policy = Policy::new().max(3).jitter(Jitter::None);
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Return]);
    let gave_up = Mutex::new(Vec::new());
    let heard = |_: Result<&u32, &CallError>, why: &GiveUp| {
        gave_up
            .lock()
            .expect("not poisoned")
            .push((why.reason, why.attempts));
    };
    let hooks = DynHooks::new(&classify)
        .on_give_up(Some(&heard))
        .decide(&mut decider);
    let calls = AtomicU32::new(0);
    let answer = engine::drive(&settings, hooks, TokioTimer, || {
        calls.fetch_add(1, Ordering::Relaxed);
        std::future::ready(Err::<u32, _>(CallError::Bad))
    })
    .await;
    assert_eq!(answer, Err(CallError::Bad));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(decider.seen.len(), 1);
    assert_eq!(decider.seen[0].verdict, Verdict::Fail);
    assert_eq!(decider.seen[0].error, Some(CallError::Bad));
    assert!(gave_up.lock().expect("not poisoned").is_empty());
}

#[tokio::test(start_paused = true)]
async fn give_up_reaches_on_give_up_with_its_reason_and_the_attempts() {
    let policy = Policy::new().max(5).jitter(Jitter::None);
    let settings = Settings::new(&policy);
    let too_long = GiveUpReason::SuggestedTooLong(60 * SECOND);
    let mut decider = Scripted::new(&[Next::Retry(SECOND), Next::GiveUp(too_long)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(door.starts(), [Duration::ZERO, SECOND]);
    assert_eq!(*gave_up.lock().expect("not poisoned"), [(too_long, 2)]);
}

#[tokio::test(start_paused = true)]
async fn linger_pauses_then_gives_up_as_the_budget_without_another_attempt() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Retry(SECOND), Next::Linger(4 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let started = Instant::now();
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    // Two attempts; the second's failure held over the pause of 4 s, then returned.
    assert_eq!(door.starts(), [Duration::ZERO, SECOND]);
    assert_eq!(started.elapsed(), 5 * SECOND);
    assert_eq!(decider.seen.len(), 2);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Budget, 2)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_linger_past_the_deadline_gives_up_at_once() {
    let policy = never_retries().deadline(3 * SECOND);
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Linger(4 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let started = Instant::now();
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Budget, 1)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_deciders_retry_is_refused_by_the_deadline() {
    let policy = never_retries().deadline(10 * SECOND);
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Retry(4 * SECOND), Next::Retry(7 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let started = Instant::now();
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    // 4 s then 7 s would end at 11 s, past the deadline of 10 s: no second pause.
    assert_eq!(door.starts(), [Duration::ZERO, 4 * SECOND]);
    assert_eq!(started.elapsed(), 4 * SECOND);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Deadline, 2)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_deciders_retry_is_refused_by_an_empty_budget() {
    // One token per call's first attempt, none in reserve: one retry.
    static ONE_TOKEN: RetryBudget = RetryBudget::new().ratio(1.0).min_per_second(0);
    let policy = never_retries();
    let settings = Settings::new(&policy).budget(Some(&ONE_TOKEN));
    let mut decider = Scripted::new(&[Next::Retry(2 * SECOND), Next::Retry(2 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(door.starts(), [Duration::ZERO, 2 * SECOND]);
    assert_eq!(decider.seen.len(), 2);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Budget, 2)]
    );
}

static TRIPPED: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(2)
    .open_for(Duration::from_secs(60));

#[tokio::test(start_paused = true)]
async fn a_deciders_retry_is_refused_by_a_breaker_that_opened_before_the_next_attempt() {
    let policy = never_retries();
    let settings = Settings::new(&policy).breaker(Some(&TRIPPED));
    let mut decider = Scripted::new(&[Next::Retry(SECOND)]);
    // Another call fails while this one decides: the breaker's second failure opens it.
    decider.on_next = || {
        let now = Instant::now().into_std();
        if let Ok(admission) = TRIPPED.admit(now) {
            admission.record(false, now);
        }
    };
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    // The retry was decided, paused for, and refused: the body ran once.
    assert_eq!(answer, Err(CallError::Open));
    assert_eq!(door.starts(), [Duration::ZERO]);
    assert_eq!(decider.seen.len(), 1);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::BreakerOpen, 1)]
    );
}

static OPENS_AT_ONCE: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(1)
    .open_for(Duration::from_secs(60));

#[tokio::test(start_paused = true)]
async fn while_the_breaker_is_open_the_decider_is_not_asked() {
    let policy = never_retries();
    let settings = Settings::new(&policy).breaker(Some(&OPENS_AT_ONCE));
    let mut decider = Scripted::new(&[Next::Retry(SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(door.starts(), [Duration::ZERO]);
    assert!(decider.seen.is_empty(), "no retry could be admitted");
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::BreakerOpen, 1)]
    );
}

#[tokio::test(start_paused = true)]
async fn accepted_hears_the_attempts_of_a_call_that_ends_with_an_accepted_ok() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Retry(SECOND), Next::Retry(2 * SECOND)]);
    let door = Door::new(3);
    let gave_up = Mutex::new(Vec::new());
    let answer = drive(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Ok(3));
    assert_eq!(door.starts(), [Duration::ZERO, SECOND, 3 * SECOND]);
    assert_eq!(decider.accepted, [3]);

    // A first try: one attempt.
    let mut decider = Scripted::new(&[]);
    let door = Door::new(1);
    assert_eq!(drive(&settings, &mut decider, &door, &gave_up).await, Ok(1));
    assert_eq!(decider.accepted, [1]);
    assert!(decider.seen.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_rejected_ok_reaches_the_decider_without_an_error() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Retry(SECOND)]);
    let too_small = |n: &u32| Verdict::from(*n < 2);
    let hooks = DynHooks::new(&classify)
        .on_result(Some(&too_small))
        .decide(&mut decider);
    let answer = engine::drive(&settings, hooks, TokioTimer, || {
        std::future::ready(Ok::<u32, CallError>(attempt().number()))
    })
    .await;
    assert_eq!(answer, Ok(2));
    assert_eq!(decider.seen.len(), 1);
    assert_eq!(decider.seen[0].error, None);
    assert_eq!(decider.seen[0].verdict, Verdict::Retry);
    // The Ok of the second attempt is accepted: two attempts.
    assert_eq!(decider.accepted, [2]);
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_attempt_reaches_the_decider_as_the_doors_error() {
    let policy = never_retries();
    let settings = Settings::new(&policy).timeout(Some(2 * SECOND));
    let retry_all = |_: &CallError| Verdict::Retry;
    let mut decider = Scripted::new(&[Next::Retry(SECOND)]);
    let hooks = DynHooks::new(&retry_all).decide(&mut decider);
    let started = Instant::now();
    let answer = engine::drive(
        &settings,
        hooks,
        TokioTimer,
        std::future::pending::<Result<u32, CallError>>,
    )
    .await;
    assert_eq!(answer, Err(CallError::Timeout));
    // 2 s, a pause of 1 s, 2 s; the script is then out: `Return`.
    assert_eq!(started.elapsed(), 5 * SECOND);
    assert_eq!(decider.seen.len(), 2);
    assert_eq!(decider.seen[1].error, Some(CallError::Timeout));
    assert_eq!(decider.seen[1].elapsed, 5 * SECOND);
}

// ---- hedging: `copy_failed` moves the next copy ----------------------------------------------

/// A decider whose only word is on copies: `copy_failed` answers `next_copy`.
struct Copies {
    next_copy: NextCopy,
    seen: Vec<Seen>,
}

impl Decide<CallError> for Copies {
    fn next(&mut self, _: &Failure<'_, CallError>) -> Next {
        Next::Return
    }

    fn copy_failed(&mut self, failure: &Failure<'_, CallError>) -> NextCopy {
        self.seen.push(Seen::of(failure));
        self.next_copy
    }
}

/// A hedged attempt, copies 10 s apart up to two: the attempt answers `Ok(0)` after 30 s, copy
/// 1 fails after 1 s (`Busy`), copy 2 answers `Ok(2)` after 1 s. The copies' start times and
/// the answer with its time, with `next_copy` answered to copy 1's failure.
async fn hedged(next_copy: NextCopy) -> (Vec<(u16, Duration)>, Result<u32, CallError>, Duration) {
    let policy = never_retries();
    let hedge = Hedge::after(10 * SECOND).max_hedges(2);
    let settings = Settings::new(&policy).hedge(Some(&hedge));
    let mut decider = Copies {
        next_copy,
        seen: Vec::new(),
    };
    let hooks = DynHooks::new(&classify).decide(&mut decider);
    let started = Instant::now();
    let starts = Mutex::new(Vec::new());
    let answer = engine::drive_hedged(&settings, hooks, TokioTimer, || {
        let copy = attempt().hedge();
        starts
            .lock()
            .expect("not poisoned")
            .push((copy, started.elapsed()));
        async move {
            match copy {
                0 => {
                    tokio::time::sleep(30 * SECOND).await;
                    Ok(0)
                }
                1 => {
                    tokio::time::sleep(SECOND).await;
                    Err(CallError::Busy)
                }
                _ => {
                    tokio::time::sleep(SECOND).await;
                    Ok(2)
                }
            }
        }
    })
    .await;
    let took = started.elapsed();
    assert_eq!(
        decider.seen,
        [Seen {
            attempt: 1,
            copy: 1,
            verdict: Verdict::Retry,
            error: Some(CallError::Busy),
            previous_pause: Duration::ZERO,
            elapsed: 11 * SECOND,
        }]
    );
    (starts.into_inner().expect("not poisoned"), answer, took)
}

#[tokio::test(start_paused = true)]
async fn on_schedule_keeps_the_hedges_times() {
    let (starts, answer, took) = hedged(NextCopy::OnSchedule).await;
    assert_eq!(
        starts,
        [(0, Duration::ZERO), (1, 10 * SECOND), (2, 20 * SECOND)]
    );
    assert_eq!((answer, took), (Ok(2), 21 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn now_starts_the_next_copy_at_once() {
    let (starts, answer, took) = hedged(NextCopy::Now).await;
    assert_eq!(
        starts,
        [(0, Duration::ZERO), (1, 10 * SECOND), (2, 11 * SECOND)]
    );
    assert_eq!((answer, took), (Ok(2), 12 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn after_sets_the_next_copys_timer() {
    let (starts, answer, took) = hedged(NextCopy::After(2 * SECOND)).await;
    assert_eq!(
        starts,
        [(0, Duration::ZERO), (1, 10 * SECOND), (2, 13 * SECOND)]
    );
    assert_eq!((answer, took), (Ok(2), 14 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn never_starts_no_more_copies_for_the_attempt() {
    let (starts, answer, took) = hedged(NextCopy::Never).await;
    assert_eq!(starts, [(0, Duration::ZERO), (1, 10 * SECOND)]);
    assert_eq!((answer, took), (Ok(0), 30 * SECOND));
}

// ---- hedging: a decider's word after a copy that ran alone, and its veto of a copy due -------

/// A hedging decider that answers `next_copy` to every failed copy and `due` to every copy its
/// timer made due, and keeps what it was asked.
struct Lone {
    next_copy: NextCopy,
    due: fn(u16) -> bool,
    /// The copies `copy_failed` heard, with the time.
    failed: Vec<(u16, Duration)>,
    /// The copies `copy_due` was asked about, with the time.
    asked: Vec<(u16, Duration)>,
    /// How often `next` was asked.
    nexts: u32,
    started: Instant,
}

impl Lone {
    fn new(next_copy: NextCopy) -> Lone {
        Lone {
            next_copy,
            due: |_| true,
            failed: Vec::new(),
            asked: Vec::new(),
            nexts: 0,
            started: Instant::now(),
        }
    }
}

impl Decide<CallError> for Lone {
    fn next(&mut self, failure: &Failure<'_, CallError>) -> Next {
        assert_eq!(failure.copy, 0, "next judges the attempt as a whole");
        self.nexts += 1;
        Next::Return
    }

    fn copy_failed(&mut self, failure: &Failure<'_, CallError>) -> NextCopy {
        assert_eq!(failure.verdict, Verdict::Retry);
        self.failed.push((failure.copy, self.started.elapsed()));
        self.next_copy
    }

    fn copy_due(&mut self, hedge: u16) -> bool {
        self.asked.push((hedge, self.started.elapsed()));
        (self.due)(hedge)
    }
}

/// What a hedged call did: each copy's start, the answer and when it came.
struct Raced {
    starts: Vec<(u16, Duration)>,
    answer: Result<u32, CallError>,
    took: Duration,
}

/// One hedged call (copies `delay` apart, up to `max_hedges`) under `settings`, decided by
/// `decider`: copy `k` takes `copies(k)`'s time, then answers with its result.
async fn race(
    settings: &Settings<'_>,
    decider: &mut Lone,
    delay: Duration,
    max_hedges: u32,
    copies: fn(u16) -> (Duration, Result<u32, CallError>),
) -> Raced {
    let hedge = Hedge::after(delay).max_hedges(max_hedges);
    let settings = settings.hedge(Some(&hedge));
    let hooks = DynHooks::new(&classify).decide(decider);
    let started = Instant::now();
    let starts = Mutex::new(Vec::new());
    let answer = engine::drive_hedged(&settings, hooks, TokioTimer, || {
        let copy = attempt().hedge();
        starts
            .lock()
            .expect("not poisoned")
            .push((copy, started.elapsed()));
        let (takes, result) = copies(copy);
        async move {
            tokio::time::sleep(takes).await;
            result
        }
    })
    .await;
    Raced {
        starts: starts.into_inner().expect("not poisoned"),
        answer,
        took: started.elapsed(),
    }
}

/// Every copy fails (`Busy`) one second after it starts.
fn each_fails_after_a_second(_: u16) -> (Duration, Result<u32, CallError>) {
    (SECOND, Err(CallError::Busy))
}

#[tokio::test(start_paused = true)]
async fn now_after_the_only_running_copy_failed_starts_the_next_copy_at_once() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::Now);
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        2,
        each_fails_after_a_second,
    )
    .await;
    // Each copy the only one running when it fails: the next goes at once, not at 10 s.
    assert_eq!(
        raced.starts,
        [(0, Duration::ZERO), (1, SECOND), (2, 2 * SECOND)]
    );
    assert_eq!(raced.answer, Err(CallError::Busy));
    assert_eq!(raced.took, 3 * SECOND, "the last copy's failure ends it");
    // Every failed copy heard once, the last one (which ends the attempt) included.
    assert_eq!(
        decider.failed,
        [(0, SECOND), (1, 2 * SECOND), (2, 3 * SECOND)]
    );
    assert_eq!(decider.nexts, 1);
    assert!(
        decider.asked.is_empty(),
        "no timer fired: {:?}",
        decider.asked
    );
}

#[tokio::test(start_paused = true)]
async fn after_the_only_running_copy_failed_starts_the_next_copy_after_that_pause() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::After(2 * SECOND));
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        2,
        each_fails_after_a_second,
    )
    .await;
    assert_eq!(
        raced.starts,
        [(0, Duration::ZERO), (1, 3 * SECOND), (2, 6 * SECOND)]
    );
    assert_eq!(
        (raced.answer, raced.took),
        (Err(CallError::Busy), 7 * SECOND)
    );
    assert_eq!(
        decider.failed,
        [(0, SECOND), (1, 4 * SECOND), (2, 7 * SECOND)]
    );
    // Each copy after a pause of the decider's is asked for as its timer fires.
    assert_eq!(decider.asked, [(1, 3 * SECOND), (2, 6 * SECOND)]);
    assert_eq!(decider.nexts, 1);
}

/// With nothing running, a decider's pause that would end past the policy's deadline is not
/// waited for: the attempt ends with the failure at once, as a retry's pause past the deadline
/// gives up at once. A pause that ends within it is taken.
#[tokio::test(start_paused = true)]
async fn after_past_the_deadline_with_nothing_running_ends_the_attempt_at_once() {
    let policy = never_retries().deadline(3 * SECOND);
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::After(5 * SECOND));
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        2,
        each_fails_after_a_second,
    )
    .await;
    // The first copy fails at 1 s; 1 s + 5 s is past the 3 s deadline: no wait, no copy.
    assert_eq!(raced.starts, [(0, Duration::ZERO)]);
    assert_eq!((raced.answer, raced.took), (Err(CallError::Busy), SECOND));
    assert_eq!(decider.failed, [(0, SECOND)]);
    assert_eq!(decider.asked, []);

    // Within the deadline (1 s + 1 s < 3 s), the pause is taken and the next copy starts.
    let mut decider = Lone::new(NextCopy::After(SECOND));
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        1,
        each_fails_after_a_second,
    )
    .await;
    assert_eq!(raced.starts, [(0, Duration::ZERO), (1, 2 * SECOND)]);
    assert_eq!(
        (raced.answer, raced.took),
        (Err(CallError::Busy), 3 * SECOND)
    );
}

#[tokio::test(start_paused = true)]
async fn on_schedule_after_the_only_running_copy_failed_ends_the_attempt_as_before() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::OnSchedule);
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        2,
        each_fails_after_a_second,
    )
    .await;
    assert_eq!(raced.starts, [(0, Duration::ZERO)]);
    assert_eq!((raced.answer, raced.took), (Err(CallError::Busy), SECOND));
    assert_eq!(decider.failed, [(0, SECOND)]);
    assert_eq!(decider.nexts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_copy_started_now_is_counted_in_the_layers_budget_and_an_empty_one_ends_the_attempt() {
    // One token per call's first attempt, none in reserve: one copy.
    static ONE_COPY: RetryBudget = RetryBudget::new().ratio(1.0).min_per_second(0);
    let policy = never_retries();
    let settings = Settings::new(&policy).budget(Some(&ONE_COPY));
    let mut decider = Lone::new(NextCopy::Now);
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        3,
        each_fails_after_a_second,
    )
    .await;
    assert_eq!(raced.starts, [(0, Duration::ZERO), (1, SECOND)]);
    assert_eq!(
        (raced.answer, raced.took),
        (Err(CallError::Busy), 2 * SECOND)
    );
    assert_eq!(decider.failed, [(0, SECOND), (1, 2 * SECOND)]);
    assert_eq!(decider.nexts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_copy_started_now_is_refused_by_the_breaker_its_copies_opened() {
    static OPENS_AT_TWO: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(2)
        .open_for(Duration::from_secs(60));
    let policy = never_retries();
    let settings = Settings::new(&policy).breaker(Some(&OPENS_AT_TWO));
    let mut decider = Lone::new(NextCopy::Now);
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        3,
        each_fails_after_a_second,
    )
    .await;
    // Each failed copy is recorded once: the second opens the breaker, which refuses the third.
    assert_eq!(raced.starts, [(0, Duration::ZERO), (1, SECOND)]);
    assert_eq!(
        (raced.answer, raced.took),
        (Err(CallError::Busy), 2 * SECOND)
    );
    assert_eq!(decider.failed, [(0, SECOND), (1, 2 * SECOND)]);
    // The breaker is open after the attempt: the decider is not asked.
    assert_eq!(decider.nexts, 0);
}

#[tokio::test(start_paused = true)]
async fn copy_due_false_stops_the_copies_due_on_the_hedges_schedule() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::OnSchedule);
    decider.due = |hedge| hedge < 2;
    // The attempt answers after 30 s; the copies would, too.
    let raced = race(&settings, &mut decider, 10 * SECOND, 3, |copy| {
        (30 * SECOND, Ok(u32::from(copy)))
    })
    .await;
    assert_eq!(raced.starts, [(0, Duration::ZERO), (1, 10 * SECOND)]);
    assert_eq!(decider.asked, [(1, 10 * SECOND), (2, 20 * SECOND)]);
    assert_eq!((raced.answer, raced.took), (Ok(0), 30 * SECOND));
    assert!(decider.failed.is_empty());
}

#[tokio::test(start_paused = true)]
async fn copy_due_false_after_the_only_copy_failed_ends_the_attempt_with_that_failure() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::After(2 * SECOND));
    decider.due = |_| false;
    let raced = race(
        &settings,
        &mut decider,
        10 * SECOND,
        2,
        each_fails_after_a_second,
    )
    .await;
    assert_eq!(raced.starts, [(0, Duration::ZERO)]);
    assert_eq!(decider.asked, [(1, 3 * SECOND)]);
    assert_eq!(
        (raced.answer, raced.took),
        (Err(CallError::Busy), 3 * SECOND)
    );
    assert_eq!(decider.nexts, 1);
}

#[tokio::test(start_paused = true)]
async fn the_copies_after_one_started_now_follow_one_delay_apart_from_it() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Lone::new(NextCopy::Now);
    // The attempt is slow; copy 1 fails after a second, so copy 2 goes at once (11 s); copy 3
    // then follows one delay after copy 2 (21 s), not three delays after the attempt (30 s).
    let raced = race(&settings, &mut decider, 10 * SECOND, 3, |copy| match copy {
        1 => (SECOND, Err(CallError::Busy)),
        3 => (SECOND, Ok(3)),
        _ => (100 * SECOND, Ok(u32::from(copy))),
    })
    .await;
    assert_eq!(
        raced.starts,
        [
            (0, Duration::ZERO),
            (1, 10 * SECOND),
            (2, 11 * SECOND),
            (3, 21 * SECOND)
        ]
    );
    assert_eq!((raced.answer, raced.took), (Ok(3), 22 * SECOND));
    assert_eq!(decider.failed, [(1, 11 * SECOND)]);
    assert_eq!(decider.asked, [(1, 10 * SECOND), (3, 21 * SECOND)]);
}

// ---- a decider's give-up reaches the fallback: `aws2026` through the attribute ---------------

/// SQS `ReceiveMessage`'s policy with an empty quota and the largest random factor: the first
/// failure lingers for the first backoff (50 ms), then gives up as the quota's refusal.
static EMPTY_SQS: retry_runtime::Aws2026Standard = retry_runtime::Aws2026Standard::with(
    retry_runtime::Aws2026::new().long_polling(true),
    retry_runtime::RetryQuota::new().tokens(0),
)
.fixed_random(1.0);

static RECEIVED: AtomicU32 = AtomicU32::new(0);
static SAVED: Mutex<Vec<(GiveUpReason, u32, Duration)>> = Mutex::new(Vec::new());

fn save(error: CallError, why: GiveUp) -> Result<u32, CallError> {
    SAVED
        .lock()
        .expect("not poisoned")
        .push((why.reason, why.attempts, why.elapsed));
    Err(error)
}

#[retry_runtime::retry(aws2026 = EMPTY_SQS, on = classify, fallback = save)]
async fn receive() -> Result<u32, CallError> {
    RECEIVED.fetch_add(1, Ordering::Relaxed);
    Err(CallError::Busy)
}

#[tokio::test(start_paused = true)]
async fn a_lingering_deciders_give_up_reaches_the_fallback_after_the_pause() {
    let started = Instant::now();
    assert_eq!(receive().await, Err(CallError::Busy));
    assert_eq!(RECEIVED.load(Ordering::Relaxed), 1);
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    assert_eq!(
        *SAVED.lock().expect("not poisoned"),
        [(GiveUpReason::Budget, 1, Duration::from_millis(50))]
    );
}

// ---- `Next::Resend`: the same attempt again, not counted as a retry ------------------------------

/// Drives `door` with `decider` under `settings`, counting the loop's events in `counters`.
async fn drive_counted(
    settings: &Settings<'_>,
    decider: &mut Scripted,
    door: &Door,
    gave_up: &Mutex<Vec<(GiveUpReason, u32)>>,
) -> (Result<u32, CallError>, engine::Counters) {
    let counters = engine::Counters::default();
    let settings = (*settings).sink(&counters);
    let answer = drive(&settings, decider, door, gave_up).await;
    (answer, counters)
}

#[tokio::test(start_paused = true)]
async fn a_resend_runs_the_same_attempt_again_after_its_exact_pause_without_a_retry() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let quarter = Duration::from_millis(250);
    let mut decider = Scripted::new(&[
        Next::Resend(quarter),
        Next::Resend(Duration::ZERO),
        Next::Retry(SECOND),
    ]);
    // Accepted on attempt number 2: the resends kept number 1.
    let door = Door::new(2);
    let gave_up = Mutex::new(Vec::new());
    let (answer, counters) = drive_counted(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Ok(2));
    assert_eq!(
        door.starts(),
        [Duration::ZERO, quarter, quarter, quarter + SECOND]
    );
    let seen: Vec<_> = decider
        .seen
        .iter()
        .map(|s| (s.attempt, s.previous_pause, s.elapsed))
        .collect();
    assert_eq!(
        seen,
        [
            (1, Duration::ZERO, Duration::ZERO),
            (1, quarter, quarter),
            (1, Duration::ZERO, quarter),
        ]
    );
    // Two transparent retries, one retry; the call was accepted after two attempts.
    assert_eq!(counters.transparent_retries(), 2);
    assert_eq!(counters.retries(), 1);
    assert_eq!(decider.accepted, [2]);
    assert!(gave_up.lock().expect("not poisoned").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_resend_draws_no_token_from_the_budget() {
    // One token per call's first attempt, none in reserve: one retry, however many resends.
    static ONE_TOKEN: RetryBudget = RetryBudget::new().ratio(1.0).min_per_second(0);
    let policy = never_retries();
    let settings = Settings::new(&policy).budget(Some(&ONE_TOKEN));
    let mut decider = Scripted::new(&[
        Next::Resend(SECOND),
        Next::Resend(SECOND),
        Next::Retry(2 * SECOND),
        Next::Resend(SECOND),
        Next::Retry(2 * SECOND),
    ]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let (answer, counters) = drive_counted(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    let s = |n| n * SECOND;
    assert_eq!(door.starts(), [s(0), s(1), s(2), s(4), s(5)]);
    let attempts: Vec<_> = decider.seen.iter().map(|seen| seen.attempt).collect();
    assert_eq!(attempts, [1, 1, 1, 2, 2]);
    // The first retry took the one token; the resends took none; the second retry had none.
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Budget, 2)]
    );
    assert_eq!(counters.transparent_retries(), 3);
    assert_eq!(counters.retries(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_resend_past_the_deadline_gives_up_at_once() {
    let policy = never_retries().deadline(3 * SECOND);
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Resend(SECOND), Next::Resend(5 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let started = Instant::now();
    let (answer, counters) = drive_counted(&settings, &mut decider, &door, &gave_up).await;
    assert_eq!(answer, Err(CallError::Busy));
    // 1 s then 5 s would end at 6 s, past the deadline of 3 s: no second pause.
    assert_eq!(door.starts(), [Duration::ZERO, SECOND]);
    assert_eq!(started.elapsed(), SECOND);
    assert_eq!(
        *gave_up.lock().expect("not poisoned"),
        [(GiveUpReason::Deadline, 1)]
    );
    assert_eq!(counters.transparent_retries(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_resends_pause_ends_with_the_call() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Scripted::new(&[Next::Resend(10 * SECOND)]);
    let door = Door::new(0);
    let gave_up = Mutex::new(Vec::new());
    let started = Instant::now();
    let call = drive(&settings, &mut decider, &door, &gave_up);
    let cut = tokio::time::timeout(2 * SECOND, call).await;
    assert!(cut.is_err(), "the caller's timeout ended the call");
    assert_eq!(started.elapsed(), 2 * SECOND);
    assert_eq!(door.starts(), [Duration::ZERO]);
}

// ---- `NextCopy::Resend`: a hedged copy sent again, not counted as a new copy ---------------------

/// A hedging decider that answers each failed copy from a script (then `OnSchedule`) and each
/// failed attempt from another (then `Return`), and keeps what `copy_failed` heard: the
/// attempt, the copy and the time.
struct Resending {
    copies: Vec<NextCopy>,
    attempts: Vec<Next>,
    failed: Vec<(u32, u16, Duration)>,
    started: Instant,
}

impl Resending {
    fn new(copies: &[NextCopy], attempts: &[Next]) -> Resending {
        Resending {
            copies: copies.iter().rev().copied().collect(),
            attempts: attempts.iter().rev().copied().collect(),
            failed: Vec::new(),
            started: Instant::now(),
        }
    }
}

impl Decide<CallError> for Resending {
    fn next(&mut self, _: &Failure<'_, CallError>) -> Next {
        self.attempts.pop().unwrap_or(Next::Return)
    }

    fn copy_failed(&mut self, failure: &Failure<'_, CallError>) -> NextCopy {
        let elapsed = self.started.elapsed();
        self.failed.push((failure.attempt, failure.copy, elapsed));
        self.copies.pop().unwrap_or(NextCopy::OnSchedule)
    }
}

/// The events the loop hands the door's sink, as `Debug` (the transparent retries and the
/// hedged copies among them).
#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl engine::Sink for Heard {
    fn event(&self, _: &'static str, event: &engine::Event<'_>) {
        self.0
            .lock()
            .expect("not poisoned")
            .push(format!("{event:?}"));
    }
}

/// What a hedged call with resent copies did: each start (attempt, hedge, time), the answer,
/// when it came, and the loop's counts.
struct Resent {
    starts: Vec<(u32, u16, Duration)>,
    answer: Result<u32, CallError>,
    took: Duration,
    counters: engine::Counters,
    events: Vec<String>,
}

/// How long the `n`-th send (from 0) of copy `hedge` of attempt `attempt` takes, and its result.
type Sends = fn(attempt: u32, hedge: u16, n: usize) -> (Duration, Result<u32, CallError>);

/// One hedged call (copies `delay` apart, up to `max_hedges`) under `settings`, decided by
/// `decider`: the `n`-th start (from 0) of copy `hedge` of attempt `attempt` takes
/// `copies(attempt, hedge, n)`'s time, then answers with its result.
async fn resent(
    settings: &Settings<'_>,
    decider: &mut Resending,
    delay: Duration,
    max_hedges: u32,
    copies: Sends,
) -> Resent {
    let hedge = Hedge::after(delay).max_hedges(max_hedges);
    let counters = engine::Counters::default();
    let heard = Heard::default();
    let sink = (&counters, &heard);
    let settings = settings.hedge(Some(&hedge)).sink(&sink);
    let hooks = DynHooks::new(&classify).decide(decider);
    let started = Instant::now();
    let starts = Mutex::new(Vec::new());
    let answer = engine::drive_hedged(&settings, hooks, TokioTimer, || {
        let (attempt, hedge) = (attempt().number(), attempt().hedge());
        let mut starts = starts.lock().expect("not poisoned");
        let n = starts
            .iter()
            .filter(|&&(a, h, _)| (a, h) == (attempt, hedge))
            .count();
        starts.push((attempt, hedge, started.elapsed()));
        let (takes, result) = copies(attempt, hedge, n);
        async move {
            tokio::time::sleep(takes).await;
            result
        }
    })
    .await;
    let events = heard.0.into_inner().expect("not poisoned");
    Resent {
        starts: starts.into_inner().expect("not poisoned"),
        answer,
        took: started.elapsed(),
        counters,
        events,
    }
}

/// Copy 0's first send fails (`Busy`) after a second; every other send answers `Ok(hedge)`
/// after a second.
fn the_first_send_fails(_: u32, hedge: u16, n: usize) -> (Duration, Result<u32, CallError>) {
    match (hedge, n) {
        (0, 0) => (SECOND, Err(CallError::Busy)),
        _ => (SECOND, Ok(u32::from(hedge))),
    }
}

#[tokio::test(start_paused = true)]
async fn a_resent_copy_starts_again_after_its_exact_pause_with_its_hedge_number() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let quarter = Duration::from_millis(250);
    let mut decider = Resending::new(&[NextCopy::Resend(quarter)], &[]);
    let call = resent(
        &settings,
        &mut decider,
        10 * SECOND,
        1,
        the_first_send_fails,
    )
    .await;
    // Copy 0 alone failed at 1 s and went again 250 ms later, still copy 0 of attempt 1; it
    // answered at 2.25 s, before copy 1 was due at 10 s.
    assert_eq!(
        call.starts,
        [(1, 0, Duration::ZERO), (1, 0, SECOND + quarter)]
    );
    assert_eq!((call.answer, call.took), (Ok(0), 2 * SECOND + quarter));
    assert_eq!(decider.failed, [(1, 0, SECOND)]);
    // One transparent retry of attempt 1, no hedged copy, no retry.
    assert_eq!(call.events, ["TransparentRetry { attempt: 1 }"]);
    assert_eq!(
        (
            call.counters.transparent_retries(),
            call.counters.hedged_copies(),
            call.counters.retries()
        ),
        (1, 0, 0)
    );
}

#[tokio::test(start_paused = true)]
async fn a_resent_copy_draws_no_token_and_leaves_the_hedges_schedule_as_it_was() {
    // One token per call's first attempt, none in reserve: one copy, however many resends.
    static ONE_COPY: RetryBudget = RetryBudget::new().ratio(1.0).min_per_second(0);
    let policy = never_retries();
    let settings = Settings::new(&policy).budget(Some(&ONE_COPY));
    let mut decider = Resending::new(&[NextCopy::Resend(Duration::ZERO)], &[]);
    // Copy 0 fails at 1 s and goes again at once (slow: 5 s); copy 1 is due at 2 s, on the
    // schedule from the attempt's start, and takes the one token.
    fn copies(_: u32, hedge: u16, n: usize) -> (Duration, Result<u32, CallError>) {
        match (hedge, n) {
            (0, 0) => (SECOND, Err(CallError::Busy)),
            (0, _) => (5 * SECOND, Ok(0)),
            _ => (SECOND, Ok(1)),
        }
    }
    let call = resent(&settings, &mut decider, 2 * SECOND, 2, copies).await;
    assert_eq!(
        call.starts,
        [(1, 0, Duration::ZERO), (1, 0, SECOND), (1, 1, 2 * SECOND)]
    );
    assert_eq!((call.answer, call.took), (Ok(1), 3 * SECOND));
    // Copy 2 was due at 4 s, but the call had ended.
    assert_eq!(
        call.events,
        ["TransparentRetry { attempt: 1 }", "HedgedCopy { hedge: 1 }"]
    );
    assert_eq!(
        (
            call.counters.transparent_retries(),
            call.counters.hedged_copies()
        ),
        (1, 1)
    );

    // Three resends in a row take no token either: copy 1 still gets the call's one token.
    let mut decider = Resending::new(
        &[
            NextCopy::Resend(Duration::ZERO),
            NextCopy::Resend(Duration::ZERO),
            NextCopy::Resend(Duration::ZERO),
        ],
        &[],
    );
    fn thrice(_: u32, hedge: u16, n: usize) -> (Duration, Result<u32, CallError>) {
        match (hedge, n) {
            (0, 0..3) => (Duration::from_millis(100), Err(CallError::Busy)),
            _ => (10 * SECOND, Ok(u32::from(hedge))),
        }
    }
    let call = resent(&settings, &mut decider, 2 * SECOND, 1, thrice).await;
    let ms = Duration::from_millis;
    assert_eq!(
        call.starts,
        [
            (1, 0, ms(0)),
            (1, 0, ms(100)),
            (1, 0, ms(200)),
            (1, 0, ms(300)),
            (1, 1, ms(2000)),
        ]
    );
    assert_eq!((call.answer, call.took), (Ok(0), ms(10_300)));
    assert_eq!(
        (
            call.counters.transparent_retries(),
            call.counters.hedged_copies()
        ),
        (3, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_resent_copy_keeps_its_attempts_number_and_its_hedge_number() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let quarter = Duration::from_millis(250);
    // Attempt 1's only copy fails at once and nothing brings a copy forward: the attempt ends,
    // and the decider retries it after a second. In attempt 2, copy 1 fails and is resent.
    let mut decider = Resending::new(
        &[NextCopy::OnSchedule, NextCopy::Resend(quarter)],
        &[Next::Retry(SECOND)],
    );
    fn copies(attempt: u32, hedge: u16, n: usize) -> (Duration, Result<u32, CallError>) {
        match (attempt, hedge, n) {
            (1, _, _) => (Duration::ZERO, Err(CallError::Busy)),
            (_, 0, _) => (10 * SECOND, Ok(0)),
            (_, _, 0) => (SECOND, Err(CallError::Busy)),
            (_, hedge, _) => (SECOND, Ok(u32::from(hedge) * 10 + attempt)),
        }
    }
    let call = resent(
        &settings,
        &mut decider,
        Duration::from_millis(500),
        1,
        copies,
    )
    .await;
    let ms = Duration::from_millis;
    assert_eq!(
        call.starts,
        [
            (1, 0, ms(0)),
            (2, 0, ms(1000)),
            (2, 1, ms(1500)),
            (2, 1, ms(2750)),
        ]
    );
    // Copy 1 of attempt 2 answered, after its resend.
    assert_eq!((call.answer, call.took), (Ok(12), ms(3750)));
    assert_eq!(decider.failed, [(1, 0, ms(0)), (2, 1, ms(2500))]);
    assert_eq!(
        call.events,
        [
            "Retry { attempt: 1 }",
            "HedgedCopy { hedge: 1 }",
            "TransparentRetry { attempt: 2 }"
        ]
    );
    assert_eq!(
        (
            call.counters.transparent_retries(),
            call.counters.hedged_copies(),
            call.counters.retries()
        ),
        (1, 1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_resent_copys_pause_past_the_deadline_is_not_waited_for() {
    let policy = never_retries().deadline(3 * SECOND);
    let settings = Settings::new(&policy);
    let mut decider = Resending::new(&[NextCopy::Resend(5 * SECOND)], &[]);
    let call = resent(
        &settings,
        &mut decider,
        10 * SECOND,
        1,
        the_first_send_fails,
    )
    .await;
    // 1 s + 5 s is past the 3 s deadline: the copy stays failed, nothing runs, the attempt
    // ends with its failure at once.
    assert_eq!(call.starts, [(1, 0, Duration::ZERO)]);
    assert_eq!((call.answer, call.took), (Err(CallError::Busy), SECOND));
    assert_eq!(call.counters.transparent_retries(), 0);
    assert!(call.events.is_empty(), "{:?}", call.events);

    // Within the deadline (1 s + 1 s < 3 s), the pause is taken.
    let mut decider = Resending::new(&[NextCopy::Resend(SECOND)], &[]);
    let call = resent(
        &settings,
        &mut decider,
        10 * SECOND,
        1,
        the_first_send_fails,
    )
    .await;
    assert_eq!(call.starts, [(1, 0, Duration::ZERO), (1, 0, 2 * SECOND)]);
    assert_eq!((call.answer, call.took), (Ok(0), 3 * SECOND));
}

#[tokio::test(start_paused = true)]
async fn a_resent_copys_pause_ends_with_the_call() {
    let policy = never_retries();
    let settings = Settings::new(&policy);
    let mut decider = Resending::new(&[NextCopy::Resend(10 * SECOND)], &[]);
    let started = Instant::now();
    let call = resent(
        &settings,
        &mut decider,
        20 * SECOND,
        1,
        the_first_send_fails,
    );
    let cut = tokio::time::timeout(2 * SECOND, call).await;
    assert!(cut.is_err(), "the caller's timeout ended the call");
    assert_eq!(started.elapsed(), 2 * SECOND);
    assert_eq!(decider.failed, [(1, 0, SECOND)]);
}
