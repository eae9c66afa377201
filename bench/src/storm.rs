//! The storm: many customers' portal requests against one overloaded contract service.
//!
//! Every customer's request calls the service through a real `#[retry]`-annotated async function
//! (one per jitter form, because the attribute's arguments are literals), on a current-thread
//! tokio runtime whose clock is paused: pauses take no wall time, so 1,000 customers and their
//! retries run in milliseconds, and every call is stamped with its virtual time.

use crate::gate::{GateMode, Slots, Through};
use crate::virtual_time::{lock, stream};
use rand::RngExt;
use rand::rngs::SmallRng;
use retry_runtime::{AdmissionGate, GateOutcome, Transient, retry};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// The width of one bucket of the call histogram.
pub const BUCKET: Duration = Duration::from_millis(100);

/// The jitter forms the storm compares, each with `max = 3, base = "1s"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `jitter = none`
    None,
    /// no `jitter` argument: the default, `d + U[0, d/2)`
    Default,
    /// `jitter = full`
    Full,
    /// `jitter = equal`
    Equal,
    /// `jitter = decorrelated`
    Decorrelated,
    /// The default jitter, each attempt through the run's `AdmissionGate` of this mode (see
    /// [`crate::gate`]; the service's "overloaded" recorded as a throttling answer).
    Gate(GateMode),
}

impl Form {
    /// Every form, in the order of the table and the legend.
    pub const ALL: [Form; 5] = [
        Form::None,
        Form::Default,
        Form::Full,
        Form::Equal,
        Form::Decorrelated,
    ];

    /// The form as the attribute spells it.
    pub fn name(self) -> &'static str {
        match self {
            Form::None => "none",
            Form::Default => "default",
            Form::Full => "full",
            Form::Equal => "equal",
            Form::Decorrelated => "decorrelated",
            Form::Gate(mode) => mode.name(),
        }
    }

    /// One customer's check, through the annotated function of this form.
    async fn check(self, service: &Service, calls: &AtomicU32) -> Result<(), Overloaded> {
        match self {
            Form::None => check_none(service, calls).await,
            Form::Default => check_default(service, calls).await,
            Form::Full => check_full(service, calls).await,
            Form::Equal => check_equal(service, calls).await,
            Form::Decorrelated => check_decorrelated(service, calls).await,
            // A shed attempt ends the check as the service's "overloaded" would: not possible
            // right now.
            Form::Gate(_) => check_gate(service, calls).await.map_err(|_| Overloaded),
        }
    }
}

impl Slots for Form {
    const BASE: &'static [Self] = &Form::ALL;

    fn gate(mode: GateMode) -> Self {
        Form::Gate(mode)
    }

    fn mode(self) -> Option<GateMode> {
        match self {
            Form::Gate(mode) => Some(mode),
            _ => None,
        }
    }
}

/// The one answer of an overloaded service: try again later.
#[derive(Debug)]
pub struct Overloaded;

impl Transient for Overloaded {
    fn is_transient(&self) -> bool {
        true
    }
}

/// `#[retry]` takes literals, so each jitter form needs its own annotated function; they differ
/// only in the attribute's last argument. `calls` counts this customer's attempts, so that the
/// service can tell a retry from a first call.
macro_rules! checks {
    ($($name:ident => [$($jitter:tt)*];)*) => {$(
        #[retry(max = 3, base = "1s" $($jitter)*)]
        async fn $name(service: &Service, calls: &AtomicU32) -> Result<(), Overloaded> {
            let retry = calls.fetch_add(1, Ordering::Relaxed) > 0;
            service.call(retry)
        }
    )*};
}

checks! {
    check_none => [, jitter = none];
    check_default => [];
    check_full => [, jitter = full];
    check_equal => [, jitter = equal];
    check_decorrelated => [, jitter = decorrelated];
}

/// Why a gated check did not succeed.
#[derive(Debug)]
enum Gated {
    /// The service answered "overloaded": worth retrying.
    Overloaded,
    /// The gate shed the attempt: the loop gives up, as with `#[retry(gate = ...)]`.
    Shed,
}

impl Transient for Gated {
    fn is_transient(&self) -> bool {
        matches!(self, Gated::Overloaded)
    }
}

/// The default jitter, each attempt through the run's gate ([`crate::gate::attempt`]).
#[retry(max = 3, base = "1s")]
async fn check_gate(service: &Service, calls: &AtomicU32) -> Result<(), Gated> {
    let call = async {
        let retry = calls.fetch_add(1, Ordering::Relaxed) > 0;
        service.call(retry).map_err(|Overloaded| Gated::Overloaded)
    };
    let Some(gate) = &service.gate else {
        return call.await;
    };
    let draw = || lock(&service.draws).random::<f64>();
    let judge = |answer: &Result<(), Gated>| match answer {
        Ok(()) => GateOutcome::Accepted,
        Err(_) => GateOutcome::Throttled,
    };
    match crate::gate::attempt(gate, draw, None, call, judge).await {
        Through::Answered(answer) => answer,
        Through::TimedOut | Through::Shed(_) => Err(Gated::Shed),
    }
}

/// What the storm is run with.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Customers whose requests all arrive at t = 0.
    pub customers: u32,
    /// Every call before this time fails.
    pub outage: Duration,
    /// After the outage, calls beyond this many in one 100 ms bucket fail too.
    pub capacity: Option<u32>,
}

/// The contract service: counts calls per bucket, fails them during the outage and beyond
/// its capacity.
#[derive(Debug)]
struct Service {
    started: Instant,
    config: Config,
    histogram: Mutex<Histogram>,
    /// The gate of a `Gate(mode)` form, one per run, and its draws (seeded: a run repeats).
    gate: Option<AdmissionGate>,
    draws: Mutex<SmallRng>,
}

/// Calls and, among them, retries per bucket.
#[derive(Debug, Default)]
struct Histogram {
    calls: Vec<u32>,
    retries: Vec<u32>,
}

impl Service {
    fn call(&self, retry: bool) -> Result<(), Overloaded> {
        let now = self.started.elapsed();
        let bucket = bucket_of(now);
        let mut h = self
            .histogram
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if h.calls.len() <= bucket {
            h.calls.resize(bucket + 1, 0);
            h.retries.resize(bucket + 1, 0);
        }
        h.calls[bucket] += 1;
        h.retries[bucket] += u32::from(retry);
        let overloaded =
            now < self.config.outage || self.config.capacity.is_some_and(|c| h.calls[bucket] > c);
        if overloaded { Err(Overloaded) } else { Ok(()) }
    }
}

/// The seed of adaptive throttling's draws.
const GATE_SEED: u64 = 2027;

fn bucket_of(t: Duration) -> usize {
    usize::try_from(t.as_nanos() / BUCKET.as_nanos()).unwrap_or(usize::MAX)
}

/// What one run of the storm saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The form the customers' checks used.
    pub form: Form,
    /// Calls the service received in each 100 ms bucket from t = 0.
    pub calls: Vec<u32>,
    /// The retries among those calls: every call but each customer's first.
    pub retries: Vec<u32>,
    /// Customers whose check succeeded.
    pub succeeded: u32,
    /// Customers who were told "not possible right now": every attempt failed.
    pub not_possible: u32,
    /// When the last customer got an answer, either way.
    pub last_answer: Duration,
}

impl Outcome {
    /// Every call the service received.
    pub fn total_calls(&self) -> u64 {
        self.calls.iter().map(|&n| u64::from(n)).sum()
    }

    /// The most calls in any one bucket.
    pub fn peak(&self) -> u32 {
        self.calls.iter().copied().max().unwrap_or(0)
    }

    /// The most retries in any one bucket: the herd that the policy itself sends back.
    pub fn peak_retries(&self) -> u32 {
        self.retries.iter().copied().max().unwrap_or(0)
    }
}

/// Runs the storm once: all customers at t = 0, each through `form`'s annotated function. A
/// gate form not built yet is refused with [`std::io::ErrorKind::Unsupported`].
pub fn run(form: Form, config: Config) -> std::io::Result<Outcome> {
    if !form.is_built() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!("`{}` is not built yet (issue 27, item 2)", form.name()),
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        // Auto-advancing virtual time: when every task is waiting, the clock jumps to the next
        // timer. Pauses cost nothing, and each call's `Instant` is exact.
        tokio::time::pause();
        let service = Arc::new(Service {
            started: Instant::now(),
            config,
            histogram: Mutex::new(Histogram::default()),
            gate: form.mode().map(GateMode::gate),
            draws: Mutex::new(stream(GATE_SEED, &[])),
        });
        let customers: Vec<_> = (0..config.customers)
            .map(|_| {
                let service = Arc::clone(&service);
                tokio::spawn(async move {
                    let calls = AtomicU32::new(0);
                    let answer = form.check(&service, &calls).await;
                    (answer.is_ok(), service.started.elapsed())
                })
            })
            .collect();
        let mut outcome = Outcome {
            form,
            calls: Vec::new(),
            retries: Vec::new(),
            succeeded: 0,
            not_possible: 0,
            last_answer: Duration::ZERO,
        };
        for customer in customers {
            let (ok, answered) = customer.await?;
            if ok {
                outcome.succeeded += 1;
            } else {
                outcome.not_possible += 1;
            }
            outcome.last_answer = outcome.last_answer.max(answered);
        }
        let mut h = service
            .histogram
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        outcome.calls = std::mem::take(&mut h.calls);
        outcome.retries = std::mem::take(&mut h.retries);
        Ok(outcome)
    })
}

/// The table the `storm` binary prints, one row per outcome.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| jitter | total calls | peak calls / 100 ms | peak retries / 100 ms | succeeded | not possible right now | last answer |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for o in outcomes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.1} s |\n",
            o.form.name(),
            o.total_calls(),
            o.peak(),
            o.peak_retries(),
            o.succeeded,
            o.not_possible,
            o.last_answer.as_secs_f64(),
        ));
    }
    out
}

/// The histograms as CSV: `t_s` (the bucket's start) and one column of calls per form.
pub fn csv(outcomes: &[Outcome]) -> Result<String, Box<dyn std::error::Error>> {
    let header: Vec<&str> = std::iter::once("t_s")
        .chain(outcomes.iter().map(|o| o.form.name()))
        .collect();
    let buckets = outcomes.iter().map(|o| o.calls.len()).max().unwrap_or(0);
    let rows = (0..buckets).map(|b| {
        std::iter::once(format!("{:.1}", b as f64 * BUCKET.as_secs_f64()))
            .chain(
                outcomes
                    .iter()
                    .map(|o| o.calls.get(b).copied().unwrap_or(0).to_string()),
            )
            .collect::<Vec<_>>()
    });
    crate::records::csv(&header, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Config = Config {
        customers: 50,
        outage: Duration::from_secs(5),
        capacity: None,
    };

    #[test]
    fn without_jitter_everyone_comes_back_at_1_3_and_7_seconds() {
        let o = run(Form::None, SMALL).unwrap();
        for (bucket, calls) in o.calls.iter().enumerate() {
            let expected = if [0, 10, 30, 70].contains(&bucket) {
                50
            } else {
                0
            };
            assert_eq!(*calls, expected, "bucket {bucket}");
        }
        assert_eq!((o.succeeded, o.not_possible), (50, 0));
        // tokio's timer rounds each pause up to its next millisecond tick.
        let late = o.last_answer - Duration::from_secs(7);
        assert!(late < Duration::from_millis(10), "{late:?}");
        assert_eq!((o.peak(), o.peak_retries()), (50, 50));
        assert_eq!(o.retries[0], 0);
    }

    #[test]
    fn capacity_turns_the_last_spike_into_failures() {
        let config = Config {
            capacity: Some(20),
            ..SMALL
        };
        let o = run(Form::None, config).unwrap();
        assert_eq!((o.succeeded, o.not_possible), (20, 30));
    }

    #[test]
    fn the_csv_has_a_column_per_form_and_reads_back() {
        let outcomes = [
            run(Form::None, SMALL).unwrap(),
            run(Form::Full, SMALL).unwrap(),
        ];
        let (header, records) = crate::records::read(&csv(&outcomes).unwrap()).unwrap();
        assert_eq!(header, ["t_s", "none", "full"]);
        assert_eq!(
            records.len(),
            outcomes[0].calls.len().max(outcomes[1].calls.len())
        );
        assert!(records.iter().all(|r| r.len() == 3));
        assert_eq!(
            records[10],
            ["1.0", "50", &outcomes[1].calls[10].to_string()]
        );
    }

    #[test]
    fn every_gate_mode_runs_and_sends_no_more_than_the_default_jitter() {
        assert_eq!(
            Form::with_gates().len(),
            Form::ALL.len() + GateMode::ALL.len()
        );
        let default = run(Form::Default, SMALL).unwrap();
        for mode in GateMode::ALL {
            let o = run(Form::Gate(mode), SMALL).unwrap();
            assert_eq!(o.succeeded + o.not_possible, 50, "{mode:?}");
            assert!(o.total_calls() <= default.total_calls(), "{mode:?}");
        }
    }

    #[test]
    fn jitter_spreads_the_retries() {
        let o = run(Form::Full, SMALL).unwrap();
        // Pauses of at most 1 + 2 + 4 s: every call but perhaps the fourth falls in the outage.
        assert_eq!(o.total_calls(), 200);
        assert!(o.peak_retries() < 50, "{:?}", o.retries);
    }
}
