//! "The Tail at Scale" (Dean and Barroso, CACM 2013), simulated with the real `hedge` of
//! `#[retry]` on tokio's paused clock: a request fans out to many sub-requests of a service
//! whose latency is long-tailed, and is as slow as its slowest sub-request.
//!
//! The service: 98.9 % of calls take 1–10 ms, 1 % take 10–100 ms, 0.1 % take 1–2 s (uniform
//! within each band, whole milliseconds, as tokio's timer ticks), so its 95th percentile is
//! about 10 ms. Every latency comes from one seeded generator, drawn as each call starts; a
//! single-threaded runtime with a paused clock starts the calls in the same order every run, so
//! a seed gives the same numbers on any machine, and ten thousand virtual seconds take a few
//! real ones.
//!
//! The peer in the same run: tower's `Hedge` middleware (tower 0.5, feature `hedge`) over the
//! same service, hedging after the 95th percentile of its own rotating latency histogram, with
//! the same seed and fan-out.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use retry_runtime::retry;
use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::time::Duration;
use tower::{Service as _, ServiceExt as _};

/// The service: a seeded latency per call, and the calls counted.
pub struct Service {
    rng: RefCell<SmallRng>,
    calls: Cell<u64>,
}

impl Service {
    /// A service whose latencies come from `seed`.
    pub fn new(seed: u64) -> Service {
        Service {
            rng: RefCell::new(SmallRng::seed_from_u64(seed)),
            calls: Cell::new(0),
        }
    }

    /// One call: the service's latency, then an answer.
    pub async fn call(&self) -> io::Result<()> {
        self.calls.set(self.calls.get() + 1);
        let latency = latency(&mut self.rng.borrow_mut());
        tokio::time::sleep(latency).await;
        Ok(())
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.get()
    }
}

/// One latency of the service.
pub fn latency(rng: &mut SmallRng) -> Duration {
    let band: f64 = rng.random();
    let ms = if band < 0.989 {
        rng.random_range(1..=10)
    } else if band < 0.999 {
        rng.random_range(10..=100)
    } else {
        rng.random_range(1000..=2000)
    };
    Duration::from_millis(ms)
}

/// A sub-request without hedging.
#[retry(max = 0)]
async fn plain(service: &Service) -> io::Result<()> {
    service.call().await
}

/// A sub-request hedged after 10 ms, about the service's 95th percentile.
#[retry(max = 0, hedge = "10ms")]
async fn hedged_10ms(service: &Service) -> io::Result<()> {
    service.call().await
}

/// The same with a second copy 10 ms after the first (at 20 ms): both copies and the attempt
/// must be slow for the sub-request to be.
#[retry(max = 0, hedge = "10ms", max_hedges = 2)]
async fn hedged_10ms_twice(service: &Service) -> io::Result<()> {
    service.call().await
}

/// A sub-request hedged after the 95th percentile of the latency observed so far, for a fan-out
/// of 100.
#[retry(max = 0, hedge = "p95")]
async fn hedged_p95(service: &Service) -> io::Result<()> {
    service.call().await
}

/// The same for any other fan-out: a function of its own, so that its histogram (a `static` of
/// the function) holds only the latencies of its own run, on that run's paused clock. Each run
/// has a runtime of its own, whose paused clock starts from the real time when it is built.
#[retry(max = 0, hedge = "p95")]
async fn hedged_p95_other(service: &Service) -> io::Result<()> {
    service.call().await
}

/// tower's `Hedge`: the percentile it hedges after, as a fraction.
pub const TOWER_PERCENTILE: f32 = 0.95;
/// tower's `Hedge`: how many latencies its histogram must hold before it hedges; 20, as
/// `hedge = "p95"` waits for.
pub const TOWER_MIN_DATA_POINTS: u64 = 20;
/// tower's `Hedge`: the period of its rotating histogram; 10 s, the length of each of the two
/// windows of `hedge = "p95"`. It reads the percentile from the *previous* period only, so it
/// hedges nothing during the first one: its warm-up.
pub const TOWER_PERIOD: Duration = Duration::from_secs(10);

/// tower's hedging policy for these requests: every request may be cloned and hedged (the
/// service has no side effects), so the decision is its histogram's alone.
#[derive(Clone, Copy, Debug)]
struct EveryRequest;

impl tower::hedge::Policy<()> for EveryRequest {
    fn clone_request(&self, _: &()) -> Option<()> {
        Some(())
    }

    fn can_retry(&self, _: &()) -> bool {
        true
    }
}

/// How the sub-requests are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// One call each.
    Plain,
    /// `hedge = "10ms"`.
    Hedge10ms,
    /// `hedge = "10ms", max_hedges = 2`.
    Hedge10msTwice,
    /// `hedge = "p95"`.
    HedgeP95,
    /// tower's `Hedge` after its histogram's 95th percentile.
    TowerP95,
}

impl Strategy {
    /// Every strategy, in the order the table shows them.
    pub const ALL: [Strategy; 5] = [
        Strategy::Plain,
        Strategy::Hedge10ms,
        Strategy::Hedge10msTwice,
        Strategy::HedgeP95,
        Strategy::TowerP95,
    ];

    /// The name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Plain => "no hedging",
            Strategy::Hedge10ms => "hedge = \"10ms\"",
            Strategy::Hedge10msTwice => "hedge = \"10ms\", max_hedges = 2",
            Strategy::HedgeP95 => "hedge = \"p95\"",
            Strategy::TowerP95 => "tower's Hedge, p95",
        }
    }

    /// One sub-request of an attribute strategy (tower's is made in [`run`]).
    async fn sub_request(self, service: &Service, fan_out: usize) -> io::Result<()> {
        match self {
            Strategy::Plain | Strategy::TowerP95 => plain(service).await,
            Strategy::Hedge10ms => hedged_10ms(service).await,
            Strategy::Hedge10msTwice => hedged_10ms_twice(service).await,
            Strategy::HedgeP95 if fan_out == 100 => hedged_p95(service).await,
            Strategy::HedgeP95 => hedged_p95_other(service).await,
        }
    }
}

/// What one strategy gave for one fan-out.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Sub-requests per request.
    pub fan_out: usize,
    /// The strategy.
    pub strategy: Strategy,
    /// The latency of each request, in milliseconds, sorted.
    pub latencies: Vec<f64>,
    /// The same for the requests that started after tower's first period ([`TOWER_PERIOD`] of
    /// virtual time), when its histogram has a percentile to read.
    pub after_warm_up: Vec<f64>,
    /// Calls made per sub-request, hedges included (1.0 without hedging).
    pub calls_per_sub_request: f64,
}

impl Outcome {
    /// The `p`-th percentile (0 < p < 100) of request latency, in ms: the smallest latency at
    /// least `p` % of the requests did not exceed.
    pub fn percentile(&self, p: f64) -> f64 {
        percentile(&self.latencies, p)
    }

    /// The same over [`after_warm_up`](Outcome::after_warm_up).
    pub fn percentile_after_warm_up(&self, p: f64) -> f64 {
        percentile(&self.after_warm_up, p)
    }

    /// Extra calls over one per sub-request, in percent.
    pub fn extra_calls_percent(&self) -> f64 {
        (self.calls_per_sub_request - 1.0) * 100.0
    }
}

/// The smallest of the sorted `latencies` that at least `p` % of them do not exceed.
fn percentile(latencies: &[f64], p: f64) -> f64 {
    let n = latencies.len();
    if n == 0 {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    latencies[rank.clamp(1, n) - 1]
}

/// `requests` requests of `fan_out` sub-requests each, one after the other, with `strategy`, on
/// a fresh single-threaded runtime with a paused clock.
pub fn run(strategy: Strategy, fan_out: usize, requests: usize, seed: u64) -> Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds");
    let service = Rc::new(Service::new(seed));
    let timed = runtime.block_on(async {
        // tower's middleware over the same service, built on the paused clock (its histogram
        // starts its first period now). Each sub-request is one `call` of it.
        let mut tower = (strategy == Strategy::TowerP95).then(|| {
            let service = Rc::clone(&service);
            let inner = tower::service_fn(move |()| {
                let service = Rc::clone(&service);
                async move { service.call().await }
            });
            tower::hedge::Hedge::new(
                inner,
                EveryRequest,
                TOWER_MIN_DATA_POINTS,
                TOWER_PERCENTILE,
                TOWER_PERIOD,
            )
        });
        // The `p95` forms learn from the first requests; they start from the same state in
        // every run only if their histograms are warmed the same way, which the same seed does.
        let t0 = tokio::time::Instant::now();
        let mut timed = Vec::with_capacity(requests);
        for _ in 0..requests {
            let start = tokio::time::Instant::now();
            match &mut tower {
                Some(hedge) => {
                    let mut subs = Vec::with_capacity(fan_out);
                    for _ in 0..fan_out {
                        let ready = hedge.ready().await.expect("tower's Hedge is always ready");
                        subs.push(ready.call(()));
                    }
                    for result in futures_util::future::join_all(subs).await {
                        result.expect("the service always answers");
                    }
                }
                None => {
                    let subs = (0..fan_out).map(|_| strategy.sub_request(&service, fan_out));
                    for result in futures_util::future::join_all(subs).await {
                        result.expect("the service always answers");
                    }
                }
            }
            timed.push((start - t0, start.elapsed().as_secs_f64() * 1000.0));
        }
        timed
    });
    let sorted = |latencies: Vec<f64>| {
        let mut latencies = latencies;
        latencies.sort_by(f64::total_cmp);
        latencies
    };
    Outcome {
        fan_out,
        strategy,
        latencies: sorted(timed.iter().map(|&(_, ms)| ms).collect()),
        after_warm_up: sorted(
            timed
                .iter()
                .filter(|&&(at, _)| at >= TOWER_PERIOD)
                .map(|&(_, ms)| ms)
                .collect(),
        ),
        calls_per_sub_request: service.calls() as f64 / (fan_out * requests) as f64,
    }
}

/// The service's own percentiles, from `samples` draws: what "after the 95th percentile" means.
pub fn service_percentiles(seed: u64, samples: usize) -> [(f64, f64); 4] {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ms: Vec<f64> = (0..samples)
        .map(|_| latency(&mut rng).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    [50.0, 95.0, 99.0, 99.9].map(|p| {
        let rank = ((p / 100.0) * samples as f64).ceil() as usize;
        (p, ms[rank.clamp(1, samples) - 1])
    })
}

/// The CSV of `outcomes`: one row per fan-out and strategy.
pub fn csv(outcomes: &[Outcome]) -> Result<String, Box<dyn std::error::Error>> {
    let rows = outcomes.iter().map(|o| {
        vec![
            o.fan_out.to_string(),
            o.strategy.name().to_owned(),
            o.latencies.len().to_string(),
            format!("{:.0}", o.percentile(50.0)),
            format!("{:.0}", o.percentile(99.0)),
            format!("{:.0}", o.percentile(99.9)),
            format!("{:.2}", o.extra_calls_percent()),
            o.after_warm_up.len().to_string(),
            format!("{:.0}", o.percentile_after_warm_up(99.0)),
            format!("{:.0}", o.percentile_after_warm_up(99.9)),
        ]
    });
    crate::records::csv(
        &[
            "fan_out",
            "strategy",
            "requests",
            "p50_ms",
            "p99_ms",
            "p999_ms",
            "extra_calls_percent",
            "requests_after_10s",
            "p99_after_10s_ms",
            "p999_after_10s_ms",
        ],
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run, twice: the same seed gives the same latencies, and hedging cuts the tail.
    #[test]
    fn a_seed_gives_the_same_run_and_hedging_cuts_the_tail() {
        let a = run(Strategy::Hedge10ms, 20, 200, 1);
        let b = run(Strategy::Hedge10ms, 20, 200, 1);
        assert_eq!(a.latencies, b.latencies);
        let plain = run(Strategy::Plain, 20, 200, 1);
        assert_eq!(plain.calls_per_sub_request, 1.0);
        assert!(a.percentile(99.0) < plain.percentile(99.0) / 10.0);
        assert!(a.calls_per_sub_request > 1.0 && a.calls_per_sub_request < 1.2);
    }

    /// tower's `Hedge` in the same simulation: nothing is hedged during its first period, then
    /// it cuts the tail as ours does.
    #[test]
    fn towers_hedge_hedges_only_after_its_first_period() {
        // About 50 ms per request (the slowest of 20 calls): 100 requests fit in the first 10 s
        // of virtual time, which are unhedged.
        let early = run(Strategy::TowerP95, 20, 100, 1);
        assert!(early.after_warm_up.is_empty());
        assert_eq!(early.calls_per_sub_request, 1.0);
        // The same seed without hedging draws the same latencies: the same requests.
        assert_eq!(early.latencies, run(Strategy::Plain, 20, 100, 1).latencies);
        let long = run(Strategy::TowerP95, 20, 2000, 1);
        assert!(
            long.after_warm_up.len() > 500,
            "{}",
            long.after_warm_up.len()
        );
        assert!(long.calls_per_sub_request > 1.0 && long.calls_per_sub_request < 1.2);
        let plain = run(Strategy::Plain, 20, 2000, 1);
        assert!(
            long.percentile_after_warm_up(99.0) < plain.percentile_after_warm_up(99.0) / 10.0,
            "{} against {}",
            long.percentile_after_warm_up(99.0),
            plain.percentile_after_warm_up(99.0)
        );
    }
}
