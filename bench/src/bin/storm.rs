//! `cargo run --release -p retry-bench --bin storm -- [--customers 1000] [--outage 5]
//! [--capacity N] [--plot docs/storm.png] [--csv docs/storm.csv] [--long-outage 60]
//! [--arrive-over 90] [--plot-protection docs/storm-protection.png]
//! [--csv-protection docs/storm-protection.csv] [--drain-per-second 20] [--drain-concurrency 4]`
//!
//! 1,000 customers' checks hit a contract service that is overloaded for the first 5 s, through
//! `#[retry(max = 3, base = "1s")]` with each jitter form in turn, on tokio's paused clock.
//!
//! Then the long outage: the same customers arrive one after another over 90 s while the service
//! is down for the first 60 s, through `#[retry(max = 3, base = "1s")]` (default jitter) plain,
//! with a shared `RetryBudget`, with a `CircuitBreaker`, with both, and with both and the
//! portal's queue: a customer whose check gave up is saved and queued, and a worker drains the
//! queue after the recovery through the same function, budget and breaker, at a bounded pace
//! (`--drain-per-second 20`, `--drain-concurrency 4`).

use plotters::chart::SeriesLabelPosition;
use retry_bench::cli::Flags;
use retry_bench::gate::Slots;
use retry_bench::plot::{self, Chart, Line};
use retry_bench::storm::{self, BUCKET, Config, Form, Outcome};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: storm [--customers 1000] [--outage 5 (seconds)] \
[--capacity CALLS_PER_100MS] [--plot storm.png] [--csv storm.csv] \
[--long-outage 60 (seconds)] [--arrive-over 90 (seconds)] \
[--plot-protection storm-protection.png] [--csv-protection storm-protection.csv] \
[--drain-per-second 20] [--drain-concurrency 4]";

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(
        &[
            "customers",
            "outage",
            "capacity",
            "plot",
            "csv",
            "long-outage",
            "arrive-over",
            "plot-protection",
            "csv-protection",
            "drain-per-second",
            "drain-concurrency",
        ],
        USAGE,
    )?;
    let outage: f64 = flags.get("outage", 5.0)?;
    let config = Config {
        customers: flags.get("customers", 1000)?,
        outage: seconds(outage, "outage")?,
        capacity: flags.optional("capacity")?,
    };
    let forms = Form::with_gates();
    let outcomes = forms
        .iter()
        .filter(|form| form.is_built())
        .map(|&form| storm::run(form, config))
        .collect::<Result<Vec<_>, _>>()?;
    let jitter_only: Vec<Outcome> = outcomes
        .iter()
        .filter(|o| o.form.mode().is_none())
        .cloned()
        .collect();
    let capacity = config
        .capacity
        .map_or_else(|| "unlimited".to_owned(), |c| format!("{c} calls / 100 ms"));
    println!(
        "{} customers at t = 0, service overloaded for {outage} s, capacity {capacity}; \
         #[retry(max = 3, base = \"1s\", jitter = ...)]\n",
        config.customers
    );
    print!("{}", storm::table(&outcomes));
    if let Some(line) = Form::pending() {
        println!("{line}");
    }
    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        // The gate's rows are in the table only: they run for up to 2,004 virtual seconds,
        // which would squeeze the jitter forms' 15 s into the picture's first pixels.
        std::fs::write(&path, storm::csv(&jitter_only)?)?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let title = format!(
            "{} customers, service overloaded for the first {outage} s: calls per 100 ms",
            config.customers
        );
        let mut chart = chart(title, &jitter_only);
        chart.band = Some((0.0, outage, "outage: every call fails".to_owned()));
        plot::draw(&path, (1600, 800), &[chart])?;
        println!("wrote {}", path.display());
    }

    let long_outage: f64 = flags.get("long-outage", 60.0)?;
    let arrive_over: f64 = flags.get("arrive-over", 90.0)?;
    let long = protection::Scenario {
        customers: config.customers,
        outage: seconds(long_outage, "long-outage")?,
        arrive_over: seconds(arrive_over, "arrive-over")?,
        capacity: config.capacity,
        drain: protection::Drain {
            per_second: flags.get("drain-per-second", 20.0)?,
            concurrency: flags.get("drain-concurrency", 4)?,
        },
    };
    let variants = protection::Variant::with_gates();
    let runs = variants
        .iter()
        .filter(|variant| variant.is_built())
        .map(|&variant| protection::run(variant, long))
        .collect::<Result<Vec<_>, _>>()?;
    println!(
        "\nLong outage: {} customers arriving evenly over the first {arrive_over} s, service \
         down for the first {long_outage} s, capacity {capacity}; \
         #[retry(max = 3, base = \"1s\", ...)] with the default jitter, \
         budget = RetryBudget::new() (ratio 0.1, reserve 10 / s), \
         breaker = CircuitBreaker::new().consecutive_failures(5).open_for(10 s); \
         the queue's worker: at most {} checks at a time and {} a second, backoff 1 s doubling, \
         {} attempts\n",
        long.customers,
        long.drain.concurrency,
        long.drain.per_second,
        protection::MAX_ATTEMPTS,
    );
    print!("{}", protection::table(&runs, long.outage));
    let protections: Vec<protection::Run> = runs
        .iter()
        .filter(|r| r.variant.mode().is_none())
        .cloned()
        .collect();
    if let Some(line) = protection::Variant::pending() {
        println!("{line}");
    }
    if let Some(path) = flags.optional::<PathBuf>("csv-protection")? {
        // As above: the gate's rows (up to 1,392 s) in the table only.
        std::fs::write(&path, protection::csv(&protections)?)?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot-protection")? {
        plot::draw(
            &path,
            (2100, 800),
            &protection::charts(&protections, long_outage, arrive_over, long.customers),
        )?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn seconds(value: f64, flag: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value).map_err(|e| format!("`--{flag}`: {e}"))
}

fn chart(title: String, outcomes: &[Outcome]) -> Chart {
    let lines = outcomes
        .iter()
        .map(|o| Line {
            label: format!("jitter = {}", o.form.name()),
            points: steps(&o.calls, BUCKET),
            width: if o.form == Form::None { 3 } else { 2 },
        })
        .collect();
    Chart {
        title,
        x_label: "seconds since the outage began".to_owned(),
        y_label: "calls to the service per 100 ms".to_owned(),
        lines,
        band: None,
        log_y: false,
        legend: SeriesLabelPosition::UpperRight,
    }
}

/// Each bucket drawn as a flat step, so a one-bucket spike reads as a bar.
fn steps(counts: &[u32], width: Duration) -> Vec<(f64, f64)> {
    let width = width.as_secs_f64();
    counts
        .iter()
        .enumerate()
        .flat_map(|(b, &n)| {
            let t = b as f64 * width;
            [(t, f64::from(n)), (t + width, f64::from(n))]
        })
        .collect()
}

/// The long outage: customers keep arriving while the service is down for a long time, and a
/// retry budget and a circuit breaker decide how many of their calls reach it.
mod protection {
    use super::steps;
    use plotters::chart::SeriesLabelPosition;
    use rand::RngExt;
    use rand::rngs::SmallRng;
    use retry_bench::gate::{GateMode, Slots, Through};
    use retry_bench::plot::{Chart, Line};
    use retry_bench::storm::BUCKET;
    use retry_runtime::{
        AdmissionGate, BreakerState, CircuitBreaker, CircuitOpen, GateOutcome, Policy, RetryBudget,
        Transient, retry,
    };
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;
    use tokio::task::JoinSet;
    use tokio::time::{Instant, MissedTickBehavior};

    /// What the long outage is run with.
    #[derive(Clone, Copy, Debug)]
    pub struct Scenario {
        /// Customers, arriving evenly spaced from t = 0.
        pub customers: u32,
        /// Every call before this time fails.
        pub outage: Duration,
        /// The last customer arrives just before this time.
        pub arrive_over: Duration,
        /// After the outage, calls beyond this many in one 100 ms bucket fail too.
        pub capacity: Option<u32>,
        /// The queue's worker, for [`Variant::Queue`].
        pub drain: Drain,
    }

    /// The bounds of the queue's worker, as `retry_durable::queue::Worker` has them.
    #[derive(Clone, Copy, Debug)]
    pub struct Drain {
        /// Claims a second at most.
        pub per_second: f64,
        /// Jobs at a time at most.
        pub concurrency: usize,
    }

    /// Attempts a queued check gets before it is dead (the queue's default).
    pub const MAX_ATTEMPTS: u32 = 10;

    /// How often an idle worker looks for jobs (the worker's default).
    const POLL: Duration = Duration::from_secs(1);

    /// What protects the service, on top of `#[retry(max = 3, base = "1s")]`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Variant {
        Plain,
        Budget,
        Breaker,
        Both,
        /// Budget and breaker, and the portal's fallback: a customer whose check gave up is
        /// saved and queued, and the worker makes the check later.
        Queue,
        /// Each attempt through the run's `AdmissionGate` of this mode (see `retry_bench::gate`;
        /// the service's "overloaded" recorded as a throttling answer), no budget or breaker.
        Gate(GateMode),
    }

    impl Variant {
        pub const ALL: [Variant; 5] = [
            Variant::Plain,
            Variant::Budget,
            Variant::Breaker,
            Variant::Both,
            Variant::Queue,
        ];

        pub fn name(self) -> &'static str {
            match self {
                Variant::Plain => "plain retries",
                Variant::Budget => "budget",
                Variant::Breaker => "breaker",
                Variant::Both => "budget + breaker",
                Variant::Queue => "breaker + queue",
                Variant::Gate(mode) => mode.name(),
            }
        }

        async fn check(self, service: &Service, calls: &AtomicU32) -> Result<(), Refusal> {
            match self {
                Variant::Plain => check_plain(service, calls).await,
                Variant::Budget => check_budget(service, calls).await,
                Variant::Breaker => check_breaker(service, calls).await,
                Variant::Both => check_both(service, calls).await,
                Variant::Queue => check_queue(service, calls).await,
                Variant::Gate(_) => check_gate(service, calls).await,
            }
        }
    }

    impl Slots for Variant {
        const BASE: &'static [Self] = &Variant::ALL;

        fn gate(mode: GateMode) -> Self {
            Variant::Gate(mode)
        }

        fn mode(self) -> Option<GateMode> {
            match self {
                Variant::Gate(mode) => Some(mode),
                _ => None,
            }
        }
    }

    /// Each variant has its own budget and breaker, so runs do not share state; each is run
    /// once per process.
    static BUDGET: RetryBudget = RetryBudget::new();
    static BOTH_BUDGET: RetryBudget = RetryBudget::new();
    const OPEN_FOR: Duration = Duration::from_secs(10);
    static BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(5)
        .open_for(OPEN_FOR);
    static BOTH_BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(5)
        .open_for(OPEN_FOR);
    static QUEUE_BUDGET: RetryBudget = RetryBudget::new();
    static QUEUE_BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(5)
        .open_for(OPEN_FOR);

    /// Why a customer's check did not succeed.
    #[derive(Debug)]
    enum Refusal {
        /// The service answered "overloaded".
        Overloaded,
        /// The gate shed the attempt: the service was not called. Not transient: the loop gives
        /// up, as with `#[retry(gate = ...)]`.
        Shed,
        /// The breaker was open: the service was not called; calls are refused for this much
        /// longer (`None`: until the trial call ends).
        Open(Option<Duration>),
    }

    impl Transient for Refusal {
        fn is_transient(&self) -> bool {
            matches!(self, Refusal::Overloaded)
        }
    }

    impl From<CircuitOpen> for Refusal {
        fn from(open: CircuitOpen) -> Self {
            Refusal::Open(open.remaining())
        }
    }

    macro_rules! checks {
        ($($name:ident => [$($protection:tt)*];)*) => {$(
            #[retry(max = 3, base = "1s" $($protection)*)]
            async fn $name(service: &Service, calls: &AtomicU32) -> Result<(), Refusal> {
                let retry = calls.fetch_add(1, Ordering::Relaxed) > 0;
                service.call(retry)
            }
        )*};
    }

    checks! {
        check_plain => [];
        check_budget => [, budget = BUDGET];
        check_breaker => [, breaker = BREAKER];
        check_both => [, budget = BOTH_BUDGET, breaker = BOTH_BREAKER];
        check_queue => [, budget = QUEUE_BUDGET, breaker = QUEUE_BREAKER];
    }

    /// `#[retry(max = 3, base = "1s")]`, each attempt through the run's gate
    /// (`retry_bench::gate::attempt`: asked before every attempt, first tries included).
    #[retry(max = 3, base = "1s")]
    async fn check_gate(service: &Service, calls: &AtomicU32) -> Result<(), Refusal> {
        let call = async {
            let retry = calls.fetch_add(1, Ordering::Relaxed) > 0;
            service.call(retry)
        };
        let Some(gate) = &service.gate else {
            return call.await;
        };
        let draw = || {
            service
                .draws
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .random::<f64>()
        };
        let judge = |answer: &Result<(), Refusal>| match answer {
            Ok(()) => GateOutcome::Accepted,
            Err(_) => GateOutcome::Throttled,
        };
        match retry_bench::gate::attempt(gate, draw, None, call, judge).await {
            Through::Answered(answer) => answer,
            Through::TimedOut | Through::Shed(_) => Err(Refusal::Shed),
        }
    }

    /// The contract service: counts the calls that reach it per bucket, fails them during the
    /// outage and beyond its capacity.
    #[derive(Debug)]
    struct Service {
        started: Instant,
        scenario: Scenario,
        histogram: Mutex<(Vec<u32>, Vec<u32>)>,
        /// The gate of a `Gate(mode)` variant, one per run, and its draws (seeded).
        gate: Option<AdmissionGate>,
        draws: Mutex<SmallRng>,
    }

    impl Service {
        fn call(&self, retry: bool) -> Result<(), Refusal> {
            let now = self.started.elapsed();
            let bucket = usize::try_from(now.as_nanos() / BUCKET.as_nanos()).unwrap_or(usize::MAX);
            let mut h = self
                .histogram
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (calls, retries) = &mut *h;
            if calls.len() <= bucket {
                calls.resize(bucket + 1, 0);
                retries.resize(bucket + 1, 0);
            }
            calls[bucket] += 1;
            retries[bucket] += u32::from(retry);
            let overloaded = now < self.scenario.outage
                || self.scenario.capacity.is_some_and(|c| calls[bucket] > c);
            if overloaded {
                Err(Refusal::Overloaded)
            } else {
                Ok(())
            }
        }
    }

    /// What one variant saw.
    #[derive(Clone, Debug)]
    pub struct Run {
        pub variant: Variant,
        /// Calls that reached the service in each 100 ms bucket from t = 0.
        pub calls: Vec<u32>,
        /// The retries among those calls.
        pub retries: Vec<u32>,
        /// Attempts the breaker refused, or the gate shed, without calling the service (each
        /// ends its customer's check, so this is also the customers told "not possible" by the
        /// breaker or the gate).
        pub refused: u32,
        /// Customers who got the answer at once.
        pub succeeded: u32,
        /// Customers told "not possible right now", with nothing saved.
        pub not_possible: u32,
        /// Customers told "not possible right now; your details are saved" (the queue).
        pub saved: u32,
        /// Customers whose check was queued and who got the answer later, by e-mail.
        pub answered_later: u32,
        /// Queued checks that went dead (their last attempt failed).
        pub dead: u32,
        /// When the last customer got an answer, at once or later.
        pub last_answer: Duration,
        /// Summed over the customers told "not possible right now" (saved or not): from arrival
        /// to that answer.
        pub waited_for_no: Duration,
    }

    impl Run {
        fn total(counts: &[u32]) -> u64 {
            counts.iter().map(|&n| u64::from(n)).sum()
        }

        /// Calls that reached the service before `until`.
        pub fn calls_before(&self, until: Duration) -> u64 {
            let buckets = (until.as_nanos() / BUCKET.as_nanos()) as usize;
            Self::total(&self.calls[..buckets.min(self.calls.len())])
        }

        /// The most calls in any one second before `until`.
        fn peak_per_second_before(&self, until: Duration) -> u32 {
            let seconds = usize::try_from(until.as_secs()).unwrap_or(usize::MAX);
            self.per_second()
                .into_iter()
                .take(seconds)
                .max()
                .unwrap_or(0)
        }

        /// The most calls in any one second from `from` on (the recovery).
        pub fn peak_per_second_after(&self, from: Duration) -> u32 {
            let seconds = usize::try_from(from.as_secs()).unwrap_or(usize::MAX);
            self.per_second()
                .into_iter()
                .skip(seconds)
                .max()
                .unwrap_or(0)
        }

        /// Calls per second: ten buckets each.
        fn per_second(&self) -> Vec<u32> {
            let per = (Duration::from_secs(1).as_nanos() / BUCKET.as_nanos()) as usize;
            self.calls.chunks(per).map(|c| c.iter().sum()).collect()
        }
    }

    /// Runs the long outage once for `variant`, on its own paused-clock runtime. A gate
    /// variant not built yet is refused with [`std::io::ErrorKind::Unsupported`].
    pub fn run(variant: Variant, scenario: Scenario) -> std::io::Result<Run> {
        if !variant.is_built() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!("`{}` is not built yet (issue 27, item 2)", variant.name()),
            ));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()?;
        runtime.block_on(async {
            tokio::time::pause();
            let started = Instant::now();
            let service = Arc::new(Service {
                started,
                scenario,
                histogram: Mutex::new((Vec::new(), Vec::new())),
                gate: variant.mode().map(GateMode::gate),
                draws: Mutex::new(retry_bench::virtual_time::stream(2027, &[])),
            });
            let queue = Arc::new(Mutex::new(SimQueue::default()));
            let worker = (variant == Variant::Queue).then(|| {
                tokio::spawn(drain(
                    Arc::clone(&service),
                    Arc::clone(&queue),
                    scenario.drain,
                ))
            });
            let spacing = scenario.arrive_over / scenario.customers.max(1);
            let customers: Vec<_> = (0..scenario.customers)
                .map(|i| {
                    let service = Arc::clone(&service);
                    let queue = Arc::clone(&queue);
                    tokio::spawn(async move {
                        tokio::time::sleep_until(started + spacing * i).await;
                        let arrived = Instant::now();
                        let calls = AtomicU32::new(0);
                        let answer = variant.check(&service, &calls).await;
                        // The portal's fallback: the claim saved, its check queued.
                        let saved = answer.is_err() && variant == Variant::Queue;
                        if saved {
                            queue
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .enqueue();
                        }
                        (answer, saved, service.started.elapsed(), arrived.elapsed())
                    })
                })
                .collect();
            let mut run = Run {
                variant,
                calls: Vec::new(),
                retries: Vec::new(),
                refused: 0,
                succeeded: 0,
                not_possible: 0,
                saved: 0,
                answered_later: 0,
                dead: 0,
                last_answer: Duration::ZERO,
                waited_for_no: Duration::ZERO,
            };
            for customer in customers {
                let (answer, saved, answered, waited) = customer.await?;
                match answer {
                    Ok(()) => run.succeeded += 1,
                    Err(refusal) => {
                        if saved {
                            run.saved += 1;
                        } else {
                            run.not_possible += 1;
                        }
                        run.waited_for_no += waited;
                        run.refused +=
                            u32::from(matches!(refusal, Refusal::Open(_) | Refusal::Shed));
                    }
                }
                if !saved {
                    run.last_answer = run.last_answer.max(answered);
                }
            }
            if let Some(worker) = worker {
                queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .arrivals_over = true;
                let drained = worker.await?;
                run.answered_later = drained.answered;
                run.dead = drained.dead;
                run.last_answer = run.last_answer.max(drained.last);
            }
            let mut h = service
                .histogram
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            run.calls = std::mem::take(&mut h.0);
            run.retries = std::mem::take(&mut h.1);
            Ok(run)
        })
    }

    /// The portal's queue in memory: the rows `retry_durable::queue` keeps in its table, for
    /// the jobs not yet done or dead.
    #[derive(Debug, Default)]
    struct SimQueue {
        jobs: Vec<SimJob>,
        enqueued: u64,
        /// Every customer has arrived and been answered or saved.
        arrivals_over: bool,
    }

    #[derive(Clone, Copy, Debug)]
    struct SimJob {
        id: u64,
        /// Not before (the backoff, or the breaker's remaining open time).
        run_at: Instant,
        /// Claims so far.
        attempts: u32,
    }

    impl SimQueue {
        fn enqueue(&mut self) {
            self.enqueued += 1;
            self.jobs.push(SimJob {
                id: self.enqueued,
                run_at: Instant::now(),
                attempts: 0,
            });
        }

        /// The claim: the due job with the earliest `run_at`, then the lowest id.
        fn claim(&mut self, now: Instant) -> Option<SimJob> {
            let due = self
                .jobs
                .iter()
                .enumerate()
                .filter(|(_, job)| job.run_at <= now)
                .min_by_key(|(_, job)| (job.run_at, job.id))
                .map(|(i, _)| i)?;
            let mut job = self.jobs.swap_remove(due);
            job.attempts += 1;
            Some(job)
        }
    }

    /// What the worker did.
    #[derive(Debug, Default)]
    struct Drained {
        answered: u32,
        dead: u32,
        /// When the last queued customer got the answer.
        last: Duration,
    }

    enum JobEnd {
        Answered(Duration),
        Dead,
        PutBack,
    }

    /// The worker of `retry_durable::queue::Worker`, step for step: at most `concurrency` jobs
    /// at a time and `per_second` claims a second; nothing claimed while the breaker is open,
    /// one job alone while it is half-open; a job refused by the breaker is snoozed (the attempt
    /// does not count), one that gave up on a passing failure comes back after the backoff
    /// `Policy::new().base(1 s).max_delay(300 s).delay(attempt)`, dead after `MAX_ATTEMPTS`.
    /// Each job calls the same annotated function as the customers, budget and breaker
    /// included.
    async fn drain(service: Arc<Service>, queue: Arc<Mutex<SimQueue>>, drain: Drain) -> Drained {
        let backoff = Policy::new()
            .base(Duration::from_secs(1))
            .max_delay(Duration::from_secs(300));
        let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / drain.per_second));
        pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut in_flight: JoinSet<JobEnd> = JoinSet::new();
        let mut drained = Drained::default();
        let finished = |end: Option<Result<JobEnd, tokio::task::JoinError>>,
                        drained: &mut Drained| match end {
            Some(Ok(JobEnd::Answered(at))) => {
                drained.answered += 1;
                drained.last = drained.last.max(at);
            }
            Some(Ok(JobEnd::Dead)) => drained.dead += 1,
            _ => {}
        };
        loop {
            while let Some(end) = in_flight.try_join_next() {
                finished(Some(end), &mut drained);
            }
            let wait = if in_flight.len() >= drain.concurrency.max(1) {
                Some(POLL)
            } else {
                match QUEUE_BREAKER.state(Instant::now().into_std()) {
                    BreakerState::Open { remaining } => Some(remaining.min(POLL)),
                    BreakerState::HalfOpen if !in_flight.is_empty() => Some(POLL),
                    _ => None,
                }
            };
            if let Some(wait) = wait {
                wait_or_one_ends(wait, &mut in_flight, &mut drained, finished).await;
                continue;
            }
            pace.tick().await;
            let now = Instant::now();
            let (claimed, next, over) = {
                let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
                let claimed = q.claim(now);
                let next = q.jobs.iter().map(|job| job.run_at).min();
                (claimed, next, q.arrivals_over && q.jobs.is_empty())
            };
            match claimed {
                Some(job) => {
                    let (service, queue) = (Arc::clone(&service), Arc::clone(&queue));
                    in_flight.spawn(async move {
                        let calls = AtomicU32::new(0);
                        let answer = check_queue(&service, &calls).await;
                        let mut job = job;
                        let now = Instant::now();
                        match answer {
                            Ok(()) => return JobEnd::Answered(service.started.elapsed()),
                            Err(Refusal::Open(remaining)) => {
                                job.attempts -= 1;
                                job.run_at = now + remaining.unwrap_or(POLL);
                            }
                            // `check_queue` has no gate: nothing is shed.
                            Err(Refusal::Overloaded | Refusal::Shed)
                                if job.attempts >= MAX_ATTEMPTS =>
                            {
                                return JobEnd::Dead;
                            }
                            Err(Refusal::Overloaded | Refusal::Shed) => {
                                job.run_at = now + backoff.delay(job.attempts, Duration::ZERO);
                            }
                        }
                        queue
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .jobs
                            .push(job);
                        JobEnd::PutBack
                    });
                }
                None if over && in_flight.is_empty() => return drained,
                None => {
                    let wait = next.map_or(POLL, |next| (next - now).min(POLL));
                    let wait = wait.max(Duration::from_millis(5));
                    wait_or_one_ends(wait, &mut in_flight, &mut drained, finished).await;
                }
            }
        }
    }

    async fn wait_or_one_ends(
        wait: Duration,
        in_flight: &mut JoinSet<JobEnd>,
        drained: &mut Drained,
        finished: impl Fn(Option<Result<JobEnd, tokio::task::JoinError>>, &mut Drained),
    ) {
        if in_flight.is_empty() {
            tokio::time::sleep(wait).await;
            return;
        }
        if let Ok(end) = tokio::time::timeout(wait, in_flight.join_next()).await {
            finished(end, drained);
        }
    }

    /// The table, one row per variant.
    pub fn table(runs: &[Run], outage: Duration) -> String {
        let mut out = format!(
            "| protection | calls reaching the service | of which during the {} s outage | retries | refused by the breaker or shed by the gate | peak calls / s during the outage | answered at once | not possible right now | saved, answered later | mean wait for \"not possible\" or \"saved\" | last answer | of which after the recovery | peak calls / s after the recovery |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            outage.as_secs_f64()
        );
        for r in runs {
            let told_no = r.not_possible + r.saved;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} s | {:.1} s | {:.1} s | {} |\n",
                r.variant.name(),
                Run::total(&r.calls),
                r.calls_before(outage),
                Run::total(&r.retries),
                r.refused,
                r.peak_per_second_before(outage),
                r.succeeded,
                r.not_possible + r.dead,
                r.answered_later,
                r.waited_for_no.as_secs_f64() / f64::from(told_no.max(1)),
                r.last_answer.as_secs_f64(),
                r.last_answer.saturating_sub(outage).as_secs_f64(),
                r.peak_per_second_after(outage),
            ));
        }
        out
    }

    /// Calls reaching the service per 100 ms: `t_s` and one column per variant.
    pub fn csv(runs: &[Run]) -> Result<String, Box<dyn std::error::Error>> {
        let names: Vec<String> = runs
            .iter()
            .map(|r| r.variant.name().replace(' ', "_"))
            .collect();
        let header: Vec<&str> = std::iter::once("t_s")
            .chain(names.iter().map(String::as_str))
            .collect();
        let buckets = runs.iter().map(|r| r.calls.len()).max().unwrap_or(0);
        let rows = (0..buckets).map(|b| {
            std::iter::once(format!("{:.1}", b as f64 * BUCKET.as_secs_f64()))
                .chain(
                    runs.iter()
                        .map(|r| r.calls.get(b).copied().unwrap_or(0).to_string()),
                )
                .collect::<Vec<_>>()
        });
        retry_bench::records::csv(&header, rows)
    }

    /// Two panels: calls reaching the service per second, and their running total.
    pub fn charts(runs: &[Run], outage: f64, arrive_over: f64, customers: u32) -> Vec<Chart> {
        let band = Some((0.0, outage, "outage: every call fails".to_owned()));
        // The breaker alone is drawn wide, so that "budget + breaker" on top of it stays
        // visible where the two coincide.
        let width = |r: &Run| match r.variant {
            Variant::Plain | Variant::Queue => 3,
            Variant::Breaker => 7,
            Variant::Budget | Variant::Both | Variant::Gate(_) => 2,
        };
        let same_as_breaker = runs
            .iter()
            .find(|r| r.variant == Variant::Breaker)
            .map(|b| &b.calls);
        let label = |r: &Run| {
            if r.variant == Variant::Both && same_as_breaker == Some(&r.calls) {
                format!("{} (= breaker)", r.variant.name())
            } else {
                r.variant.name().to_owned()
            }
        };
        let per_second = Chart {
            title: format!(
                "{customers} customers arriving over {arrive_over} s: calls reaching the service per second"
            ),
            x_label: "seconds since the outage began".to_owned(),
            y_label: "calls to the service per second".to_owned(),
            lines: runs
                .iter()
                .map(|r| Line {
                    label: label(r),
                    points: steps(&r.per_second(), Duration::from_secs(1)),
                    width: width(r),
                })
                .collect(),
            band: band.clone(),
            log_y: false,
            legend: SeriesLabelPosition::UpperRight,
        };
        let cumulative = Chart {
            title: "calls reaching the service so far".to_owned(),
            x_label: "seconds since the outage began".to_owned(),
            y_label: "calls to the service, running total".to_owned(),
            lines: runs
                .iter()
                .map(|r| {
                    let mut total = 0u64;
                    let mut points = vec![(0.0, 0.0)];
                    for (b, &n) in r.calls.iter().enumerate() {
                        total += u64::from(n);
                        points.push(((b + 1) as f64 * BUCKET.as_secs_f64(), total as f64));
                    }
                    Line {
                        label: label(r),
                        points,
                        width: width(r),
                    }
                })
                .collect(),
            band,
            log_y: false,
            legend: SeriesLabelPosition::UpperLeft,
        };
        vec![per_second, cumulative]
    }
}

#[cfg(test)]
mod tests {
    use super::protection::{self, Scenario, Variant};
    use std::time::Duration;

    #[test]
    fn the_protection_csv_has_a_column_per_variant_and_reads_back() {
        let scenario = Scenario {
            customers: 40,
            outage: Duration::from_secs(2),
            arrive_over: Duration::from_secs(4),
            capacity: None,
            drain: protection::Drain {
                per_second: 20.0,
                concurrency: 4,
            },
        };
        let runs = Variant::ALL.map(|v| protection::run(v, scenario).unwrap());
        let text = protection::csv(&runs).unwrap();
        let (header, records) = retry_bench::records::read(&text).unwrap();
        assert_eq!(
            header,
            [
                "t_s",
                "plain_retries",
                "budget",
                "breaker",
                "budget_+_breaker",
                "breaker_+_queue"
            ]
        );
        assert!(!records.is_empty());
        assert!(records.iter().all(|r| r.len() == 6), "{text}");
        let calls: u64 = records.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
        assert_eq!(
            calls,
            runs[0].calls.iter().map(|&n| u64::from(n)).sum::<u64>()
        );

        // With the queue nobody is left without an answer: every customer the breaker turned
        // away was saved and answered later, through the same function.
        let queued = &runs[4];
        assert_eq!(queued.variant, Variant::Queue);
        assert_eq!((queued.not_possible, queued.dead), (0, 0));
        assert!(
            queued.saved > 0 && queued.answered_later == queued.saved,
            "{queued:?}"
        );
        assert_eq!(queued.succeeded + queued.answered_later, scenario.customers);
        assert_eq!(queued.succeeded + queued.saved, scenario.customers);
        // The breaker kept the outage as quiet as without the queue; the worker claimed nothing
        // while it was open.
        assert_eq!(
            queued.calls_before(scenario.outage),
            runs[2].calls_before(scenario.outage)
        );
        // The drain adds at most its pace (20 a second, one more where a second's window catches
        // an extra tick) to the 10 customers a second who keep arriving: no new spike.
        assert!(
            queued.peak_per_second_after(scenario.outage) <= 20 + 1 + 10,
            "{queued:?}"
        );
        assert!(queued.last_answer > scenario.arrive_over - Duration::from_millis(100));
    }
}
