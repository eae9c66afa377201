//! `cargo run -p retry-bench --bin peers`
//!
//! Checks behaviours of `#[retry]` (retry-runtime) and of four peer crates, backon 1.6.0,
//! tokio-retry 0.3.2, backoff 0.4.0 and retry 2.2.0, and prints a markdown table of what was
//! observed: each row a check, each column a crate. Every cell comes from running the crate here
//! or, where the row says so, from reading its source under the cargo registry. Async checks run
//! on tokio's paused clock, sync ones with millisecond pauses, so the whole run takes about a
//! second.

use backon::{BackoffBuilder, BlockingRetryable, Retryable};
use retry_runtime::{Jitter, Policy, RetryEvent, Verdict};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The crates, in column order.
const CRATES: [&str; 5] = [
    "`#[retry]` (retry-runtime 0.1.0)",
    "backon 1.6.0",
    "tokio-retry 0.3.2",
    "backoff 0.4.0",
    "retry 2.2.0",
];

/// Registry directory names of the peers, in column order after ours.
const PEER_DIRS: [&str; 4] = [
    "backon-1.6.0",
    "tokio-retry-0.3.2",
    "backoff-0.4.0",
    "retry-2.2.0",
];

/// Runs of each randomised check.
const RUNS: u32 = 10_000;

/// The error of every checked call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fail {
    /// Passing: worth a retry.
    Busy,
    /// Permanent: not worth a retry.
    Invalid,
}

fn is_busy(error: &Fail) -> bool {
    *error == Fail::Busy
}

struct Row {
    check: &'static str,
    cells: [String; 5],
}

fn main() {
    let rows = vec![
        sync_support(),
        async_support(),
        predicate(),
        default_limit(),
        default_jitter(),
        shape(),
        cap_with_jitter(),
        notify_hears_pause(),
        server_pause(),
        idempotency_guard(),
        unsafe_in_source(),
    ];
    println!("| check | {} |", CRATES.join(" | "));
    println!("|---{}|", "|---".repeat(CRATES.len()));
    for row in rows {
        // A `|` inside a code span still splits a markdown table cell unless escaped.
        let cells: Vec<String> = row.cells.iter().map(|c| c.replace('|', "\\|")).collect();
        println!("| {} | {} |", row.check, cells.join(" | "));
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
}

fn ms(d: Duration) -> String {
    let millis = d.as_secs_f64() * 1000.0;
    if millis >= 1000.0 {
        format!("{} s", trim(d.as_secs_f64()))
    } else {
        format!("{} ms", trim(millis))
    }
}

/// Three decimals at most, cut (not rounded: 1.9999 s is not 2 s), without trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{:.3}", (x * 1000.0).floor() / 1000.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// The durations in order, a run of three or more equal ones written once with its count.
fn list(ds: &[Duration]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ds.len() {
        let run = ds[i..].iter().take_while(|d| **d == ds[i]).count();
        if run >= 3 {
            parts.push(format!("{} ×{run}", ms(ds[i])));
        } else {
            parts.extend(ds[i..i + run].iter().map(|d| ms(*d)));
        }
        i += run;
    }
    parts.join(", ")
}

/// `10000` as `10,000`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn gaps(starts: &[Instant]) -> Vec<Duration> {
    starts.windows(2).map(|w| w[1] - w[0]).collect()
}

// ---------------------------------------------------------------------------------------------
// Sync and async: a call that fails twice with a passing error, then succeeds.

static OURS_SYNC_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry_runtime::retry(max = 3, base = "1ms", on = is_busy)]
fn ours_sync() -> Result<u32, Fail> {
    let n = OURS_SYNC_CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 { Err(Fail::Busy) } else { Ok(n) }
}

static OURS_ASYNC_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry_runtime::retry(max = 3, base = "1ms", on = is_busy)]
async fn ours_async() -> Result<u32, Fail> {
    let n = OURS_ASYNC_CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 { Err(Fail::Busy) } else { Ok(n) }
}

/// A counter and a call that fails twice, then returns the number of calls.
fn flaky() -> (Rc<RefCell<u32>>, impl FnMut() -> Result<u32, Fail>) {
    let calls = Rc::new(RefCell::new(0));
    let counter = calls.clone();
    (calls, move || {
        *counter.borrow_mut() += 1;
        let n = *counter.borrow();
        if n < 3 { Err(Fail::Busy) } else { Ok(n) }
    })
}

fn outcome<E: std::fmt::Debug>(how: &str, result: Result<u32, E>) -> String {
    match result {
        Ok(n) => format!("yes, {how}: `Ok` after {n} calls"),
        Err(e) => format!("{how}: failed with {e:?}"),
    }
}

fn sync_support() -> Row {
    let ours = outcome("`#[retry] fn`", ours_sync());

    let (_, f) = flaky();
    let backon = outcome(
        "`BlockingRetryable`",
        f.retry(backon::ConstantBuilder::default().with_delay(Duration::from_millis(1)))
            .call(),
    );

    let tokio_retry = format!(
        "no sync runner: `Retry`/`RetryIf` are futures; `thread::sleep` appears {} times in src",
        count_in_dir(&peer_src("tokio-retry-0.3.2"), "thread::sleep")
    );

    let (_, mut f) = flaky();
    let backoff = outcome(
        "`backoff::retry`",
        backoff::retry(
            backoff::backoff::Constant::new(Duration::from_millis(1)),
            || f().map_err(backoff::Error::transient),
        ),
    );

    let (_, f) = flaky();
    let retry = outcome(
        "`retry::retry`",
        retry::retry(retry::delay::Fixed::from_millis(1).take(3), f),
    );

    Row {
        check: "sync: a call failing twice, then `Ok`",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

fn async_support() -> Row {
    let rt = paused_runtime();
    let ours = outcome("`#[retry] async fn`", rt.block_on(ours_async()));

    let (_, mut f) = flaky();
    let backon = outcome(
        "`Retryable`",
        rt.block_on(
            (move || std::future::ready(f()))
                .retry(backon::ConstantBuilder::default().with_delay(Duration::from_millis(1))),
        ),
    );

    let (_, mut f) = flaky();
    let tokio_retry = outcome(
        "`Retry::start`",
        rt.block_on(tokio_retry::Retry::start(
            tokio_retry::strategy::FixedInterval::from_millis(1).take(3),
            move || std::future::ready(f()),
        )),
    );

    let (_, mut f) = flaky();
    let backoff = outcome(
        "`future::retry` (feature `tokio`)",
        rt.block_on(backoff::future::retry(
            backoff::backoff::Constant::new(Duration::from_millis(1)),
            move || std::future::ready(f().map_err(backoff::Error::transient)),
        )),
    );

    let retry = format!(
        "no async runner: `Future` appears {} times in src",
        count_in_dir(&peer_src("retry-2.2.0"), "Future")
    );

    Row {
        check: "async: the same call as a future (tokio)",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// A predicate: the call fails with a permanent error; how many calls are made?

static OURS_PERMANENT_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry_runtime::retry(max = 3, base = "1ms", on = is_busy)]
fn ours_permanent() -> Result<(), Fail> {
    OURS_PERMANENT_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Fail::Invalid)
}

fn calls_cell(how: &str, calls: u32) -> String {
    let s = if calls == 1 { "" } else { "s" };
    format!("{how}: {calls} call{s}")
}

fn predicate() -> Row {
    let _ = ours_permanent();
    let ours = calls_cell(
        "`on = is_busy`",
        OURS_PERMANENT_CALLS.load(Ordering::SeqCst),
    );

    let calls = Rc::new(RefCell::new(0));
    let c = calls.clone();
    let _ = (move || {
        *c.borrow_mut() += 1;
        Err::<(), _>(Fail::Invalid)
    })
    .retry(backon::ConstantBuilder::default().with_delay(Duration::from_millis(1)))
    .when(is_busy)
    .call();
    let backon = calls_cell("`.when(is_busy)`", *calls.borrow());

    let rt = paused_runtime();
    let calls = Rc::new(RefCell::new(0));
    let c = calls.clone();
    let _ = rt.block_on(tokio_retry::RetryIf::start(
        tokio_retry::strategy::FixedInterval::from_millis(1).take(3),
        move || {
            *c.borrow_mut() += 1;
            std::future::ready(Err::<(), _>(Fail::Invalid))
        },
        is_busy,
    ));
    let tokio_retry = calls_cell("`RetryIf::start(.., is_busy)`", *calls.borrow());

    let mut n = 0;
    let _ = backoff::retry(
        backoff::backoff::Constant::new(Duration::from_millis(1)),
        || -> Result<(), backoff::Error<Fail>> {
            n += 1;
            let e = Fail::Invalid;
            Err(if is_busy(&e) {
                backoff::Error::transient(e)
            } else {
                backoff::Error::permanent(e)
            })
        },
    );
    let backoff = calls_cell("`Error::permanent` for non-busy", n);

    let mut n = 0;
    let _ = retry::retry(retry::delay::Fixed::from_millis(1).take(3), || {
        n += 1;
        let e = Fail::Invalid;
        if is_busy(&e) {
            retry::OperationResult::<(), _>::Retry(e)
        } else {
            retry::OperationResult::Err(e)
        }
    });
    let retry = calls_cell("`OperationResult::Err` for non-busy", n);

    Row {
        check: "a predicate picks the errors to retry: calls made on a permanent error, limit 3 retries",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// The limit when none is given.

static OURS_DEFAULT_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry_runtime::retry(on = is_busy)]
fn ours_default() -> Result<(), Fail> {
    OURS_DEFAULT_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Fail::Busy)
}

fn default_limit() -> Row {
    let (_, pauses) = retry_runtime::testing::record(ours_default);
    let ours = format!(
        "bounded: {} calls, {} pauses (`#[retry(on = ..)]`, always failing, pauses recorded)",
        OURS_DEFAULT_CALLS.load(Ordering::SeqCst),
        pauses.len()
    );

    let n = backon::ExponentialBuilder::default().build().count();
    let backon = format!("bounded: `ExponentialBuilder::default()` yields {n} pauses");

    let probe = 100_000;
    let n = tokio_retry::strategy::ExponentialBackoff::from_millis(1)
        .take(probe)
        .count();
    let tokio_retry = format!(
        "unbounded: `ExponentialBackoff` still yielding after {} pauses (`take(n)` is the limit)",
        thousands(n)
    );

    let b = backoff::ExponentialBackoff::default();
    let backoff = format!(
        "bounded by time only: `max_elapsed_time` = {:?} ({}), no count limit",
        b.max_elapsed_time,
        b.max_elapsed_time
            .map_or("none".into(), |d| format!("{} min", d.as_secs() / 60))
    );

    let n = retry::delay::Exponential::from_millis(1)
        .take(probe)
        .count();
    let retry = format!(
        "unbounded: `Exponential` still yielding after {} pauses",
        thousands(n)
    );

    Row {
        check: "limit when none is given",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// Jitter by default: the first pause of the default configuration, drawn many times.

fn range(draws: impl Iterator<Item = Duration>) -> (Duration, Duration) {
    draws.fold((Duration::MAX, Duration::ZERO), |(lo, hi), d| {
        (lo.min(d), hi.max(d))
    })
}

fn spread(what: &str, (lo, hi): (Duration, Duration)) -> String {
    if lo == hi {
        format!(
            "off: {what} = {} in all {} draws",
            ms(lo),
            thousands(RUNS as usize)
        )
    } else {
        format!(
            "on: {what} from {} to {} in {} draws",
            ms(lo),
            ms(hi),
            thousands(RUNS as usize)
        )
    }
}

fn default_jitter() -> Row {
    let p = Policy::new();
    let ours = spread(
        "`Policy::new()` first pause",
        range((0..RUNS).map(|_| p.delay(1, Duration::ZERO))),
    );

    let backon = spread(
        "`ExponentialBuilder::default()` first pause",
        range((0..RUNS).filter_map(|_| backon::ExponentialBuilder::default().build().next())),
    ) + "; opt-in `with_jitter()`";

    let tokio_retry = spread(
        "`ExponentialBackoff::from_millis(2).factor(500)` first pause",
        range((0..RUNS).filter_map(|_| {
            tokio_retry::strategy::ExponentialBackoff::from_millis(2)
                .factor(500)
                .next()
        })),
    ) + "; opt-in `.map(jitter)` (feature `rand`)";

    use backoff::backoff::Backoff as _;
    let backoff = spread(
        "`ExponentialBackoff::default()` first pause",
        range((0..RUNS).filter_map(|_| backoff::ExponentialBackoff::default().next_backoff())),
    ) + &format!(
        " (`randomization_factor` = {})",
        backoff::ExponentialBackoff::default().randomization_factor
    );

    let retry = spread(
        "`Exponential::from_millis(1000)` first pause",
        range((0..RUNS).filter_map(|_| retry::delay::Exponential::from_millis(1000).next())),
    ) + "; opt-in `.map(delay::jitter)` (feature `random`)";

    Row {
        check: "jitter by default",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// The shape: a 1 s start doubling, no jitter, through each crate's constructor for it.

fn shape() -> Row {
    let p = Policy::new()
        .base(Duration::from_secs(1))
        .jitter(Jitter::None);
    let ours = format!(
        "`Policy::new().base(1s)`: {}",
        list(
            &(1..=3)
                .map(|n| p.delay(n, Duration::ZERO))
                .collect::<Vec<_>>()
        )
    );

    let b: Vec<_> = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .build()
        .take(3)
        .collect();
    let backon = format!("`with_min_delay(1s)`: {}", list(&b));

    let t: Vec<_> = tokio_retry::strategy::ExponentialBackoff::from_millis(1000)
        .take(3)
        .collect();
    let t2: Vec<_> = tokio_retry::strategy::ExponentialBackoff::from_millis(2)
        .factor(500)
        .take(3)
        .collect();
    let tokio_retry = format!(
        "`from_millis(1000)`: {} (base^n); `from_millis(2).factor(500)`: {}",
        list(&t),
        list(&t2)
    );

    use backoff::backoff::Backoff as _;
    let mut eb = backoff::ExponentialBackoffBuilder::new()
        .with_initial_interval(Duration::from_secs(1))
        .with_multiplier(2.0)
        .with_randomization_factor(0.0)
        .with_max_elapsed_time(None)
        .build();
    let v: Vec<_> = (0..3).filter_map(|_| eb.next_backoff()).collect();
    let backoff = format!(
        "`initial_interval 1s, multiplier 2, randomization 0`: {}",
        list(&v)
    );

    let r: Vec<_> = retry::delay::Exponential::from_millis(1000)
        .take(3)
        .collect();
    let retry = format!("`Exponential::from_millis(1000)`: {}", list(&r));

    Row {
        check: "start 1 s, doubling, no jitter: first 3 pauses",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// A 2 s cap with jitter on: the longest of the first three pauses over many runs.

fn longest(what: &str, runs: impl Iterator<Item = Vec<Duration>>) -> String {
    let max = runs.flatten().max().unwrap_or_default();
    let verdict = if max <= Duration::from_secs(2) {
        "within"
    } else {
        "over"
    };
    format!("{what}: longest {} ({verdict} the cap)", ms(max))
}

fn cap_with_jitter() -> Row {
    let two = Duration::from_secs(2);
    let p = Policy::new().base(Duration::from_secs(1)).max_delay(two);
    let ours = longest(
        "`max_delay(2s)`, default jitter",
        (0..RUNS).map(|_| (1..=3).map(|n| p.delay(n, Duration::ZERO)).collect()),
    );

    let backon = longest(
        "`max_delay(2s).with_jitter()`",
        (0..RUNS).map(|_| {
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_secs(1))
                .with_max_delay(two)
                .with_jitter()
                .with_max_times(3)
                .build()
                .collect()
        }),
    );

    let tokio_retry = longest(
        "`max_delay(2s)`, then `.map(jitter)`",
        (0..RUNS).map(|_| {
            tokio_retry::strategy::ExponentialBackoff::from_millis(2)
                .factor(500)
                .max_delay(two)
                .map(tokio_retry::strategy::jitter)
                .take(3)
                .collect()
        }),
    );

    use backoff::backoff::Backoff as _;
    let backoff = longest(
        "`max_interval 2s`, default randomization 0.5",
        (0..RUNS).map(|_| {
            let mut eb = backoff::ExponentialBackoffBuilder::new()
                .with_initial_interval(Duration::from_secs(1))
                .with_multiplier(2.0)
                .with_max_interval(two)
                .with_max_elapsed_time(None)
                .build();
            (0..3).filter_map(|_| eb.next_backoff()).collect()
        }),
    );

    let retry = longest(
        "no cap setting; `.map(|d| d.min(2s)).map(jitter)`",
        (0..RUNS).map(|_| {
            retry::delay::Exponential::from_millis(1000)
                .map(|d| d.min(two))
                .map(retry::delay::jitter)
                .take(3)
                .collect()
        }),
    );

    Row {
        check: "cap 2 s with jitter on (start 1 s, doubling, 3 pauses, 10,000 runs): longest pause",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// The notify hook: does the pause it is told match the pause slept? Jitter on, tokio's paused
// clock; the call fails three times, then succeeds.

thread_local! {
    static STARTS: RefCell<Vec<Instant>> = const { RefCell::new(Vec::new()) };
    static HEARD: RefCell<Vec<Duration>> = const { RefCell::new(Vec::new()) };
}

fn start_attempt() -> usize {
    STARTS.with(|s| {
        s.borrow_mut().push(Instant::now());
        s.borrow().len()
    })
}

fn hear(pause: Duration) {
    HEARD.with(|h| h.borrow_mut().push(pause));
}

/// The pauses heard and slept since the last call, and a clean slate for the next check.
fn heard_and_slept() -> (Vec<Duration>, Vec<Duration>) {
    let heard = HEARD.with(|h| std::mem::take(&mut *h.borrow_mut()));
    let starts = STARTS.with(|s| std::mem::take(&mut *s.borrow_mut()));
    (heard, gaps(&starts))
}

fn compare(how: &str) -> String {
    let (heard, slept) = heard_and_slept();
    // tokio's timer has millisecond resolution: a sleep ends up to 1 ms after its deadline.
    let same = heard
        .iter()
        .zip(&slept)
        .filter(|(h, s)| s.saturating_sub(**h) <= Duration::from_millis(1) && *s >= *h)
        .count();
    format!(
        "{how}: heard {}; slept {} ({same} of {} equal within tokio's 1 ms tick)",
        list(&heard),
        list(&slept),
        slept.len()
    )
}

fn ours_heard(_: &Fail, event: &RetryEvent) {
    hear(event.pause);
}

#[retry_runtime::retry(max = 3, base = "100ms", jitter, on = is_busy, notify = ours_heard)]
async fn ours_notified() -> Result<(), Fail> {
    if start_attempt() <= 3 {
        Err(Fail::Busy)
    } else {
        Ok(())
    }
}

/// An attempt starts when its future is first polled, not when it is created (backoff creates
/// the next one before the pause).
async fn fail_three_times() -> Result<(), Fail> {
    if start_attempt() <= 3 {
        Err(Fail::Busy)
    } else {
        Ok(())
    }
}

fn notify_hears_pause() -> Row {
    let rt = paused_runtime();
    let _ = heard_and_slept();

    let _ = rt.block_on(ours_notified());
    let ours = compare("`notify` (`RetryEvent::pause`)");

    let _ = rt.block_on(
        fail_three_times
            .retry(
                backon::ExponentialBuilder::default()
                    .with_min_delay(Duration::from_millis(100))
                    .with_jitter()
                    .with_max_times(3),
            )
            .notify(|_, d| hear(d)),
    );
    let backon = compare("`.notify(|e, d|)`, `with_jitter()`");

    let tokio_retry = String::from(
        "no hook: `Retry::start(strategy, action)`, `RetryIf::start(strategy, action, condition)`",
    );

    let _ = rt.block_on(backoff::future::retry_notify(
        backoff::ExponentialBackoffBuilder::new()
            .with_initial_interval(Duration::from_millis(100))
            .build(),
        || async { fail_three_times().await.map_err(backoff::Error::transient) },
        |_: Fail, d| hear(d),
    ));
    let backoff = compare("`retry_notify`, default randomization");

    let retry = String::from("no hook: `retry_with_index` passes only the attempt number");

    Row {
        check: "a notify hook hears the real pause (jitter on, paused tokio clock)",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// A server-suggested pause (HTTP Retry-After): the server says "wait 3 s" on every failure, the
// limit is 2 retries, the call would fail 10 times.

fn ours_server_says(_: &Fail) -> Verdict {
    Verdict::RetryAfter(Duration::from_secs(3))
}

#[retry_runtime::retry(max = 2, base = "100ms", on = ours_server_says)]
async fn ours_told_to_wait() -> Result<(), Fail> {
    if start_attempt() <= 10 {
        Err(Fail::Busy)
    } else {
        Ok(())
    }
}

async fn fail_ten_times() -> Result<(), Fail> {
    if start_attempt() <= 10 {
        Err(Fail::Busy)
    } else {
        Ok(())
    }
}

fn calls_and_pauses(how: &str) -> String {
    let (_, slept) = heard_and_slept();
    format!("{how}: {} calls, pauses {}", slept.len() + 1, list(&slept))
}

/// backoff 0.4 with a 20 ms `max_elapsed_time`, a call that fails 50 times: the calls made and
/// the time taken, with each error carrying a 2 ms server pause or none.
fn backoff_until_elapsed(server_pause: bool) -> String {
    let calls = std::cell::Cell::new(0u32);
    let begin = std::time::Instant::now();
    let result = backoff::retry(
        backoff::ExponentialBackoffBuilder::new()
            .with_initial_interval(Duration::from_millis(1))
            .with_max_elapsed_time(Some(Duration::from_millis(20)))
            .build(),
        || -> Result<(), backoff::Error<Fail>> {
            calls.set(calls.get() + 1);
            if calls.get() > 50 {
                Ok(())
            } else if server_pause {
                Err(backoff::Error::retry_after(
                    Fail::Busy,
                    Duration::from_millis(2),
                ))
            } else {
                Err(backoff::Error::transient(Fail::Busy))
            }
        },
    );
    let end = if result.is_ok() { "`Ok`" } else { "gave up" };
    format!("{} calls, {end} after {}", calls.get(), ms(begin.elapsed()))
}

fn server_pause() -> Row {
    let rt = paused_runtime();
    let three = Duration::from_secs(3);
    let _ = heard_and_slept();

    let _ = rt.block_on(ours_told_to_wait());
    let ours = calls_and_pauses("`max = 2`, `Verdict::RetryAfter(3s)`");

    let backon_builder = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_times(2);
    let _ = rt.block_on(
        fail_ten_times
            .retry(backon_builder)
            .adjust(move |_, _| Some(three)),
    );
    let documented = calls_and_pauses("`max_times(2)`, `.adjust(|e, d| Some(3s))` as in its docs");
    let _ = rt.block_on(
        fail_ten_times
            .retry(backon_builder)
            .adjust(move |_, d| d.map(|d| d.max(three))),
    );
    let guarded = calls_and_pauses("`.adjust(|e, d| d.map(|d| d.max(3s)))`");
    let backon = format!("{documented}; {guarded}");

    let tokio_retry = String::from(
        "no hook: pauses come only from the strategy iterator; `Condition` returns `bool`",
    );

    // backoff's only limit is elapsed time, on the system clock: this one runs for real, with
    // 2 ms for the 3 s, against a 20 ms `max_elapsed_time`.
    let backoff = format!(
        "`max_elapsed_time` 20 ms (real clock), 2 ms for the 3 s: `Error::retry_after(e, 2ms)`: {}; \
         `Error::transient(e)`: {}",
        backoff_until_elapsed(true),
        backoff_until_elapsed(false)
    );

    let retry = String::from("no hook: `OperationResult` is `Ok`, `Retry` or `Err`");

    Row {
        check: "server says \"wait 3 s\" on each failure, limit 2 retries, call fails 10 times",
        cells: [ours, backon, tokio_retry, backoff, retry],
    }
}

// ---------------------------------------------------------------------------------------------
// Source checks.

/// `src` of a crate in the cargo registry, under `$CARGO_HOME` (or `~/.cargo`).
fn peer_src(dir: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_default();
    let registry = home.join("registry").join("src");
    std::fs::read_dir(&registry)
        .into_iter()
        .flatten()
        .flatten()
        .map(|index| index.path().join(dir).join("src"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| registry.join(dir).join("src"))
}

fn ours_src() -> [PathBuf; 2] {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [
        root.join("retry-runtime").join("src"),
        root.join("retry-macro").join("src"),
    ]
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Occurrences of `needle` (case-insensitive) in the `.rs` files under `dir`.
fn count_in_dir(dir: &Path, needle: &str) -> usize {
    let needle = needle.to_lowercase();
    rust_files(dir)
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|text| text.to_lowercase().matches(&needle).count())
        .sum()
}

fn idempotency_guard() -> Row {
    let stderr =
        include_str!("../../../tests-build/tests/ui/non_idempotent_after_retry_without_key.stderr");
    let ours = if stderr.contains("is `#[non_idempotent]`, so a retry without an idempotency key") {
        "compile error: `#[non_idempotent]` without a key parameter (trybuild case \
         `tests-build/tests/ui/non_idempotent_after_retry_without_key.rs`)"
            .to_string()
    } else {
        "the trybuild case no longer shows the error".to_string()
    };
    let mut cells = [
        ours,
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ];
    for (cell, dir) in cells[1..].iter_mut().zip(PEER_DIRS) {
        let n = count_in_dir(&peer_src(dir), "idempot");
        *cell = if n == 0 {
            "no such guard: \"idempot\" appears 0 times in src".to_string()
        } else {
            format!("\"idempot\" appears {n} times in src: read it")
        };
    }
    Row {
        check: "a non-idempotent call without a key is stopped at compile time",
        cells,
    }
}

/// Lines with the word `unsafe` (not `unsafe_code`) under `dirs`: (in code, in comments).
fn unsafe_lines(dirs: &[PathBuf]) -> (Vec<String>, usize) {
    let mut code = Vec::new();
    let mut comments = 0;
    for dir in dirs {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                let word = line.match_indices("unsafe").any(|(at, _)| {
                    let before = line[..at].chars().next_back();
                    let after = line[at + "unsafe".len()..].chars().next();
                    let edge =
                        |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    edge(before) && edge(after)
                });
                if !word {
                    continue;
                }
                if line.trim_start().starts_with("//") {
                    comments += 1;
                } else {
                    let name = file.file_name().unwrap_or_default().to_string_lossy();
                    code.push(format!("{name}:{}", i + 1));
                }
            }
        }
    }
    (code, comments)
}

fn unsafe_cell(dirs: &[PathBuf]) -> String {
    if dirs.iter().any(|d| !d.is_dir()) {
        return "source not found".to_string();
    }
    let (code, comments) = unsafe_lines(dirs);
    let mut cell = format!("{} lines of code", code.len());
    if !code.is_empty() {
        cell += &format!(" ({})", code.join(", "));
    }
    if comments > 0 {
        cell += &format!("; {comments} in comments");
    }
    cell
}

fn unsafe_in_source() -> Row {
    let forbidding = ours_src()
        .iter()
        .filter(|dir| count_in_dir(dir, "#![forbid(unsafe_code)]") > 0)
        .count();
    let ours = unsafe_cell(&ours_src())
        + &format!("; `#![forbid(unsafe_code)]` in {forbidding} of 2 crates (runtime, macro)");
    let mut cells = [
        ours,
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ];
    for (cell, dir) in cells[1..].iter_mut().zip(PEER_DIRS) {
        *cell = unsafe_cell(&[peer_src(dir)]);
    }
    Row {
        check: "`unsafe` in the crate's own `src` (word match, lines)",
        cells,
    }
}
