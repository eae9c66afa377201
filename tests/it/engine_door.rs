//! A door written from `retry_runtime::engine`'s docs alone, as its author meets them: a
//! timed-out attempt is judged by the door's own classifier (`Settings::timeout`); an attempt's
//! future is dropped on a timeout, a lost hedge or the caller's drop, and takes its connection
//! with it (`Operation`, "Cancellation"); a name read from configuration needs no leak
//! (`engine::interned`); an error type without `From<Rejected>` drives a door that has no gate.
//! Under tokio's paused clock, with exact call counts and virtual times.

use retry_runtime::engine::{self, DynHooks, Operation, Settings};
use retry_runtime::{
    CircuitOpen, Elapsed, GiveUp, Hedge, Jitter, Policy, RetryEvent, TokioTimer, Verdict,
};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// A door's error without `From<Rejected>`: the door has no gate.
#[derive(Debug, PartialEq)]
enum CallError {
    Busy,
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

fn policy() -> Policy {
    Policy::new().max(2).base(SECOND).jitter(Jitter::None)
}

/// An attempt that never answers.
fn hangs() -> impl Future<Output = Result<u32, CallError>> {
    std::future::pending()
}

// ---- Settings::timeout: the door's classifier judges the converted `Elapsed` ----------------

#[tokio::test(start_paused = true)]
async fn a_classifier_that_fails_on_a_timeout_gets_one_attempt() {
    let policy = policy();
    let settings = Settings::new(&policy).timeout(Some(2 * SECOND));
    // A request that may have reached the server is not sent again after a timeout.
    let classify = |error: &CallError| Verdict::from(*error == CallError::Busy);
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    let answer = engine::drive(&settings, DynHooks::new(&classify), TokioTimer, || {
        calls.fetch_add(1, Ordering::Relaxed);
        hangs()
    })
    .await;
    assert_eq!(answer, Err(CallError::Timeout));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(started.elapsed(), 2 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_classifier_that_retries_a_timeout_gets_every_attempt() {
    let policy = policy();
    let settings = Settings::new(&policy).timeout(Some(2 * SECOND));
    let classify = |error: &CallError| Verdict::from(*error != CallError::Open);
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    let answer = engine::drive(&settings, DynHooks::new(&classify), TokioTimer, || {
        calls.fetch_add(1, Ordering::Relaxed);
        hangs()
    })
    .await;
    assert_eq!(answer, Err(CallError::Timeout));
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    // Three attempts of 2 s, and the pauses of 1 s and 2 s between them.
    assert_eq!(started.elapsed(), (2 + 1 + 2 + 2 + 2) * SECOND);
}

// ---- Operation, "Cancellation": an attempt's connection goes with its future ----------------

/// A connection of the door's pool; dropping it closes it, and the pool hears which.
struct Connection<'p> {
    id: u32,
    pool: &'p Pool,
}

impl Drop for Connection<'_> {
    fn drop(&mut self) {
        self.pool
            .closed
            .lock()
            .expect("the closed list")
            .push(self.id);
    }
}

/// Idle connections, the next id to open, and the ids closed.
#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<u32>>,
    opened: AtomicU32,
    closed: Mutex<Vec<u32>>,
}

impl Pool {
    fn take(&self) -> Connection<'_> {
        let idle = self.idle.lock().expect("the idle list").pop();
        let id = idle.unwrap_or_else(|| self.opened.fetch_add(1, Ordering::Relaxed) + 1);
        Connection { id, pool: self }
    }

    fn put_back(&self, connection: Connection<'_>) {
        self.idle.lock().expect("the idle list").push(connection.id);
        std::mem::forget(connection);
    }

    fn idle(&self) -> Vec<u32> {
        self.idle.lock().expect("the idle list").clone()
    }

    fn closed(&self) -> Vec<u32> {
        self.closed.lock().expect("the closed list").clone()
    }
}

/// The operation of the `Operation` docs' example: each attempt takes a connection into its own
/// future and puts it back only after a whole exchange. The exchange on connection `hang_on`
/// never answers.
struct Send<'d> {
    pool: &'d Pool,
    hang_on: u32,
}

impl Operation<u32, CallError> for Send<'_> {
    fn attempt(&mut self) -> impl Future<Output = Result<u32, CallError>> {
        let (pool, hang_on) = (self.pool, self.hang_on);
        async move {
            let connection = pool.take();
            if connection.id == hang_on {
                // The request is sent; its answer never comes.
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(SECOND).await;
            let answer = connection.id;
            pool.put_back(connection);
            Ok(answer)
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_cut_off_by_the_timeout_closes_its_connection_and_the_next_opens_another() {
    let pool = Pool::default();
    let policy = policy();
    let settings = Settings::new(&policy).timeout(Some(2 * SECOND));
    let classify = |error: &CallError| Verdict::from(*error == CallError::Timeout);
    let started = Instant::now();
    let answer = engine::drive(
        &settings,
        DynHooks::new(&classify),
        TokioTimer,
        Send {
            pool: &pool,
            hang_on: 1,
        },
    )
    .await;
    // Connection 1 went with the attempt the timeout dropped; the retry opened connection 2.
    assert_eq!(answer, Ok(2));
    assert_eq!(pool.closed(), [1]);
    assert_eq!(pool.idle(), [2]);
    assert_eq!(started.elapsed(), (2 + 1 + 1) * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_call_the_caller_drops_closes_the_connection_of_its_attempt() {
    let pool = Pool::default();
    let policy = policy();
    let settings = Settings::new(&policy);
    let classify = |_: &CallError| Verdict::Retry;
    let call = engine::drive(
        &settings,
        DynHooks::new(&classify),
        TokioTimer,
        Send {
            pool: &pool,
            hang_on: 1,
        },
    );
    // The caller gives up on the whole call after 5 s.
    let gave_up = tokio::time::timeout(5 * SECOND, call).await;
    assert!(gave_up.is_err(), "the call never answered");
    assert_eq!(pool.closed(), [1]);
    assert_eq!(pool.idle(), Vec::<u32>::new());
}

/// `drive_hedged` hedges with the settings' `hedge`, and without one makes one attempt at a
/// time: the slow attempt is waited for, no copy starts beside it.
#[tokio::test(start_paused = true)]
async fn drive_hedged_without_a_hedge_in_the_settings_makes_no_copy() {
    let policy = Policy::new().max(0);
    let classify = |_: &CallError| Verdict::Retry;
    let started = Instant::now();
    let copies = AtomicU32::new(0);
    let answer = engine::drive_hedged(
        &Settings::new(&policy),
        DynHooks::new(&classify),
        TokioTimer,
        || {
            let copy = copies.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(10 * SECOND).await;
                Ok::<_, CallError>(copy)
            }
        },
    )
    .await;
    assert_eq!(answer, Ok(0));
    assert_eq!(copies.load(Ordering::Relaxed), 1);
    assert_eq!(started.elapsed(), 10 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_hedged_copy_that_loses_is_dropped_with_its_connection() {
    let pool = Pool::default();
    let policy = Policy::new().max(0);
    let hedge = Hedge::after(SECOND);
    let settings = Settings::new(&policy).hedge(Some(&hedge));
    let classify = |_: &CallError| Verdict::Retry;
    let started = Instant::now();
    let answer = engine::drive_hedged(&settings, DynHooks::new(&classify), TokioTimer, || {
        let pool = &pool;
        async move {
            let connection = pool.take();
            if connection.id == 1 {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(SECOND).await;
            let answer = connection.id;
            pool.put_back(connection);
            Ok::<_, CallError>(answer)
        }
    })
    .await;
    // The copy started after 1 s answered 1 s later; the first, still waiting, was dropped.
    assert_eq!(answer, Ok(2));
    assert_eq!(started.elapsed(), 2 * SECOND);
    assert_eq!(pool.closed(), [1]);
    assert_eq!(pool.idle(), [2]);
}

// ---- Settings::name: a name read from configuration --------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_name_read_from_configuration_names_the_events_once_interned() {
    // As a door reads it from its configuration file, once when it is configured.
    let configured = String::from("quotes-eu");
    let name = engine::interned(&configured);
    drop(configured);
    // Configured again (a reload): the same copy, nothing new kept.
    let again = engine::interned(&String::from("quotes-eu"));
    assert!(std::ptr::eq(name, again));

    let policy = policy();
    let settings = Settings::new(&policy).name(name);
    let classify = |_: &CallError| Verdict::Retry;
    let heard = Mutex::new(Vec::new());
    let notify = |_: Result<&u32, &CallError>, event: &RetryEvent| {
        heard.lock().expect("heard").push(event.function);
    };
    let gave_up = Mutex::new(None);
    let on_give_up = |_: Result<&u32, &CallError>, why: &GiveUp| {
        *gave_up.lock().expect("gave up") = Some(why.function);
    };
    let hooks = DynHooks::new(&classify)
        .notify(Some(&notify))
        .on_give_up(Some(&on_give_up));
    let answer = engine::drive(&settings, hooks, TokioTimer, || {
        std::future::ready(Err::<u32, _>(CallError::Busy))
    })
    .await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(*heard.lock().expect("heard"), ["quotes-eu", "quotes-eu"]);
    assert_eq!(*gave_up.lock().expect("gave up"), Some("quotes-eu"));
}

// ---- no gate, no `From<Rejected>` ----------------------------------------------------------------

/// `CallError` has no `From<Rejected>`: without `DynHooks::gate` every driver takes it (this
/// file compiling is half the test), and the breaker's refusal still becomes its `Open`.
#[tokio::test(start_paused = true)]
async fn a_door_without_a_gate_needs_no_from_rejected() {
    static BREAKER: retry_runtime::CircuitBreaker = retry_runtime::CircuitBreaker::new()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(60));
    let policy = policy();
    let settings = Settings::new(&policy).breaker(Some(&BREAKER));
    let classify = |error: &CallError| Verdict::from(*error == CallError::Busy);
    let calls = AtomicU32::new(0);
    let first = engine::drive(&settings, DynHooks::new(&classify), TokioTimer, || {
        calls.fetch_add(1, Ordering::Relaxed);
        std::future::ready(Err::<u32, _>(CallError::Busy))
    })
    .await;
    // The breaker opened on the first failure and ended the call with it.
    assert_eq!(first, Err(CallError::Busy));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    let refused = engine::drive_blocking(&settings, DynHooks::new(&classify), || {
        calls.fetch_add(1, Ordering::Relaxed);
        Ok::<u32, CallError>(1)
    });
    assert_eq!(refused, Err(CallError::Open));
    assert_eq!(calls.load(Ordering::Relaxed), 1, "refused without running");
}

// ---- one sink: a door's events in the runtime's one `Counters` -----------------------------------

/// A door on the engine reports its own events (the call, each attempt) with `engine::report`
/// into the runtime's `Counters`, the type every door hands out, and hands the same counters to
/// the loop (`Settings::sink`), which counts each retry.
#[tokio::test(start_paused = true)]
async fn a_door_on_the_engine_counts_its_events_in_the_runtimes_one_counters() {
    use retry_runtime::engine::{Counters, Event};
    use std::sync::Arc;

    const NAME: &str = "quotes-counted";
    let counters = Arc::new(Counters::default());
    let policy = policy();
    let settings = Settings::new(&policy).name(NAME).sink(&*counters);
    let classify = |error: &CallError| Verdict::from(*error == CallError::Busy);
    let hooks = DynHooks::new(&classify);
    let calls = AtomicU32::new(0);
    engine::report(NAME, Event::Call, &counters);
    let answer = engine::drive(&settings, hooks, TokioTimer, || {
        engine::report(NAME, Event::Attempt, &counters);
        let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
        std::future::ready(if n < 3 { Err(CallError::Busy) } else { Ok(n) })
    })
    .await;
    assert_eq!(answer, Ok(3));
    assert_eq!(
        (counters.calls(), counters.attempts(), counters.retries()),
        (1, 3, 2)
    );
    // What the door did not report stays 0.
    assert_eq!(
        (counters.hedged_copies(), counters.transparent_retries()),
        (0, 0)
    );

    // The HTTP doors hand out the same type (the gRPC door's is checked in retry-grpc's
    // interop tests, `door_events`).
    let http = retry_http::HttpRetry::new(policy);
    let from_options: Arc<Counters> = http.counters();
    let from_layer: Arc<Counters> = retry_http::tower::RetryLayer::new(http.clone()).counters();
    let from_middleware: Arc<Counters> = retry_http::reqwest::RetryMiddleware::new(http).counters();
    assert!(Arc::ptr_eq(&from_options, &from_layer));
    assert!(Arc::ptr_eq(&from_options, &from_middleware));
}

// ---- one sink: the loop's own events in the door's sink (`Settings::sink`) ------------------------

/// A door author's sink: each event heard, with its function, in order.
#[derive(Default)]
struct Heard(Mutex<Vec<String>>);

impl engine::Sink for Heard {
    fn event(&self, function: &'static str, event: &engine::Event<'_>) {
        self.0
            .lock()
            .expect("heard")
            .push(format!("{function}: {event:?}"));
    }
}

impl Heard {
    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("heard"))
    }
}

/// Each retry the loop decides reaches the door's sink once, as its pause is decided; the
/// failure it gives up on and a permanent error are no retry.
#[tokio::test(start_paused = true)]
async fn the_loop_reports_each_retry_once_to_the_doors_sink() {
    use retry_runtime::engine::Counters;

    let (heard, counters) = (Heard::default(), Counters::default());
    let sink = (&heard, &counters);
    let policy = policy();
    let settings = Settings::new(&policy).name("quotes-sink").sink(&sink);
    let classify = |error: &CallError| Verdict::from(*error == CallError::Busy);
    let calls = AtomicU32::new(0);
    let started = Instant::now();
    let answer = engine::drive(&settings, DynHooks::new(&classify), TokioTimer, || {
        calls.fetch_add(1, Ordering::Relaxed);
        std::future::ready(Err::<u32, _>(CallError::Busy))
    })
    .await;
    assert_eq!(answer, Err(CallError::Busy));
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(started.elapsed(), 3 * SECOND);
    assert_eq!(
        heard.taken(),
        [
            "quotes-sink: Retry { attempt: 1 }",
            "quotes-sink: Retry { attempt: 2 }"
        ]
    );
    assert_eq!((counters.retries(), counters.calls()), (2, 0));

    // A permanent error is an answer: no retry, no event.
    let answer = engine::drive(&settings, DynHooks::new(&classify), TokioTimer, || {
        std::future::ready(Err::<u32, _>(CallError::Open))
    })
    .await;
    assert_eq!(answer, Err(CallError::Open));
    assert_eq!(heard.taken(), Vec::<String>::new());
    assert_eq!(counters.retries(), 2);

    // The blocking driver reports to the same sink.
    let n = AtomicU32::new(0);
    let answer = engine::drive_blocking(&settings, DynHooks::new(&classify), || {
        match n.fetch_add(1, Ordering::Relaxed) {
            0 => Err(CallError::Busy),
            _ => Ok(7),
        }
    });
    assert_eq!(answer, Ok(7));
    assert_eq!(heard.taken(), ["quotes-sink: Retry { attempt: 1 }"]);
    assert_eq!(counters.retries(), 3);
}

/// Each hedged copy the loop starts (`drive_hedged`) reaches the door's sink once, numbered.
#[tokio::test(start_paused = true)]
async fn the_loop_reports_each_hedged_copy_it_starts_to_the_doors_sink() {
    use retry_runtime::attempt;
    use retry_runtime::engine::Counters;

    let (heard, counters) = (Heard::default(), Counters::default());
    let sink = (&heard, &counters);
    let policy = Policy::new().max(0);
    let hedge = Hedge::after(SECOND).max_hedges(2);
    let settings = Settings::new(&policy)
        .name("quotes-hedged")
        .hedge(Some(&hedge))
        .sink(&sink);
    let classify = |_: &CallError| Verdict::Retry;
    let started = Instant::now();
    let answer = engine::drive_hedged(&settings, DynHooks::new(&classify), TokioTimer, || async {
        // The first attempt and the first copy never answer; the second copy does, 1 s on.
        let copy = attempt().hedge();
        if copy < 2 {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(SECOND).await;
        Ok::<_, CallError>(copy)
    })
    .await;
    assert_eq!(answer, Ok(2));
    assert_eq!(started.elapsed(), 3 * SECOND);
    assert_eq!(
        heard.taken(),
        [
            "quotes-hedged: HedgedCopy { hedge: 1 }",
            "quotes-hedged: HedgedCopy { hedge: 2 }"
        ]
    );
    assert_eq!((counters.hedged_copies(), counters.retries()), (2, 0));
}

/// A door's error with `From<Rejected>`, for a door with a gate.
#[derive(Debug, PartialEq)]
enum GatedError {
    Busy,
    Shed,
    Other,
}

impl From<Elapsed> for GatedError {
    fn from(_: Elapsed) -> Self {
        GatedError::Other
    }
}

impl From<CircuitOpen> for GatedError {
    fn from(_: CircuitOpen) -> Self {
        GatedError::Other
    }
}

impl From<retry_runtime::Rejected> for GatedError {
    fn from(_: retry_runtime::Rejected) -> Self {
        GatedError::Shed
    }
}

/// An attempt the gate sheds reaches the door's sink once, with its number, after the retries
/// before it: a retry whose attempt the gate then sheds is both.
#[tokio::test(start_paused = true)]
async fn the_loop_reports_each_attempt_the_gate_sheds_to_the_doors_sink() {
    use retry_runtime::engine::Counters;
    use retry_runtime::{AdmissionGate, Aimd};

    static ONE_SLOT: AdmissionGate =
        AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1).max_limit(1));
    let (heard, counters) = (Heard::default(), Counters::default());
    let sink = (&heard, &counters);
    let policy = policy();
    let shed = Settings::new(&policy).name("quotes-gated").sink(&sink);
    // The other call: the gate, no sink.
    let holder = Settings::new(&policy);
    let classify = |error: &GatedError| Verdict::from(*error == GatedError::Busy);
    let calls = AtomicU32::new(0);
    let (held, answer) = tokio::join!(
        async {
            // Takes the slot while the other call pauses (0.5 s in), and holds it 10 s.
            tokio::time::sleep(SECOND / 2).await;
            engine::drive(
                &holder,
                DynHooks::new(&classify).gate(Some(&ONE_SLOT)),
                TokioTimer,
                || async {
                    tokio::time::sleep(10 * SECOND).await;
                    Ok::<u32, GatedError>(1)
                },
            )
            .await
        },
        engine::drive(
            &shed,
            DynHooks::new(&classify).gate(Some(&ONE_SLOT)),
            TokioTimer,
            || {
                calls.fetch_add(1, Ordering::Relaxed);
                std::future::ready(Err::<u32, _>(GatedError::Busy))
            },
        )
    );
    assert_eq!(held, Ok(1));
    // Attempt 1 ran and failed; its retry (attempt 2, 1 s in) was shed without running, and the
    // loop gave up.
    assert_eq!(answer, Err(GatedError::Shed));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(
        heard.taken(),
        [
            "quotes-gated: Retry { attempt: 1 }",
            "quotes-gated: GateRejected { attempt: 2 }"
        ]
    );
    assert_eq!((counters.gate_rejected(), counters.retries()), (1, 1));
}
