//! The admission gate's rows (issue 27): the modes each simulation runs, the gates they build,
//! and one gated attempt as the loop makes it.
//!
//! Every simulation with a gate slot (`amplification`, `collapse`, `storm`, the long outage of
//! `--bin storm`) has a strategy `Gate(mode)`. Its calls go through a real `#[retry]` function
//! whose body is one attempt through [`attempt`]: the gate is asked before every attempt, first
//! tries included, with the current (virtual) time; a shed attempt ends the call with the
//! simulation's `Shed` error (not transient, so the loop gives up, as `#[retry(gate = ...)]`
//! does); an admitted one waits for its permit's [`wait`](GatePermit::wait) (outside the
//! attempt's time limit), is made, and its answer is recorded: accepted, throttled, or timed out.
//! That is what `#[retry(gate = G)]` does around each attempt (`retry-runtime/src/state/extras.rs`;
//! its admissions on the paused clock are tested in `tests/it/gate_in_the_loop.rs`), written here
//! against the `retry_runtime::overload` API directly for one reason: adaptive throttling's
//! rejections draw from the simulation's own seeded stream, so that a run repeats from its seed
//! and the CSVs in `docs/` can be made again number for number. The gate is shared as the
//! simulation shares a budget: per client in `amplification`, one per run in `collapse` and the
//! storms. A simulation a mode does not fit (a mode that learns from nothing the simulation's
//! server says) still has its row: the row shows it.

use retry_runtime::{
    AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, GateOutcome, GatePermit, Gradient2,
    Rejected,
};
use std::future::Future;
use std::time::Duration;

/// A mode of the admission gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GateMode {
    /// Client-side adaptive throttling (Google SRE book, "Handling Overload"): reject locally
    /// with probability `max(0, (requests − K·accepts) / (requests + 1))`, K = 2.
    Throttling,
    /// The AWS SDKs' adaptive mode: the CUBIC client rate limiter.
    Cubic,
    /// Adaptive concurrency, AIMD (×0.9 on a drop, +1 otherwise).
    Aimd,
    /// Adaptive concurrency, Netflix's Gradient2.
    Gradient2,
}

impl GateMode {
    /// Every mode, in the order of the tables.
    pub const ALL: [GateMode; 4] = [
        GateMode::Throttling,
        GateMode::Cubic,
        GateMode::Aimd,
        GateMode::Gradient2,
    ];

    /// The row's name.
    pub fn name(self) -> &'static str {
        match self {
            GateMode::Throttling => "gate: adaptive throttling",
            GateMode::Cubic => "gate: CUBIC rate",
            GateMode::Aimd => "gate: AIMD concurrency",
            GateMode::Gradient2 => "gate: Gradient2 concurrency",
        }
    }

    /// The runtime's gate of this mode with its documented defaults: `AdaptiveThrottling::new()`
    /// (K = 2, a 120 s window), `ClientRateLimit::new()` (botocore's, waiting for tokens),
    /// `Aimd::new()` and `Gradient2::new()` (Netflix's: limits 20 to 200).
    pub fn gate(self) -> AdmissionGate {
        self.gate_with(&Tuning::DEFAULT)
    }

    /// The gate of this mode with `tuning`'s settings for it.
    pub fn gate_with(self, tuning: &Tuning) -> AdmissionGate {
        match self {
            GateMode::Throttling => AdmissionGate::adaptive_throttling(tuning.throttling),
            GateMode::Cubic => AdmissionGate::rate_limit(tuning.rate),
            GateMode::Aimd => AdmissionGate::aimd(tuning.aimd),
            GateMode::Gradient2 => AdmissionGate::gradient2(tuning.gradient2),
        }
        .name(self.label())
    }

    /// The mode as the runtime's metrics label it.
    pub fn label(self) -> &'static str {
        match self {
            GateMode::Throttling => "adaptive_throttling",
            GateMode::Cubic => "rate_limit",
            GateMode::Aimd => "aimd",
            GateMode::Gradient2 => "gradient2",
        }
    }
}

/// The settings of every mode, so that a simulation can run the modes with settings other than
/// the defaults (only the modes' documented builders; never the simulation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// Adaptive throttling's.
    pub throttling: AdaptiveThrottling,
    /// The CUBIC rate limiter's.
    pub rate: ClientRateLimit,
    /// AIMD's.
    pub aimd: Aimd,
    /// Gradient2's.
    pub gradient2: Gradient2,
}

impl Tuning {
    /// The runtime's defaults for every mode.
    pub const DEFAULT: Tuning = Tuning {
        throttling: AdaptiveThrottling::new(),
        rate: ClientRateLimit::new(),
        aimd: Aimd::new(),
        gradient2: Gradient2::new(),
    };
}

impl Tuning {
    /// The command-line flags [`from_flags`](Tuning::from_flags) reads, each one documented
    /// builder of a mode.
    pub const FLAGS: [&'static str; 14] = [
        "throttling-k",
        "throttling-window",
        "throttling-padding",
        "rate-fail-fast",
        "aimd-initial",
        "aimd-min",
        "aimd-max",
        "aimd-timeout",
        "aimd-backoff",
        "gradient2-initial",
        "gradient2-min",
        "gradient2-max",
        "gradient2-tolerance",
        "gradient2-long-window",
    ];

    /// The defaults, with each flag of [`FLAGS`](Tuning::FLAGS) given applied through its
    /// builder (durations in seconds), and a line that says which were given.
    pub fn from_flags(flags: &crate::cli::Flags) -> Result<(Tuning, String), String> {
        let mut t = Tuning::DEFAULT;
        let mut given = Vec::new();
        let seconds = |name: &str| -> Result<Option<Duration>, String> {
            flags
                .optional::<f64>(name)?
                .map(|s| Duration::try_from_secs_f64(s).map_err(|e| format!("`--{name} {s}`: {e}")))
                .transpose()
        };
        if let Some(k) = flags.optional::<f64>("throttling-k")? {
            t.throttling = t.throttling.k(k);
            given.push(format!("AdaptiveThrottling::k({k})"));
        }
        if let Some(w) = seconds("throttling-window")? {
            t.throttling = t.throttling.window(w);
            given.push(format!("AdaptiveThrottling::window({w:?})"));
        }
        if let Some(p) = flags.optional::<f64>("throttling-padding")? {
            t.throttling = t.throttling.requests_padding(p);
            given.push(format!("AdaptiveThrottling::requests_padding({p})"));
        }
        if let Some(f) = flags.optional::<bool>("rate-fail-fast")? {
            t.rate = t.rate.fail_fast(f);
            given.push(format!("ClientRateLimit::fail_fast({f})"));
        }
        if let Some(n) = flags.optional::<u32>("aimd-initial")? {
            t.aimd = t.aimd.initial_limit(n);
            given.push(format!("Aimd::initial_limit({n})"));
        }
        if let Some(n) = flags.optional::<u32>("aimd-min")? {
            t.aimd = t.aimd.min_limit(n);
            given.push(format!("Aimd::min_limit({n})"));
        }
        if let Some(n) = flags.optional::<u32>("aimd-max")? {
            t.aimd = t.aimd.max_limit(n);
            given.push(format!("Aimd::max_limit({n})"));
        }
        if let Some(d) = seconds("aimd-timeout")? {
            t.aimd = t.aimd.timeout(d);
            given.push(format!("Aimd::timeout({d:?})"));
        }
        if let Some(r) = flags.optional::<f64>("aimd-backoff")? {
            t.aimd = t.aimd.backoff_ratio(r);
            given.push(format!("Aimd::backoff_ratio({r})"));
        }
        if let Some(n) = flags.optional::<u32>("gradient2-initial")? {
            t.gradient2 = t.gradient2.initial_limit(n);
            given.push(format!("Gradient2::initial_limit({n})"));
        }
        if let Some(n) = flags.optional::<u32>("gradient2-min")? {
            t.gradient2 = t.gradient2.min_limit(n);
            given.push(format!("Gradient2::min_limit({n})"));
        }
        if let Some(n) = flags.optional::<u32>("gradient2-max")? {
            t.gradient2 = t.gradient2.max_limit(n);
            given.push(format!("Gradient2::max_limit({n})"));
        }
        if let Some(x) = flags.optional::<f64>("gradient2-tolerance")? {
            t.gradient2 = t.gradient2.rtt_tolerance(x);
            given.push(format!("Gradient2::rtt_tolerance({x})"));
        }
        if let Some(n) = flags.optional::<u32>("gradient2-long-window")? {
            t.gradient2 = t.gradient2.long_window(n);
            given.push(format!("Gradient2::long_window({n})"));
        }
        let line = if given.is_empty() {
            "the gate's modes with the runtime's defaults".to_owned()
        } else {
            format!("the gate's modes tuned: {}", given.join(", "))
        };
        Ok((t, line))
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning::DEFAULT
    }
}

/// The current time as the gate reads it: tokio's clock (paused in the simulations) as a
/// `std::time::Instant`.
pub fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}

/// How one attempt through a gate ended.
#[derive(Debug)]
pub enum Through<T> {
    /// The attempt was made and answered: its answer.
    Answered(T),
    /// The attempt was made and not answered within its time limit.
    TimedOut,
    /// The gate shed it: nothing was sent.
    Shed(Rejected),
}

/// One attempt through `gate`, as the loop makes it: ask the gate (adaptive throttling draws
/// from `draw`, a uniform number in [0, 1), so that a seeded simulation repeats), wait for the
/// permit's token if the rate limiter asks for one, make the attempt within `limit` if any,
/// and record its answer (`judge` says whether the service accepted or throttled it; a timeout
/// is [`GateOutcome::TimedOut`]).
pub async fn attempt<T>(
    gate: &AdmissionGate,
    draw: impl FnOnce() -> f64,
    limit: Option<Duration>,
    attempt: impl Future<Output = T>,
    judge: impl FnOnce(&T) -> GateOutcome,
) -> Through<T> {
    let permit: GatePermit<'_> = match gate.admit_with(now(), draw) {
        Ok(permit) => permit,
        Err(rejected) => return Through::Shed(rejected),
    };
    let wait = permit.wait();
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    let answer = match limit {
        Some(limit) => match tokio::time::timeout(limit, attempt).await {
            Ok(answer) => answer,
            Err(_) => {
                permit.record(GateOutcome::TimedOut, now());
                return Through::TimedOut;
            }
        },
        None => attempt.await,
    };
    permit.record(judge(&answer), now());
    Through::Answered(answer)
}

/// A simulation's strategies with the gate's slots among them: what a runner and a binary need
/// to list them, run the built ones and name the others.
pub trait Slots: Copy + 'static {
    /// The strategies other than the gate's, in the order of the tables.
    const BASE: &'static [Self];

    /// The slot of gate mode `mode`.
    fn gate(mode: GateMode) -> Self;

    /// The gate mode of a gate's strategy; `None` for the others.
    fn mode(self) -> Option<GateMode>;

    /// Whether a run of it can be made: `false` for a gate mode whose function is not written
    /// yet (the place to say `true` once it is). Every simulation's gate modes are built now.
    fn is_built(self) -> bool {
        true
    }

    /// [`BASE`](Slots::BASE), then the gate's slots.
    fn with_gates() -> Vec<Self> {
        Self::BASE
            .iter()
            .copied()
            .chain(GateMode::ALL.map(Self::gate))
            .collect()
    }

    /// The line a binary prints for the gate's slots not built yet, if any.
    fn pending() -> Option<String> {
        let missing: Vec<&str> = Self::with_gates()
            .into_iter()
            .filter(|s| !s.is_built())
            .filter_map(Self::mode)
            .map(GateMode::name)
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "not built yet (issue 27, item 2), so no row: {}",
                missing.join(", ")
            )
        })
    }
}
