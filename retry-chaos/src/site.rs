//! A call site's faults: its rules, its seeded draws, its switch and its counts.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Which attempts a [`Rule`] may fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempts {
    /// Every attempt.
    All,
    /// Only attempt `n` (1 for the first).
    Only(u32),
    /// Attempt `n` and every one after it.
    From(u32),
}

impl Attempts {
    fn admits(self, attempt: u32) -> bool {
        match self {
            Attempts::All => true,
            Attempts::Only(n) => attempt == n,
            Attempts::From(n) => attempt >= n,
        }
    }
}

/// What a [`Rule`] injects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// An error of the call's own type before the attempt's body runs (the error type says
    /// what it is: `impl From<retry_chaos::Injected> for MyError`), which the classifier then
    /// judges as a real one. Injected by the loop, at every door.
    Error,
    /// A latency added to the attempt, inside its timeout. Injected by the loop, at every door.
    Latency(Duration),
    /// An HTTP answer with this status and these headers (such as `Retry-After`), which the
    /// HTTP door above reads as the server's. Injected by the chaos layer
    /// (`retry_chaos::tower`) or middleware (`retry_chaos::reqwest`) under the door.
    Status {
        /// The HTTP status.
        status: u16,
        /// The answer's headers, as name and value.
        headers: Vec<(String, String)>,
    },
    /// A gRPC answer (trailers-only) with this code, and `grpc-retry-pushback-ms` if
    /// `pushback` is set, which the gRPC door above reads as the server's. Injected by the
    /// chaos layer (`retry_chaos::tower`) under the door.
    Grpc {
        /// The gRPC code's number (14 is `UNAVAILABLE`).
        code: u16,
        /// The pushback the answer asks for; `Some(None)` is a pushback that says "do not
        /// retry" (a negative value on the wire).
        pushback: Option<Option<Duration>>,
    },
}

impl Kind {
    /// Whether the loop injects this kind (before the attempt), or a layer under a door (an
    /// answer).
    pub(crate) fn by_loop(&self) -> bool {
        matches!(self, Kind::Error | Kind::Latency(_))
    }
}

/// One fault of a [`Site`]: what is injected, at which rate, into which attempts.
///
/// ```
/// use retry_chaos::{Attempts, Rule};
/// use std::time::Duration;
///
/// // A third of the first attempts fail with the call's own error.
/// let error = Rule::error().rate(0.3).attempts(Attempts::Only(1));
/// // Every attempt answers 503 with `Retry-After: 2`.
/// let busy = Rule::status(503).header("retry-after", "2");
/// // One attempt in ten takes 3 s longer.
/// let slow = Rule::latency(Duration::from_secs(3)).rate(0.1);
/// # let _ = (error, busy, slow);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub(crate) kind: Kind,
    pub(crate) rate: f64,
    pub(crate) attempts: Attempts,
}

impl Rule {
    /// A rule that injects `kind` into every attempt (rate 1).
    pub fn new(kind: Kind) -> Self {
        Rule {
            kind,
            rate: 1.0,
            attempts: Attempts::All,
        }
    }

    /// [`Kind::Error`].
    pub fn error() -> Self {
        Rule::new(Kind::Error)
    }

    /// [`Kind::Latency`].
    pub fn latency(latency: Duration) -> Self {
        Rule::new(Kind::Latency(latency))
    }

    /// [`Kind::Status`], without headers (add them with [`header`](Rule::header)).
    pub fn status(status: u16) -> Self {
        Rule::new(Kind::Status {
            status,
            headers: Vec::new(),
        })
    }

    /// [`Kind::Grpc`], without pushback (add it with [`pushback`](Rule::pushback)).
    pub fn grpc(code: u16) -> Self {
        Rule::new(Kind::Grpc {
            code,
            pushback: None,
        })
    }

    /// A header of a [`status`](Rule::status) answer, such as `("retry-after", "2")`; ignored
    /// by the other kinds.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Kind::Status { headers, .. } = &mut self.kind {
            headers.push((name.into(), value.into()));
        }
        self
    }

    /// The `grpc-retry-pushback-ms` of a [`grpc`](Rule::grpc) answer: `Some(pause)`, or `None`
    /// for a pushback that says "do not retry"; ignored by the other kinds.
    pub fn pushback(mut self, pause: Option<Duration>) -> Self {
        if let Kind::Grpc { pushback, .. } = &mut self.kind {
            *pushback = Some(pause);
        }
        self
    }

    /// The share of the attempts it may fault that it faults: 0 (never) to 1 (always, the
    /// default); a value outside is clamped, and `NaN` is 0.
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        self
    }

    /// Which attempts it may fault (every one by default).
    pub fn attempts(mut self, attempts: Attempts) -> Self {
        self.attempts = attempts;
        self
    }

    /// What it injects.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }
}

/// The faults of one call site, found by its name: the attribute's function name, a
/// `retry_block!`'s `name`, a `Retrier`'s or a door's `name`, and the chaos layers' site.
///
/// Built, then [`install`](Site::install)ed: from then on every attempt at the site asks its
/// rules, in order, and the first whose attempt filter admits the attempt and whose seeded draw
/// falls under its rate injects its fault.
///
/// ```
/// use retry_chaos::{Rule, Site};
///
/// let site = Site::new("payments").seed(42).rule(Rule::error().rate(0.3)).install();
/// assert_eq!(site.seed(), 42);
/// site.remove();
/// ```
#[derive(Clone, Debug)]
pub struct Site {
    pub(crate) name: &'static str,
    pub(crate) rules: Vec<Rule>,
    pub(crate) seed: Option<u64>,
    pub(crate) header_requests: bool,
}

impl Site {
    /// The site named `name`, without rules.
    pub fn new(name: &str) -> Self {
        Site {
            name: retry_runtime::engine::interned(name),
            rules: Vec::new(),
            seed: None,
            header_requests: false,
        }
    }

    /// Adds `rule`, asked after the ones added before.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// The seed of the site's draws: the same seed and the same order of attempts inject the
    /// same faults. Without it, the environment variable `RETRY_CHAOS_SEED` if it is set, else a
    /// random one; either way the seed is printed as the site is installed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Lets a request ask for a fault on itself with a header, as Envoy's
    /// `x-envoy-fault-abort-request` (the chaos layers read it: `ABORT_HEADER`,
    /// `GRPC_ABORT_HEADER`). Off unless this is called: a header
    /// sent to a site that did not allow it is ignored.
    pub fn allow_header_requests(mut self) -> Self {
        self.header_requests = true;
        self
    }

    /// Installs the site (in place of one of the same name), and the injector in the runtime if
    /// it was not yet; prints its seed. Returns its handle.
    pub fn install(self) -> Installed {
        crate::registry::install(self)
    }
}

/// An installed [`Site`]: its switch, its seed and its counts. Cheap to clone.
#[derive(Clone)]
pub struct Installed {
    pub(crate) state: Arc<SiteState>,
}

impl fmt::Debug for Installed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Installed")
            .field("name", &self.state.name)
            .field("seed", &self.state.seed)
            .field("enabled", &self.enabled())
            .finish_non_exhaustive()
    }
}

impl Installed {
    /// The site's name.
    pub fn name(&self) -> &'static str {
        self.state.name
    }

    /// The seed of its draws.
    pub fn seed(&self) -> u64 {
        self.state.seed
    }

    /// Turns its faults on (as installed): attempts that start from now on may be faulted.
    pub fn enable(&self) {
        self.state.enabled.store(true, Ordering::Relaxed);
    }

    /// Turns its faults off: attempts that start from now on run as without it (the global
    /// switch, [`crate::switch`], turns every site off at once).
    pub fn disable(&self) {
        self.state.enabled.store(false, Ordering::Relaxed);
    }

    /// Its own switch is on (the global one may still be off: [`crate::enabled`]).
    pub fn enabled(&self) -> bool {
        self.state.enabled.load(Ordering::Relaxed)
    }

    /// What it injected so far.
    pub fn stats(&self) -> Stats {
        let s = &self.state;
        Stats {
            asked: s.asked.load(Ordering::Relaxed),
            errors: s.errors.load(Ordering::Relaxed),
            latencies: s.latencies.load(Ordering::Relaxed),
            answers: s.answers.load(Ordering::Relaxed),
        }
    }

    /// Removes the site: its name has no faults from now on.
    pub fn remove(&self) {
        crate::registry::remove(&self.state);
    }

    /// The fault for attempt `attempt` of this site at a door's answer (the chaos layers): a
    /// rule of kind [`Kind::Status`] or [`Kind::Grpc`], if one fires. Counted.
    pub fn answer(&self, attempt: u32) -> Option<Kind> {
        self.state
            .decide(attempt, false)
            .map(|rule| rule.kind.clone())
    }

    /// Whether a request may ask for a fault with a header ([`Site::allow_header_requests`]),
    /// and the switches are on.
    pub fn header_requests_allowed(&self) -> bool {
        self.state.header_requests && self.state.on()
    }

    /// Counts an answer a request asked for with a header.
    #[cfg(any(feature = "tower", feature = "reqwest"))]
    pub(crate) fn count_answer(&self) {
        self.state.answers.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a site injected so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Attempts at the site that were asked about while the switches were on: the draws'
    /// denominator (for the loop's kinds and the answers' separately summed).
    pub asked: u64,
    /// Errors the site decided to inject (the loop's). An error type without
    /// `From<Injected>` cannot take them: the loop runs such an attempt as it is, and reports
    /// no event, but the site counts the decision here.
    pub errors: u64,
    /// Latencies injected.
    pub latencies: u64,
    /// Answers injected by a chaos layer (statuses, gRPC statuses), those a header asked for
    /// included.
    pub answers: u64,
}

pub(crate) struct SiteState {
    pub(crate) name: &'static str,
    pub(crate) rules: Vec<Rule>,
    pub(crate) seed: u64,
    pub(crate) header_requests: bool,
    pub(crate) enabled: AtomicBool,
    draws: AtomicU64,
    asked: AtomicU64,
    pub(crate) errors: AtomicU64,
    latencies: AtomicU64,
    answers: AtomicU64,
}

impl SiteState {
    pub(crate) fn new(site: Site, seed: u64) -> Self {
        SiteState {
            name: site.name,
            rules: site.rules,
            seed,
            header_requests: site.header_requests,
            enabled: AtomicBool::new(true),
            draws: AtomicU64::new(0),
            asked: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latencies: AtomicU64::new(0),
            answers: AtomicU64::new(0),
        }
    }

    /// The site's switch and the global one are on.
    pub(crate) fn on(&self) -> bool {
        self.enabled.load(Ordering::Relaxed) && crate::enabled()
    }

    /// The next draw, uniform in `[0, 1)`: SplitMix64 over the seed and the draw's number, so
    /// that the n-th draw of a seed is always the same.
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        let mut z = self
            .seed
            .wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // The top 53 bits, as a fraction.
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The rule that fires for attempt `attempt`, among the loop's kinds (`by_loop`) or the
    /// answers; counted. Each rule whose filter admits the attempt takes one draw, in order,
    /// until one fires.
    pub(crate) fn decide(&self, attempt: u32, by_loop: bool) -> Option<&Rule> {
        if !self.on() {
            return None;
        }
        let mut asked = false;
        for rule in &self.rules {
            if rule.kind.by_loop() != by_loop || !rule.attempts.admits(attempt) {
                continue;
            }
            if !asked {
                asked = true;
                self.asked.fetch_add(1, Ordering::Relaxed);
            }
            if self.draw() < rule.rate {
                let count = match rule.kind {
                    Kind::Error => &self.errors,
                    Kind::Latency(_) => &self.latencies,
                    Kind::Status { .. } | Kind::Grpc { .. } => &self.answers,
                };
                count.fetch_add(1, Ordering::Relaxed);
                return Some(rule);
            }
        }
        None
    }
}
