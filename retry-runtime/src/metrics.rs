//! The runtime's metrics, through the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`): every instrument is in [`INSTRUMENTS`], and the guide
//! [`guide::metrics`](crate::guide::metrics) documents them in one table.
//!
//! Nothing here is needed to record: install a recorder (`metrics-exporter-prometheus`, an
//! OpenTelemetry bridge, ...) and every annotated function, [`CircuitBreaker`](crate::CircuitBreaker) and
//! [`RetryBudget`](crate::RetryBudget) records into it. The names are public so that a dashboard, an alert or a test
//! can refer to them without spelling them again.
//!
//! # How handles are kept
//!
//! Registering a metric with labels goes through the recorder's registry (a hash and a lock), too
//! slow for every call, and it allocates the labels: the table below is the hand-made structure
//! that `bench/RESULTS.md` §3 "Metrics on the happy path (issue 19)" (about 10 ns a call) and §4
//! (no allocation with the Prometheus recorder, `bench/tests/no_allocation_metrics.rs`) measure.
//! So each function's handles are registered once per recorder and kept: in
//! a table of the runtime keyed by the function's name (its `&'static str`, by address), and in
//! the breaker or budget itself for theirs. The handles belong to the recorder that was in place
//! when they were registered, so the cache also keeps which recorder that was (by its address):
//! when another recorder is in place (one installed after the first calls, which went to the
//! no-op recorder; a thread's local recorder), the handles are registered again for it. Up to
//! three recorders are kept per function, breaker or budget; beyond that each record goes through
//! the registry of the recorder in place, which is correct but slower.
//!
//! A recorder is told apart by its address, so a *local* recorder
//! ([`metrics::with_local_recorder`]) that is dropped and followed by another at the same
//! address would be taken for the first: use one global recorder
//! ([`metrics::set_global_recorder`]), as exporters install themselves, for anything but a
//! short test.

use crate::GiveUpReason;
use crate::state::observe::End;
use metrics::{Counter, Gauge, Histogram, Key, Label, Level, Metadata, Recorder};
use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The instruments, each written once: its name's constant in [`names`], with its doc, and its
/// row of [`INSTRUMENTS`].
macro_rules! instruments {
    ($(
        $(#[$doc:meta])*
        $name:ident = $metric:literal, $kind:ident, $unit:literal, [$($label:literal),*],
            $when:expr;
    )*) => {
        /// The names of the instruments, as constants.
        pub mod names {
            $($(#[$doc])* pub const $name: &str = $metric;)*
        }

        /// Every instrument the runtime records, in the order of the guide's table.
        pub const INSTRUMENTS: &[Instrument] = &[$(
            Instrument {
                name: names::$name,
                kind: Kind::$kind,
                unit: $unit,
                labels: &[$($label),*],
                when: $when,
            },
        )*];
    };
}

instruments! {
    /// Counter: calls of annotated functions that ended, by `function`, `outcome` and, for
    /// `gave_up` and `fallback`, `reason`.
    CALLS = "retry_calls_total", Counter, "1", ["function", "outcome", "reason"],
        "once as a call ends; `reason` only with `gave_up` and `fallback`";
    /// Counter: retries started (one per pause), by `function`.
    RETRIES = "retry_retries_total", Counter, "1", ["function"],
        "once per retry, as its pause is decided";
    /// Histogram: attempts per call, recorded once as a call ends, by `function`.
    ATTEMPTS = "retry_attempts", Histogram, "1", ["function"], ATTEMPTS_WHEN;
    /// Histogram: each pause taken before a retry, in seconds, by `function`.
    PAUSE = "retry_pause_seconds", Histogram, "seconds", ["function"],
        "once per retry: the pause before it";
    /// Counter: hedges started (copies of an attempt that had not answered, `hedge = ...`), by
    /// `function`.
    HEDGES = "retry_hedges_total", Counter, "1", ["function"],
        "each hedge started beside an attempt that had not answered (`hedge = ...`)";
    /// Gauge: a circuit breaker's state, by `breaker`: 0 closed, 1 open, 2 half-open.
    BREAKER_STATE = "retry_breaker_state", Gauge, "1", ["breaker"],
        "at the breaker's first admission and each change of state: 0 closed, 1 open, 2 half-open";
    /// Counter: a circuit breaker's changes of state, by `breaker` and `to`.
    BREAKER_TRANSITIONS = "retry_breaker_transitions_total", Counter, "1", ["breaker", "to"],
        "each change of state; `to` is `open`, `half_open` or `closed`";
    /// Gauge: the tokens in a retry budget's bucket, by `budget`.
    BUDGET_TOKENS = "retry_budget_tokens", Gauge, "tokens", ["budget"],
        "each deposit and each retry paid with a token";
    /// Counter: retries a retry budget refused, by `budget`.
    BUDGET_REFUSALS = "retry_budget_refusals_total", Counter, "1", ["budget"],
        "each retry the budget refused";
    /// Counter: the doors' own events ([`engine::Event`](crate::engine::Event)), by `function`
    /// and `event` ([`Event::label`](crate::engine::Event::label)).
    DOOR_EVENTS = "retry_door_events_total", Counter, "1", ["function", "event"],
        "each of a door's own events, by `event` (the table below)";
}

/// The label values of `outcome` on [`names::CALLS`].
pub mod outcome {
    /// The first attempt's result was accepted.
    pub const FIRST_TRY: &str = "first_try";
    /// A result was accepted after at least one retry.
    pub const AFTER_RETRIES: &str = "after_retries";
    /// The loop gave up (with a `reason`) and the function has no `fallback`.
    pub const GAVE_UP: &str = "gave_up";
    /// The error was not worth retrying (the classifier said so), after any number of retries.
    pub const PERMANENT: &str = "permanent";
    /// The loop gave up (with a `reason`) and the `fallback` answered.
    pub const FALLBACK: &str = "fallback";
    /// A failure worth retrying, returned at once because a retrying layer above this function
    /// retries the work (nested functions retry once, at the top; `nested = retry` changes it).
    pub const NESTED: &str = "nested";
}

/// What kind of instrument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up; exported as a Prometheus counter (`_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution; exported as a Prometheus histogram or summary, as the recorder chooses.
    Histogram,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        })
    }
}

/// One instrument: a row of the table in the metrics guide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Instrument {
    /// The metric's name, as a recorder exports it.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// The unit of its values (`1` for a count).
    pub unit: &'static str,
    /// Its label keys. Every value is bounded: a function's name, a breaker's or budget's name,
    /// or one of a fixed set; never a key, a URL or an error message.
    pub labels: &'static [&'static str],
    /// When it is recorded.
    pub when: &'static str,
}

/// When `retry_attempts` is recorded. A call whose first attempt's result was accepted (most
/// calls) records no sample: it is counted by `retry_calls_total{outcome="first_try"}`, one
/// attempt each, as gRPC's `grpc.client.call.retries` reports no 0. So the happy path adds one
/// to one counter and nothing else: a histogram sample costs more than the rest of the call
/// with metrics (a Prometheus recorder's histogram also allocates a block every 64 samples).
const ATTEMPTS_WHEN: &str = "once as a call ends, unless its first attempt's result was accepted (`first_try`): the attempts whose body ran";

/// The label of a breaker or budget built without [`name`](crate::CircuitBreaker::name).
pub const UNNAMED: &str = "unnamed";

/// The `reason` label of a [`GiveUpReason`].
pub const fn reason_label(reason: GiveUpReason) -> &'static str {
    REASONS[reason_index(reason)]
}

/// The `reason` labels, in the order of the handles' arrays.
const REASONS: [&str; 6] = [
    "exhausted",
    "deadline",
    "suggested_too_long",
    "budget",
    "breaker_open",
    "gate_rejected",
];

const fn reason_index(reason: GiveUpReason) -> usize {
    match reason {
        GiveUpReason::Exhausted => 0,
        GiveUpReason::Deadline => 1,
        GiveUpReason::SuggestedTooLong(_) => 2,
        GiveUpReason::Budget => 3,
        GiveUpReason::BreakerOpen => 4,
        GiveUpReason::GateRejected { .. } => 5,
    }
}

const METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

fn counter(recorder: &dyn Recorder, name: &'static str, labels: Vec<Label>) -> Counter {
    recorder.register_counter(&Key::from_parts(name, labels), &METADATA)
}

fn gauge(recorder: &dyn Recorder, name: &'static str, labels: Vec<Label>) -> Gauge {
    recorder.register_gauge(&Key::from_parts(name, labels), &METADATA)
}

fn histogram(recorder: &dyn Recorder, name: &'static str, labels: Vec<Label>) -> Histogram {
    recorder.register_histogram(&Key::from_parts(name, labels), &METADATA)
}

/// The handles of one name (a function's, a breaker's, a budget's), as one recorder registers
/// them.
pub(crate) trait Handles {
    fn register(recorder: &dyn Recorder, name: &'static str) -> Self;
}

/// A set of handles registered with one recorder, kept per recorder (see the module's docs).
pub(crate) struct PerRecorder<H> {
    slots: [OnceLock<(usize, H)>; 3],
}

impl<H: Handles> PerRecorder<H> {
    pub(crate) const fn new() -> Self {
        PerRecorder {
            slots: [OnceLock::new(), OnceLock::new(), OnceLock::new()],
        }
    }

    /// The handles of `name` for the recorder in place, registered the first time; or, when
    /// three other recorders hold the slots, handles registered for this use alone.
    #[inline]
    fn with(&self, name: &'static str, use_them: impl FnOnce(&H)) {
        metrics::with_recorder(|recorder| {
            let id = (recorder as *const dyn Recorder).cast::<()>() as usize; // its address
            for slot in &self.slots {
                // `get` first, as in `entry`: with `get_or_init` alone this lookup, on the path
                // of every call with metrics, took 7 more instructions (callgrind, `happy sync:
                // Retrier`).
                let (held, handles) = match slot.get() {
                    Some(entry) => entry,
                    None => slot.get_or_init(|| (id, H::register(recorder, name))),
                };
                if *held == id {
                    return use_them(handles);
                }
            }
            use_them(&H::register(recorder, name));
        });
    }
}

// ---- functions ----

/// The handles of one annotated function.
struct FunctionHandles {
    first_try: Counter,
    after_retries: Counter,
    permanent: Counter,
    nested: Counter,
    gave_up: [Counter; 6],
    fallback: [Counter; 6],
    retries: Counter,
    attempts: Histogram,
    pause: Histogram,
}

impl Handles for FunctionHandles {
    #[cold]
    fn register(recorder: &dyn Recorder, function: &'static str) -> Self {
        let f = || Label::new("function", function);
        let calls = |outcome: &'static str, reason: Option<&'static str>| {
            let mut labels = vec![f(), Label::from_static_parts("outcome", outcome)];
            labels.extend(reason.map(|reason| Label::from_static_parts("reason", reason)));
            counter(recorder, names::CALLS, labels)
        };
        FunctionHandles {
            first_try: calls(outcome::FIRST_TRY, None),
            after_retries: calls(outcome::AFTER_RETRIES, None),
            permanent: calls(outcome::PERMANENT, None),
            nested: calls(outcome::NESTED, None),
            gave_up: REASONS.map(|reason| calls(outcome::GAVE_UP, Some(reason))),
            fallback: REASONS.map(|reason| calls(outcome::FALLBACK, Some(reason))),
            retries: counter(recorder, names::RETRIES, vec![f()]),
            attempts: histogram(recorder, names::ATTEMPTS, vec![f()]),
            pause: histogram(recorder, names::PAUSE, vec![f()]),
        }
    }
}

/// One function's entry in the table: its name (the key) and its handles per recorder.
struct FunctionEntry {
    name: &'static str,
    handles: PerRecorder<FunctionHandles>,
}

/// Functions the table holds; a program with more annotated functions than this records the
/// others through the recorder's registry on every call (correct, slower).
const TABLE_SIZE: usize = 1024;

static TABLE: [OnceLock<Box<FunctionEntry>>; TABLE_SIZE] = [const { OnceLock::new() }; TABLE_SIZE];

/// The entry of `name`, found by its address and length (two names share an address when one is
/// the start of the other); made the first time.
#[inline]
fn entry(name: &'static str) -> Option<&'static FunctionEntry> {
    let hash = (name.as_ptr() as usize as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let start = (hash >> 54) as usize; // the top 10 bits: 0..TABLE_SIZE
    for probe in 0..TABLE_SIZE {
        let slot = &TABLE[(start + probe) % TABLE_SIZE];
        let entry = match slot.get() {
            Some(entry) => entry,
            None => slot.get_or_init(|| {
                let handles = PerRecorder::new();
                Box::new(FunctionEntry { name, handles })
            }),
        };
        if entry.name.as_ptr() == name.as_ptr() && entry.name.len() == name.len() {
            return Some(entry);
        }
    }
    None
}

#[inline]
fn with_function(function: &'static str, f: impl FnOnce(&FunctionHandles)) {
    match entry(function) {
        Some(entry) => entry.handles.with(function, f),
        None => metrics::with_recorder(|r| f(&FunctionHandles::register(r, function))),
    }
}

/// A call of `function` ended with its first attempt's result accepted: one counter, and no
/// sample of `retry_attempts` (see [`ATTEMPTS_WHEN`]). Out of line, so that the happy path
/// carries one call and none of the code behind it (`state/PERFORMANCE.md` §6 keeps logging
/// out of line for the same reason).
#[inline(never)]
pub(crate) fn first_try(function: &'static str) {
    with_function(function, |h| h.first_try.increment(1));
}

/// A call of `function` ended any other way: its outcome (`None`: a result accepted after at
/// least one retry) and its attempts.
#[cold]
#[inline(never)]
pub(crate) fn call_ended(function: &'static str, end: Option<End>, attempts: u32) {
    with_function(function, |h| {
        let counter = match end {
            None => &h.after_retries,
            Some(End::Permanent) => &h.permanent,
            Some(End::Nested) => &h.nested,
            Some(End::GaveUp(reason)) => &h.gave_up[reason_index(reason)],
            Some(End::Fallback(reason)) => &h.fallback[reason_index(reason)],
        };
        counter.increment(1);
        h.attempts.record(f64::from(attempts));
    });
}

/// `function` retries after a pause of `pause` nanoseconds.
#[cold]
#[inline(never)]
pub(crate) fn retrying(function: &'static str, pause: u64) {
    with_function(function, |h| {
        h.retries.increment(1);
        h.pause.record(Duration::from_nanos(pause).as_secs_f64());
    });
}

/// `function` started a hedge. Through the recorder's registry rather than a kept handle: a
/// hedged attempt already boxes each copy, and functions that never hedge get no series.
#[cold]
#[inline(never)]
pub(crate) fn hedged(function: &'static str) {
    metrics::counter!(names::HEDGES, "function" => function).increment(1);
}

/// `function` (a door) reported the event labelled `event`. Through the recorder's registry
/// rather than a kept handle, as [`hedged`]: the doors' events are rare, and a door that never
/// has one gets no series.
#[cold]
#[inline(never)]
pub(crate) fn door_event(function: &'static str, event: &'static str) {
    metrics::counter!(names::DOOR_EVENTS, "function" => function, "event" => event).increment(1);
}

// ---- breakers ----

/// A breaker's handles, kept in the breaker.
pub(crate) struct BreakerMetrics {
    handles: PerRecorder<BreakerHandles>,
    /// Whether the first admission has set the state gauge.
    announced: AtomicBool,
}

struct BreakerHandles {
    state: Gauge,
    /// `retry_breaker_transitions_total` by `to`, in the order of [`BreakerGauge`].
    to: [Counter; 3],
}

impl Handles for BreakerHandles {
    #[cold]
    fn register(recorder: &dyn Recorder, name: &'static str) -> Self {
        let b = || Label::new("breaker", name);
        BreakerHandles {
            state: gauge(recorder, names::BREAKER_STATE, vec![b()]),
            to: ["closed", "open", "half_open"].map(|to| {
                let labels = vec![b(), Label::from_static_parts("to", to)];
                counter(recorder, names::BREAKER_TRANSITIONS, labels)
            }),
        }
    }
}

/// A breaker's state as the gauge shows it.
#[derive(Clone, Copy)]
pub(crate) enum BreakerGauge {
    Closed = 0,
    Open = 1,
    HalfOpen = 2,
}

impl BreakerMetrics {
    pub(crate) const fn new() -> Self {
        BreakerMetrics {
            handles: PerRecorder::new(),
            announced: AtomicBool::new(false),
        }
    }

    /// The first admission: the gauge shows the state (closed, unless a transition came first).
    #[inline]
    pub(crate) fn admitted(&self, name: &'static str, state: BreakerGauge) {
        if !self.announced.load(Ordering::Relaxed) && !self.announced.swap(true, Ordering::Relaxed)
        {
            self.handles.with(name, |h| h.state.set(state as u8 as f64));
        }
    }

    /// A change of state, recorded under the breaker's lock so that the gauge ends at the last.
    #[cold]
    pub(crate) fn changed(&self, name: &'static str, to: BreakerGauge) {
        self.announced.store(true, Ordering::Relaxed);
        self.handles.with(name, |h| {
            h.state.set(to as u8 as f64);
            h.to[to as usize].increment(1);
        });
    }
}

impl fmt::Debug for BreakerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BreakerMetrics")
    }
}

// ---- budgets ----

/// A budget's handles, kept in the budget.
pub(crate) type BudgetMetrics = PerRecorder<BudgetHandles>;

pub(crate) struct BudgetHandles {
    tokens: Gauge,
    refusals: Counter,
}

impl Handles for BudgetHandles {
    #[cold]
    fn register(recorder: &dyn Recorder, name: &'static str) -> Self {
        let b = || vec![Label::new("budget", name)];
        BudgetHandles {
            tokens: gauge(recorder, names::BUDGET_TOKENS, b()),
            refusals: counter(recorder, names::BUDGET_REFUSALS, b()),
        }
    }
}

impl BudgetMetrics {
    /// The bucket holds `tokens` now.
    pub(crate) fn tokens(&self, name: &'static str, tokens: f64) {
        self.with(name, |h| h.tokens.set(tokens));
    }

    /// The budget refused a retry.
    #[cold]
    pub(crate) fn refused(&self, name: &'static str) {
        self.with(name, |h| h.refusals.increment(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics::{KeyName, SharedString, Unit};
    use metrics_util::registry::{AtomicStorage, Registry};
    use std::sync::atomic::Ordering;

    /// A recorder over metrics-util's registry.
    struct Counting(Registry<Key, AtomicStorage>);

    impl Recorder for Counting {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            self.0
                .get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            self.0
                .get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            self.0
                .get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
        }
    }

    impl Counting {
        fn new() -> Self {
            Counting(Registry::atomic())
        }

        fn first_tries(&self, function: &'static str) -> u64 {
            let key = Key::from_parts(
                names::CALLS,
                vec![
                    Label::new("function", function),
                    Label::new("outcome", outcome::FIRST_TRY),
                ],
            );
            self.0
                .get_counter(&key)
                .map_or(0, |c| c.load(Ordering::Relaxed))
        }
    }

    #[test]
    fn a_recorder_put_in_place_after_the_first_calls_gets_the_next_ones() {
        const F: &str = "unit_late_recorder";
        // Before any recorder: the no-op recorder's handles are kept.
        first_try(F);
        let (a, b, c, d) = (
            Counting::new(),
            Counting::new(),
            Counting::new(),
            Counting::new(),
        );
        metrics::with_local_recorder(&a, || first_try(F));
        assert_eq!(a.first_tries(F), 1);
        metrics::with_local_recorder(&b, || {
            first_try(F);
            first_try(F);
        });
        metrics::with_local_recorder(&a, || first_try(F));
        assert_eq!((a.first_tries(F), b.first_tries(F)), (2, 2));
        // The three slots hold the no-op recorder's, a's and b's handles: c and d record through
        // their registries each time, and still count right.
        metrics::with_local_recorder(&c, || first_try(F));
        metrics::with_local_recorder(&d, || first_try(F));
        metrics::with_local_recorder(&c, || first_try(F));
        assert_eq!((c.first_tries(F), d.first_tries(F)), (2, 1));
        assert_eq!((a.first_tries(F), b.first_tries(F)), (2, 2));
    }

    #[test]
    fn two_names_that_share_an_address_are_two_functions() {
        // "unit_shared_name" and its first 4 bytes: the same address, another length.
        const LONG: &str = "unit_shared_name";
        let short: &'static str = &LONG[..4];
        let recorder = Counting::new();
        metrics::with_local_recorder(&recorder, || {
            first_try(LONG);
            first_try(short);
            first_try(short);
        });
        assert_eq!(
            (recorder.first_tries(LONG), recorder.first_tries(short)),
            (1, 2)
        );
    }

    #[test]
    fn every_reason_has_its_own_label() {
        let reasons = [
            GiveUpReason::Exhausted,
            GiveUpReason::Deadline,
            GiveUpReason::SuggestedTooLong(Duration::ZERO),
            GiveUpReason::Budget,
            GiveUpReason::BreakerOpen,
            GiveUpReason::GateRejected {
                gate: UNNAMED,
                mode: crate::GateMode::Aimd,
            },
        ];
        assert_eq!(
            reasons.map(reason_label),
            [
                "exhausted",
                "deadline",
                "suggested_too_long",
                "budget",
                "breaker_open",
                "gate_rejected"
            ]
        );
    }
}
