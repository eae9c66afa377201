//! The optimistic-concurrency experiment of the AWS Architecture Blog post "Exponential Backoff
//! And Jitter" (2015), as a discrete-event simulation whose pauses come from
//! [`retry_runtime::Policy::delay`].
//!
//! N clients each want to update one shared row once. An attempt reads the row's version, then
//! writes with it; the write fails if another client wrote first. Every network hop takes
//! |Normal(10 ms, 2 ms)|. A client whose write failed pauses per its policy, then starts again with
//! a fresh read, without limit, until its write succeeds.
//!
//! # The mapping onto this project's policy
//!
//! The post's backoff is `min(cap, base·2^attempt)` with `base` 5 ms, `cap` 2 s, and the first
//! retry uses `attempt = 1` (10 ms). This project's pause `n` is `base·factor^(n−1)` with the first
//! retry `n = 1`. So every policy here has `base = 5 ms`, `factor = 2`, `max_delay = 2 s`, and the
//! pause after the post's `attempt` is `policy.delay(attempt + 1, previous)`: one retry number
//! ahead, `5 ms·2^attempt`. Decorrelated jitter ignores the retry number and draws from the
//! previous pause, `min(cap, U[base, 3·previous])` starting from `base`, exactly as the post's.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use retry_runtime::{Jitter, Policy};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

const BASE: Duration = Duration::from_millis(5);
const CAP: Duration = Duration::from_secs(2);
const HOP_MEAN_MS: f64 = 10.0;
const HOP_SD_MS: f64 = 2.0;

/// A strategy of the experiment: the post's five, and this project's default jitter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Strategy {
    /// The name in the table, the CSV and the legend.
    pub name: &'static str,
    /// The runtime policy whose `delay` gives each pause.
    pub policy: Policy,
}

const fn backoff(jitter: Jitter) -> Policy {
    Policy::new()
        .max(u32::MAX)
        .base(BASE)
        .max_delay(CAP)
        .jitter(jitter)
}

/// The strategies in the post's order, then this project's default.
pub const STRATEGIES: [Strategy; 6] = [
    Strategy {
        name: "no backoff",
        // A zero base makes every pause zero: retry at once.
        policy: Policy::new()
            .base(Duration::ZERO)
            .max_delay(Duration::ZERO)
            .jitter(Jitter::None),
    },
    Strategy {
        name: "exponential",
        policy: backoff(Jitter::None),
    },
    Strategy {
        name: "full",
        policy: backoff(Jitter::Full),
    },
    Strategy {
        name: "equal",
        policy: backoff(Jitter::Equal),
    },
    Strategy {
        name: "decorrelated",
        policy: backoff(Jitter::Decorrelated),
    },
    Strategy {
        name: "default (d + U[0, d/2))",
        policy: backoff(Jitter::Proportional(0.5)),
    },
];

/// One point of the experiment: the means over its runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Clients contending for the row.
    pub clients: u32,
    /// Mean write attempts the server received, per run.
    pub calls: f64,
    /// Mean time until the last client succeeded, in milliseconds.
    pub completion_ms: f64,
}

/// A message in flight, delivered at `at` (milliseconds).
#[derive(Debug)]
struct Event {
    at: f64,
    client: usize,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// A read reaches the server.
    Read,
    /// The version the server read reaches the client.
    ReadReply(u64),
    /// A write with the version the client read reaches the server.
    Write(u64),
    /// The write's verdict reaches the client.
    WriteReply(bool),
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at
            .total_cmp(&other.at)
            .then(self.client.cmp(&other.client))
    }
}

/// |Normal(mean, sd)| by the Box–Muller transform.
fn hop(rng: &mut SmallRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]: ln stays finite
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (HOP_MEAN_MS + HOP_SD_MS * z).abs()
}

/// One run: `clients` clients against one row. Returns (write attempts, completion time in ms).
///
/// The network's randomness comes from `rng`; the pauses' from the runtime's per-thread generator,
/// as in production.
pub fn run_once(policy: &Policy, clients: u32, rng: &mut SmallRng) -> (u64, f64) {
    let clients = clients as usize;
    let mut queue = BinaryHeap::with_capacity(clients);
    for client in 0..clients {
        queue.push(Reverse(Event {
            at: hop(rng),
            client,
            kind: Kind::Read,
        }));
    }
    let mut version = 0u64;
    let mut calls = 0u64;
    let mut attempts = vec![0u32; clients];
    let mut previous = vec![Duration::ZERO; clients];
    let mut now = 0.0;
    while let Some(Reverse(event)) = queue.pop() {
        now = event.at;
        let client = event.client;
        let next = match event.kind {
            Kind::Read => Some((now + hop(rng), Kind::ReadReply(version))),
            Kind::ReadReply(read) => Some((now + hop(rng), Kind::Write(read))),
            Kind::Write(read) => {
                calls += 1;
                let ok = read == version;
                if ok {
                    version += 1;
                }
                Some((now + hop(rng), Kind::WriteReply(ok)))
            }
            Kind::WriteReply(true) => None,
            Kind::WriteReply(false) => {
                attempts[client] += 1;
                // The post's attempt `a` is this project's retry `a + 1`; see the module docs.
                let pause = policy.delay(attempts[client] + 1, previous[client]);
                previous[client] = pause;
                Some((now + hop(rng) + pause.as_secs_f64() * 1e3, Kind::Read))
            }
        };
        if let Some((at, kind)) = next {
            queue.push(Reverse(Event { at, client, kind }));
        }
    }
    (calls, now)
}

/// The mean of `runs` runs for `clients` clients. Runs are seeded from `seed`, so the network is
/// the same for every strategy at the same point.
pub fn point(policy: &Policy, clients: u32, runs: u32, seed: u64) -> Point {
    let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(clients));
    let (mut calls, mut time) = (0.0, 0.0);
    for _ in 0..runs {
        let (c, t) = run_once(policy, clients, &mut rng);
        calls += c as f64;
        time += t;
    }
    let runs = f64::from(runs.max(1));
    Point {
        clients,
        calls: calls / runs,
        completion_ms: time / runs,
    }
}

/// The points as CSV, one row per strategy and client count: `clients`, `strategy`, `calls`,
/// `completion_ms`. `results[s][i]` is strategy `s` of [`STRATEGIES`] at its `i`-th point.
pub fn csv(results: &[Vec<Point>]) -> Result<String, Box<dyn std::error::Error>> {
    let rows = STRATEGIES.iter().zip(results).flat_map(|(s, points)| {
        points.iter().map(|p| {
            vec![
                p.clients.to_string(),
                s.name.to_owned(),
                format!("{:.1}", p.calls),
                format!("{:.1}", p.completion_ms),
            ]
        })
    });
    crate::records::csv(&["clients", "strategy", "calls", "completion_ms"], rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csv_keeps_a_name_with_a_comma_in_one_field() {
        // The default's name, `default (d + U[0, d/2))`, holds a comma.
        let results: Vec<Vec<Point>> = STRATEGIES
            .iter()
            .map(|s| vec![point(&s.policy, 10, 2, 1), point(&s.policy, 20, 2, 1)])
            .collect();
        let (header, records) = crate::records::read(&csv(&results).unwrap()).unwrap();
        assert_eq!(header, ["clients", "strategy", "calls", "completion_ms"]);
        assert_eq!(records.len(), 2 * STRATEGIES.len());
        assert!(records.iter().all(|r| r.len() == 4));
        let names: Vec<&str> = records.iter().map(|r| r[1].as_str()).collect();
        assert!(names.contains(&"default (d + U[0, d/2))"), "{names:?}");
        assert_eq!(records[1][0], "20");
    }

    #[test]
    fn every_client_writes_once_and_a_lone_client_needs_one_call() {
        let mut rng = SmallRng::seed_from_u64(7);
        for s in STRATEGIES {
            let (calls, time) = run_once(&s.policy, 1, &mut rng);
            assert_eq!(calls, 1, "{}", s.name);
            // Four hops of about 10 ms.
            assert!((20.0..60.0).contains(&time), "{}: {time}", s.name);
        }
    }

    #[test]
    fn without_backoff_the_work_grows_with_the_square() {
        let p = point(&STRATEGIES[0].policy, 20, 20, 1);
        // One winner per round of roughly 20 contenders: about 20·21/2 = 210 writes.
        assert!((120.0..260.0).contains(&p.calls), "{p:?}");
    }

    #[test]
    fn the_mapping_reproduces_the_posts_backoff() {
        let exp = &STRATEGIES[1].policy;
        // min(cap, 5 ms·2^attempt) for attempt = 1, 2, 3, and the cap.
        assert_eq!(exp.delay(2, Duration::ZERO), Duration::from_millis(10));
        assert_eq!(exp.delay(3, Duration::ZERO), Duration::from_millis(20));
        assert_eq!(exp.delay(4, Duration::ZERO), Duration::from_millis(40));
        assert_eq!(exp.delay(30, Duration::ZERO), CAP);
        assert_eq!(
            STRATEGIES[0].policy.delay(5, Duration::ZERO),
            Duration::ZERO
        );
    }
}
