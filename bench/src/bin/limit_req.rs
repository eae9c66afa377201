//! `cargo run --release -p retry-bench --bin limit_req -- [--clients 300] [--rate 400]
//! [--seconds 10] [--limit 200] [--burst 50] [--seed 2027] [the gate's settings]`
//!
//! The admission gate against a real server (issue 27, item 4): nginx with `limit_req` (429
//! beyond `--limit` requests a second, a burst of `--burst` without delay) in front of a small
//! upstream whose latency grows with its concurrency (50 ms + 2 ms × the requests it is working
//! on, which it finishes even when nobody waits any more), all on loopback. `--clients` clients
//! send `--rate` requests a second in all (Poisson, an open system: a request arrives whatever
//! happened to earlier ones) for `--seconds`, each through `#[retry(max = 2, base = "50ms")]`
//! with a 1 s limit per attempt and a 5 s deadline per call, and one of: no protection, a `RetryBudget`, a
//! `CircuitBreaker`, or an `AdmissionGate` of each mode (each attempt through it, first tries
//! included: `retry_bench::gate::attempt`, a 429 or 503 recorded as throttling). Budget,
//! breaker and gate are one per run, shared by the clients as one process's `static` would be.
//!
//! Prints goodput, the share of attempts nginx answered 429, the attempts shed at the client,
//! and the latency of the calls that succeeded (p50, p99, from the call's start, retries
//! included). Needs `nginx` on the `PATH` (Debian: `apt-get install nginx`); not run in CI.

use rand::RngExt;
use rand::rngs::SmallRng;
use retry_bench::cli::Flags;
use retry_bench::gate::{GateMode, Through, Tuning};
use retry_bench::virtual_time::{exponential, lock, stream};
use retry_runtime::{AdmissionGate, CircuitBreaker, CircuitOpen, GateOutcome, RetryBudget};
use retry_runtime::{Transient, retry};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const USAGE: &str = "usage: limit_req [--clients 300] [--rate 400] [--seconds 10] \
[--limit 200] [--burst 50] [--seed 2027] [the gate's settings, as `collapse --help` lists them]";

/// The upstream's latency: this, plus [`PER_REQUEST`] for each request it is working on.
const BASE_LATENCY: Duration = Duration::from_millis(50);
const PER_REQUEST: Duration = Duration::from_millis(2);
/// Each attempt's time limit.
const ATTEMPT_LIMIT: Duration = Duration::from_secs(1);
/// Each call's deadline, the rate limiter's waits included (a user's request does not wait
/// for ever): a call still waiting then is dropped, its permit given back, and counted as failed.
const DEADLINE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

/// What protects the server, on top of `#[retry(max = 2, base = "50ms")]`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Protection {
    None,
    Budget,
    Breaker,
    Gate(GateMode),
}

impl Protection {
    fn name(self) -> &'static str {
        match self {
            Protection::None => "no protection",
            Protection::Budget => "budget",
            Protection::Breaker => "breaker",
            Protection::Gate(mode) => mode.name(),
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let known: Vec<&str> = ["clients", "rate", "seconds", "limit", "burst", "seed"]
        .into_iter()
        .chain(Tuning::FLAGS)
        .collect();
    let flags = Flags::parse(&known, USAGE)?;
    let (tuning, tuned) = Tuning::from_flags(&flags)?;
    let setup = Setup {
        clients: flags.get("clients", 300)?,
        rate: flags.get("rate", 400.0)?,
        seconds: flags.get("seconds", 10.0)?,
        seed: flags.get("seed", 2027)?,
        tuning,
    };
    let limit: u32 = flags.get("limit", 200)?;
    let burst: u32 = flags.get("burst", 50)?;
    if !(setup.rate > 0.0 && setup.seconds > 0.0 && setup.clients > 0) {
        return Err("--clients, --rate and --seconds must be positive".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let upstream = Upstream::start().await?;
        let nginx = Nginx::start(upstream.port, limit, burst)?;
        let url = format!("http://127.0.0.1:{}/", nginx.port);
        wait_until_up(&url).await?;
        println!(
            "nginx {} with limit_req {limit} r/s, burst {burst} nodelay, status 429; upstream \
             latency {} ms + {} ms × its concurrency; {} clients, {} requests a second in all \
             (Poisson) for {} s; #[retry(max = 2, base = \"50ms\")], {} s per attempt, {} s per call\n",
            nginx.version,
            BASE_LATENCY.as_millis(),
            PER_REQUEST.as_millis(),
            setup.clients,
            setup.rate,
            setup.seconds,
            ATTEMPT_LIMIT.as_secs(),
            DEADLINE.as_secs(),
        );
        println!("{tuned}\n");
        println!(
            "| protection | requests | goodput / s | succeeded | attempts / request | 429 share of attempts sent | attempts timed out | calls shed or refused at the client | calls past the deadline | latency p50 | latency p99 | upstream peak concurrency |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        let protections = [Protection::None, Protection::Budget, Protection::Breaker]
            .into_iter()
            .chain(GateMode::ALL.map(Protection::Gate));
        for protection in protections {
            upstream.peak.store(0, Ordering::Relaxed);
            let result = drive(&url, protection, setup).await?;
            println!("{}", result.row(upstream.peak.load(Ordering::Relaxed)));
            // Let the upstream finish what it holds, and nginx's window empty.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        drop(nginx);
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}

/// The load of one run.
#[derive(Clone, Copy, Debug)]
struct Setup {
    clients: u32,
    rate: f64,
    seconds: f64,
    seed: u64,
    /// The gate's settings.
    tuning: Tuning,
}

/// The upstream: HTTP/1.1 with keep-alive, answering `200 OK` after 50 ms + 2 ms × the
/// requests it is working on (its own included, counted when it arrives). The work goes on in a
/// task of its own, so a request whose client has gone still costs its time.
struct Upstream {
    port: u16,
    peak: Arc<AtomicU32>,
}

impl Upstream {
    async fn start() -> std::io::Result<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let in_flight = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let counters = (Arc::clone(&in_flight), Arc::clone(&peak));
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (in_flight, peak) = (Arc::clone(&counters.0), Arc::clone(&counters.1));
                tokio::spawn(serve(socket, in_flight, peak));
            }
        });
        Ok(Upstream { port, peak })
    }
}

/// One keep-alive connection: each request's head read, worked on, answered.
async fn serve(mut socket: TcpStream, in_flight: Arc<AtomicU32>, peak: Arc<AtomicU32>) {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        while !data.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buffer).await {
                Ok(n) if n > 0 => data.extend_from_slice(&buffer[..n]),
                _ => return,
            }
        }
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            data.drain(..end + 4);
        }
        let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        peak.fetch_max(now, Ordering::Relaxed);
        let latency = BASE_LATENCY + PER_REQUEST * now;
        let counter = Arc::clone(&in_flight);
        let work = tokio::spawn(async move {
            tokio::time::sleep(latency).await;
            counter.fetch_sub(1, Ordering::Relaxed);
        });
        if work.await.is_err() {
            return;
        }
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        if socket.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// nginx, started with its own configuration in a temporary directory, in the foreground (one
/// process, no master), and killed when dropped.
struct Nginx {
    child: Child,
    port: u16,
    version: String,
    dir: PathBuf,
}

impl Nginx {
    fn start(upstream: u16, limit: u32, burst: u32) -> Result<Nginx, Box<dyn std::error::Error>> {
        let version = Command::new("nginx").arg("-v").output().map_err(|e| {
            format!(
                "nginx not found ({e}): this benchmark needs a real nginx on the PATH \
                     (Debian: `apt-get install nginx`)"
            )
        })?;
        let version = String::from_utf8_lossy(&version.stderr)
            .trim()
            .trim_start_matches("nginx version: ")
            .to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("retry-limit-req-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let d = dir.display();
        let config = format!(
            "worker_processes 1;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    limit_req_zone $server_name zone=api:1m rate={limit}r/s;
    limit_req_status 429;
    limit_req_log_level info;
    upstream app {{ server 127.0.0.1:{upstream}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        server_name limit_req;
        keepalive_requests 100000;
        location / {{
            limit_req zone=api burst={burst} nodelay;
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }}
    }}
}}
"
        );
        let file = dir.join("nginx.conf");
        std::fs::write(&file, config)?;
        let child = Command::new("nginx")
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Nginx {
            child,
            port,
            version,
            dir,
        })
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(Path::new(&self.dir));
    }
}

async fn wait_until_up(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client.get(url).send().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("nginx did not answer on {url} within 5 s").into())
}

/// Why an attempt did not succeed.
#[derive(Debug)]
enum Failure {
    /// nginx answered 429 (or the upstream 503): throttled.
    Throttled,
    /// Another status, or a transport error.
    Failed,
    /// No answer within [`ATTEMPT_LIMIT`].
    TimedOut,
    /// The breaker refused, or the gate shed, the attempt: nothing was sent.
    Refused,
    /// The call's [`DEADLINE`] passed (waiting for the rate limiter's tokens, mostly).
    Deadline,
}

impl Transient for Failure {
    fn is_transient(&self) -> bool {
        !matches!(self, Failure::Refused | Failure::Deadline)
    }
}

impl From<CircuitOpen> for Failure {
    fn from(_: CircuitOpen) -> Self {
        Failure::Refused
    }
}

/// One run's shared state: the client, the protections, the counts.
struct Run {
    client: reqwest::Client,
    url: String,
    budget: RetryBudget,
    breaker: CircuitBreaker,
    gate: Option<AdmissionGate>,
    draws: Mutex<SmallRng>,
    sent: AtomicU64,
    throttled: AtomicU64,
    timed_out: AtomicU64,
}

impl Run {
    /// One attempt: sent, answered (or not) within the limit.
    async fn attempt(&self) -> Result<(), Failure> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        let answer = tokio::time::timeout(ATTEMPT_LIMIT, async {
            let response = self
                .client
                .get(&self.url)
                .send()
                .await
                .map_err(|_| Failure::Failed)?;
            let status = response.status().as_u16();
            let _ = response.bytes().await;
            match status {
                200 => Ok(()),
                429 | 503 => Err(Failure::Throttled),
                _ => Err(Failure::Failed),
            }
        })
        .await
        .unwrap_or(Err(Failure::TimedOut));
        match answer {
            Err(Failure::Throttled) => self.throttled.fetch_add(1, Ordering::Relaxed),
            Err(Failure::TimedOut) => self.timed_out.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        answer
    }
}

#[retry(max = 2, base = "50ms")]
async fn plain(run: &Run) -> Result<(), Failure> {
    run.attempt().await
}

#[retry(max = 2, base = "50ms", budget = run.budget)]
async fn with_budget(run: &Run) -> Result<(), Failure> {
    run.attempt().await
}

#[retry(max = 2, base = "50ms", breaker = run.breaker)]
async fn with_breaker(run: &Run) -> Result<(), Failure> {
    run.attempt().await
}

#[retry(max = 2, base = "50ms")]
async fn with_gate(run: &Run) -> Result<(), Failure> {
    let Some(gate) = &run.gate else {
        return run.attempt().await;
    };
    let draw = || lock(&run.draws).random::<f64>();
    let judge = |answer: &Result<(), Failure>| match answer {
        Err(Failure::Throttled) => GateOutcome::Throttled,
        Err(Failure::TimedOut) => GateOutcome::TimedOut,
        _ => GateOutcome::Accepted,
    };
    match retry_bench::gate::attempt(gate, draw, None, run.attempt(), judge).await {
        Through::Answered(answer) => answer,
        Through::TimedOut => Err(Failure::TimedOut),
        Through::Shed(_) => Err(Failure::Refused),
    }
}

/// What one run measured.
struct Measured {
    protection: Protection,
    seconds: f64,
    requests: u64,
    latencies: Vec<Duration>,
    refused: u64,
    late: u64,
    sent: u64,
    throttled: u64,
    timed_out: u64,
}

impl Measured {
    fn row(&self, peak: u32) -> String {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let quantile = |q: f64| {
            sorted
                .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
                .map_or_else(
                    || "—".to_owned(),
                    |d| format!("{:.0} ms", d.as_secs_f64() * 1e3),
                )
        };
        let succeeded = sorted.len() as u64;
        format!(
            "| {} | {} | {:.1} | {:.1} % | {:.2} | {:.1} % | {} | {} | {} | {} | {} | {peak} |",
            self.protection.name(),
            self.requests,
            succeeded as f64 / self.seconds,
            100.0 * succeeded as f64 / self.requests.max(1) as f64,
            self.sent as f64 / self.requests.max(1) as f64,
            100.0 * self.throttled as f64 / self.sent.max(1) as f64,
            self.timed_out,
            self.refused,
            self.late,
            quantile(0.5),
            quantile(0.99),
        )
    }
}

/// One run: the clients' requests for `setup.seconds`, each through `protection`; waits for
/// the last to end.
async fn drive(
    url: &str,
    protection: Protection,
    setup: Setup,
) -> Result<Measured, Box<dyn std::error::Error>> {
    let run = Arc::new(Run {
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .build()?,
        url: url.to_owned(),
        budget: RetryBudget::new(),
        breaker: CircuitBreaker::new(),
        gate: match protection {
            Protection::Gate(mode) => Some(mode.gate_with(&setup.tuning)),
            _ => None,
        },
        draws: Mutex::new(stream(setup.seed, &[u64::MAX])),
        sent: AtomicU64::new(0),
        throttled: AtomicU64::new(0),
        timed_out: AtomicU64::new(0),
    });
    let per_client = Duration::from_secs_f64(f64::from(setup.clients) / setup.rate);
    let duration = Duration::from_secs_f64(setup.seconds);
    let start = tokio::time::Instant::now();
    let clients: Vec<_> = (0..setup.clients)
        .map(|c| {
            let run = Arc::clone(&run);
            tokio::spawn(async move {
                let mut arrivals = stream(setup.seed, &[u64::from(c)]);
                let mut at = exponential(&mut arrivals, per_client);
                let mut calls = tokio::task::JoinSet::new();
                while at < duration {
                    tokio::time::sleep_until(start + at).await;
                    let run = Arc::clone(&run);
                    calls.spawn(async move {
                        let began = Instant::now();
                        let call = async {
                            match protection {
                                Protection::None => plain(&run).await,
                                Protection::Budget => with_budget(&run).await,
                                Protection::Breaker => with_breaker(&run).await,
                                Protection::Gate(_) => with_gate(&run).await,
                            }
                        };
                        let answer = tokio::time::timeout(DEADLINE, call)
                            .await
                            .unwrap_or(Err(Failure::Deadline));
                        (answer, began.elapsed())
                    });
                    at += exponential(&mut arrivals, per_client);
                }
                let mut ended = Vec::new();
                while let Some(call) = calls.join_next().await {
                    ended.push(call?);
                }
                Ok::<_, tokio::task::JoinError>(ended)
            })
        })
        .collect();
    let mut measured = Measured {
        protection,
        seconds: setup.seconds,
        requests: 0,
        latencies: Vec::new(),
        refused: 0,
        late: 0,
        sent: 0,
        throttled: 0,
        timed_out: 0,
    };
    for client in clients {
        for (answer, took) in client.await?? {
            measured.requests += 1;
            match answer {
                Ok(()) => measured.latencies.push(took),
                Err(Failure::Refused) => measured.refused += 1,
                Err(Failure::Deadline) => measured.late += 1,
                Err(_) => {}
            }
        }
    }
    measured.sent = run.sent.load(Ordering::Relaxed);
    measured.throttled = run.throttled.load(Ordering::Relaxed);
    measured.timed_out = run.timed_out.load(Ordering::Relaxed);
    Ok(measured)
}
