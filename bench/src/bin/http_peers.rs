//! `cargo run --release -p retry-bench --bin http_peers`
//!
//! The tower layer and the reqwest middleware of retry-runtime against the peers a user would
//! pick instead: tower's own `retry` (0.5.3, with the policy its documentation leads to write),
//! tower-resilience's `RetryLayer` (tower-resilience-retry 0.14.0) and TrueLayer's
//! `reqwest-retry` (0.9.1). Each runs against the same scripted HTTP/1 server on loopback, on
//! the real clock (a `Retry-After: 1` costs a real second), and the program prints two markdown
//! tables of what was observed: what the server received and what the caller got. The jitter
//! cap is drawn from each crate's backoff 10,000 times. About 4 s. The tower-resilience column
//! needs `--features tower-resilience` (see bench/Cargo.toml why it is optional).

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use retry_http::reqwest::RetryMiddleware;
use retry_http::tower::RetryLayer;
use retry_http::{HttpRetry, ReplayBody};
use retry_runtime::{Policy, RetryBudget};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::ServiceExt;
use tower::retry::backoff::{Backoff, ExponentialBackoff, ExponentialBackoffMaker, MakeBackoff};
use tower::retry::budget::{Budget, TpsBudget};
use tower::util::rng::HasherRng;

// ---------------------------------------------------------------- the scripted server

/// What the server received in one request: method, `Idempotency-Key`, body.
#[derive(Clone, Debug)]
struct Received {
    body: Vec<u8>,
}

const CLOSE: &str = "";
const BUSY_1S: &str =
    "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\n\r\n";
const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";
const PAID: &str = "HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\npaid";
const CUT: &str = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npaid";

type Log = Arc<Mutex<Vec<Received>>>;

/// A loopback server that answers the n-th request with the n-th answer (the last again once
/// they run out), one request per connection; `CLOSE` closes without answering.
async fn scripted(answers: &'static [&'static str]) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let url = format!("http://{}/pay", listener.local_addr().expect("an address"));
    let log: Log = Arc::default();
    let received = Arc::clone(&log);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let Some(request) = read_request(&mut socket).await else {
                continue;
            };
            let n = {
                let mut log = received.lock().expect("the log");
                log.push(request);
                log.len() - 1
            };
            let answer = answers[n.min(answers.len() - 1)];
            if answer != CLOSE {
                let answer = answer.replacen("\r\n", "\r\nconnection: close\r\n", 1);
                let _ = socket.write_all(answer.as_bytes()).await;
            }
            let _ = socket.shutdown().await;
        }
    });
    (url, log)
}

async fn read_request(socket: &mut TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).to_lowercase();
    let mut rest = data[end..].to_vec();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    let body = match length {
        Some(length) => {
            while rest.len() < length {
                let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
                rest.extend_from_slice(&buffer[..n]);
            }
            rest[..length].to_vec()
        }
        None if head.contains("transfer-encoding: chunked") => {
            while !rest.ends_with(b"0\r\n\r\n") {
                let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
                rest.extend_from_slice(&buffer[..n]);
            }
            dechunk(&rest)
        }
        None => Vec::new(),
    };
    Some(Received { body })
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line) = chunked.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(&String::from_utf8_lossy(&chunked[..line]), 16)
            .unwrap_or_default();
        if size == 0 || chunked.len() < line + 4 + size {
            break;
        }
        body.extend_from_slice(&chunked[line + 2..line + 2 + size]);
        chunked = &chunked[line + 4 + size..];
    }
    body
}

// ---------------------------------------------------------------- the clients

/// The request body of a scenario.
#[derive(Clone, Copy)]
enum Payload {
    Empty,
    Text(&'static str),
    /// A stream of unknown length.
    Stream(&'static [&'static str]),
}

/// What the caller got: a status (with the body read, or why it could not be), or an error.
struct Outcome {
    answer: String,
    elapsed: Duration,
}

type Pending = Pin<Box<dyn Future<Output = Outcome>>>;
/// A client under test: sends one request and reports what came back.
type Caller = Box<dyn Fn(Method, String, Payload) -> Pending>;

type Dyn = BoxBody<Bytes, std::io::Error>;

fn dyn_body(payload: Payload) -> Dyn {
    match payload {
        Payload::Empty => Full::new(Bytes::new()).map_err(|n| match n {}).boxed(),
        Payload::Text(text) => Full::new(Bytes::from_static(text.as_bytes()))
            .map_err(|n| match n {})
            .boxed(),
        Payload::Stream(chunks) => {
            let frames = chunks
                .iter()
                .map(|c| Ok(http_body::Frame::data(Bytes::from_static(c.as_bytes()))));
            StreamBody::new(futures_util::stream::iter(frames)).boxed()
        }
    }
}

async fn answer_of<E: std::fmt::Display>(
    started: Instant,
    outcome: Result<Response<Incoming>, E>,
) -> Outcome {
    let answer = match outcome {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.into_body().collect().await {
                Ok(_) => status.to_string(),
                Err(_) => format!("{status}, body cut off"),
            }
        }
        Err(error) => format!("error: {error}"),
    };
    Outcome {
        answer,
        elapsed: started.elapsed(),
    }
}

fn policy() -> Policy {
    Policy::new().max(3).base(Duration::from_millis(10))
}

/// Ours: the tower layer over hyper's client.
fn ours_layer(config: HttpRetry) -> Caller {
    let client: Client<HttpConnector, ReplayBody<Dyn>> =
        Client::builder(TokioExecutor::new()).build_http();
    let service = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(config))
        .service(client);
    Box::new(move |method, url, payload| {
        let service = service.clone();
        Box::pin(async move {
            let request = Request::builder()
                .method(method)
                .uri(url)
                .body(dyn_body(payload))
                .expect("a request");
            let started = Instant::now();
            answer_of(started, service.oneshot(request).await).await
        })
    })
}

/// tower's `retry`: the policy a user writes from its documentation (retry errors and 5xx or
/// 429, three times, `ExponentialBackoff` with jitter, an optional `TpsBudget`), cloning the
/// request when its body can be cloned.
struct TowerPolicy<B> {
    left: u32,
    first: bool,
    backoff: ExponentialBackoff,
    budget: Option<Arc<TpsBudget>>,
    clone: fn(&Request<B>) -> Option<Request<B>>,
}

// By hand: a derive would ask `B: Clone`, and a stream body is not.
impl<B> Clone for TowerPolicy<B> {
    fn clone(&self) -> Self {
        TowerPolicy {
            left: self.left,
            first: self.first,
            backoff: self.backoff.clone(),
            budget: self.budget.clone(),
            clone: self.clone,
        }
    }
}

impl<B, E> tower::retry::Policy<Request<B>, Response<Incoming>, E> for TowerPolicy<B> {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _: &mut Request<B>,
        result: &mut Result<Response<Incoming>, E>,
    ) -> Option<Self::Future> {
        if std::mem::take(&mut self.first)
            && let Some(budget) = &self.budget
        {
            budget.deposit();
        }
        let failed = match result {
            Ok(response) => response.status().is_server_error() || response.status() == 429,
            Err(_) => true,
        };
        if !failed || self.left == 0 {
            return None;
        }
        if let Some(budget) = &self.budget
            && !budget.withdraw()
        {
            return None;
        }
        self.left -= 1;
        Some(self.backoff.next_backoff())
    }

    fn clone_request(&mut self, request: &Request<B>) -> Option<Request<B>> {
        (self.clone)(request)
    }
}

fn tower_backoff(min: Duration, max: Duration) -> ExponentialBackoff {
    ExponentialBackoffMaker::new(min, max, 0.5, HasherRng::default())
        .expect("a valid backoff")
        .make_backoff()
}

fn tower_retry(budget: Option<Arc<TpsBudget>>) -> Caller {
    let full: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let streaming: Client<HttpConnector, Dyn> = Client::builder(TokioExecutor::new()).build_http();
    let backoff = tower_backoff(Duration::from_millis(10), Duration::from_secs(10));
    Box::new(move |method, url, payload| {
        let started = Instant::now();
        let request = Request::builder().method(method).uri(url);
        match payload {
            Payload::Stream(_) => {
                let policy = TowerPolicy::<Dyn> {
                    left: 3,
                    first: true,
                    backoff: backoff.clone(),
                    budget: budget.clone(),
                    clone: |_| None,
                };
                let service = tower::ServiceBuilder::new()
                    .retry(policy)
                    .service(streaming.clone());
                let request = request.body(dyn_body(payload)).expect("a request");
                Box::pin(async move { answer_of(started, service.oneshot(request).await).await })
            }
            Payload::Empty | Payload::Text(_) => {
                let policy = TowerPolicy::<Full<Bytes>> {
                    left: 3,
                    first: true,
                    backoff: backoff.clone(),
                    budget: budget.clone(),
                    clone: |r| Some(r.clone()),
                };
                let service = tower::ServiceBuilder::new()
                    .retry(policy)
                    .service(full.clone());
                let text = match payload {
                    Payload::Text(text) => text,
                    _ => "",
                };
                let request = request
                    .body(Full::new(Bytes::from_static(text.as_bytes())))
                    .expect("a request");
                Box::pin(async move { answer_of(started, service.oneshot(request).await).await })
            }
        }
    })
}

#[cfg(feature = "tower-resilience")]
/// tower-resilience's `RetryLayer`: three retries, exponential backoff from 10 ms, errors and
/// 5xx/429 retried. Its requests must be `Clone`, so a stream body does not compile; that
/// scenario is answered from its bounds.
fn tower_resilience() -> Caller {
    type Req = Request<Full<Bytes>>;
    type Error = Arc<hyper_util::client::legacy::Error>;
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let layer = tower_resilience_retry::RetryLayer::<Req, Response<Incoming>, Error>::builder()
        .max_attempts(4)
        .exponential_backoff(Duration::from_millis(10))
        .retry_on(|_: &Error| true)
        .retry_on_response(|r: &Response<Incoming>| {
            r.status().is_server_error() || r.status() == 429
        })
        .build();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service_fn(move |r: Req| {
            let client = client.clone();
            async move { client.request(r).await.map_err(Arc::new) }
        });
    Box::new(move |method, url, payload| {
        let started = Instant::now();
        let text = match payload {
            Payload::Stream(_) => {
                return Box::pin(async move {
                    Outcome {
                        answer: "does not compile: `Req: Clone`".into(),
                        elapsed: started.elapsed(),
                    }
                });
            }
            Payload::Text(text) => text,
            Payload::Empty => "",
        };
        let request = Request::builder()
            .method(method)
            .uri(url)
            .body(Full::new(Bytes::from_static(text.as_bytes())))
            .expect("a request");
        let service = service.clone();
        Box::pin(async move { answer_of(started, service.oneshot(request).await).await })
    })
}

fn reqwest_body(payload: Payload) -> reqwest::Body {
    match payload {
        Payload::Empty => reqwest::Body::from(""),
        Payload::Text(text) => reqwest::Body::from(text),
        Payload::Stream(_) => reqwest::Body::wrap(dyn_body(payload)),
    }
}

fn middleware_caller(client: reqwest_middleware::ClientWithMiddleware) -> Caller {
    Box::new(move |method, url, payload| {
        let client = client.clone();
        Box::pin(async move {
            let started = Instant::now();
            let outcome = client
                .request(method, url)
                .body(reqwest_body(payload))
                .send()
                .await;
            let answer = match outcome {
                Ok(response) => {
                    let status = response.status().as_u16();
                    match response.bytes().await {
                        Ok(_) => status.to_string(),
                        Err(_) => format!("{status}, body cut off"),
                    }
                }
                Err(error) => format!("error: {}", first_line(&error)),
            };
            Outcome {
                answer,
                elapsed: started.elapsed(),
            }
        })
    })
}

fn first_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text.chars().take(90).collect()
}

fn ours_middleware(config: HttpRetry) -> Caller {
    middleware_caller(
        reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(RetryMiddleware::new(config))
            .build(),
    )
}

fn reqwest_retry() -> Caller {
    use reqwest_retry::RetryTransientMiddleware;
    use reqwest_retry::policies::ExponentialBackoff;
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(10), Duration::from_secs(10))
        .build_with_max_retries(3);
    middleware_caller(
        reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(RetryTransientMiddleware::new_with_policy(policy))
            .build(),
    )
}

// ---------------------------------------------------------------- the scenarios

struct Scenario {
    name: &'static str,
    answers: &'static [&'static str],
    method: Method,
    payload: Payload,
    /// Requests sent in a row (more than one for the budget).
    requests: u32,
}

const SCENARIOS: [Scenario; 6] = [
    Scenario {
        name: "503 with `Retry-After: 1`, then 200 (GET; backoff from 10 ms)",
        answers: &[BUSY_1S, PAID],
        method: Method::GET,
        payload: Payload::Empty,
        requests: 1,
    },
    Scenario {
        name: "connection closed before the answer, then 200 (GET)",
        answers: &[CLOSE, PAID],
        method: Method::GET,
        payload: Payload::Empty,
        requests: 1,
    },
    Scenario {
        name: "POST without an `Idempotency-Key`: 503, then 200",
        answers: &[UNAVAILABLE, PAID],
        method: Method::POST,
        payload: Payload::Text("amount=100"),
        requests: 1,
    },
    Scenario {
        name: "PUT with a stream body (unknown length): 503, then 200",
        answers: &[UNAVAILABLE, PAID],
        method: Method::PUT,
        payload: Payload::Stream(&["chunk one, ", "chunk two"]),
        requests: 1,
    },
    Scenario {
        name: "body cut off mid-message (200, 4 of 100 bytes), then 200",
        answers: &[CUT, PAID],
        method: Method::GET,
        payload: Payload::Empty,
        requests: 1,
    },
    Scenario {
        name: "budget: 20 GETs against a server that answers 503 to all, budget 10 % of requests, no reserve",
        answers: &[UNAVAILABLE],
        method: Method::GET,
        payload: Payload::Empty,
        requests: 20,
    },
];

/// Runs `scenario` with the caller `make` builds (a fresh one per scenario, so that budgets
/// start empty) and describes what happened.
async fn run(scenario: &Scenario, caller: &Caller) -> String {
    let (url, log) = scripted(scenario.answers).await;
    let mut last = None;
    for _ in 0..scenario.requests {
        last = Some(caller(scenario.method.clone(), url.clone(), scenario.payload).await);
    }
    let Some(last) = last else {
        return String::new();
    };
    if last.answer.starts_with("does not compile") {
        return last.answer;
    }
    let received = log.lock().expect("the log").clone();
    let sent = received.len();
    if scenario.requests > 1 {
        return format!(
            "{sent} requests sent for {} ({} retries)",
            scenario.requests,
            sent as u32 - scenario.requests
        );
    }
    let whole = match scenario.payload {
        Payload::Stream(chunks) => {
            let expected: Vec<u8> = chunks.concat().into_bytes();
            let whole = received.iter().filter(|r| r.body == expected).count();
            format!(" ({whole} of {sent} with the whole body)")
        }
        _ => String::new(),
    };
    format!(
        "sent {sent}×{whole}; caller got {} after {} ms",
        last.answer,
        last.elapsed.as_millis() / 10 * 10
    )
}

// ---------------------------------------------------------------- the jitter cap

/// The longest of the first three pauses over 10,000 draws, cap 2 s, start 1 s, doubling.
fn jitter_caps() -> [String; 4] {
    const RUNS: u32 = 10_000;
    let (s, cap) = (Duration::from_secs(1), Duration::from_secs(2));
    let ours = Policy::new().base(s).max_delay(cap);
    let ours_max = (0..RUNS)
        .flat_map(|_| {
            let mut previous = Duration::ZERO;
            (1..=3)
                .map(|n| {
                    previous = ours.delay(n, previous);
                    previous
                })
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let tower_max = runtime.block_on(async {
        let mut longest = Duration::ZERO;
        for _ in 0..RUNS {
            let mut backoff = tower_backoff(s, cap);
            for _ in 0..3 {
                let sleep = backoff.next_backoff();
                longest = longest.max(sleep.deadline() - tokio::time::Instant::now());
            }
        }
        longest
    });
    #[cfg(feature = "tower-resilience")]
    let resilience_max = {
        use tower_resilience_retry::IntervalFunction;
        let resilience = tower_resilience_retry::ExponentialRandomBackoff::new(s, 0.5)
            .expect("a valid backoff")
            .max_interval(cap);
        (0..RUNS)
            .flat_map(|_| {
                (0..3)
                    .map(|n| resilience.next_interval(n))
                    .collect::<Vec<_>>()
            })
            .max()
            .unwrap_or_default()
    };
    use reqwest_retry::RetryPolicy;
    let reqwest_max = (0..RUNS)
        .flat_map(|_| {
            let policy = reqwest_retry::policies::ExponentialBackoff::builder()
                .retry_bounds(s, cap)
                .build_with_max_retries(3);
            let start = std::time::SystemTime::now();
            (0..3)
                .filter_map(|n| match policy.should_retry(start, n) {
                    reqwest_retry::RetryDecision::Retry { execute_after } => execute_after
                        .duration_since(std::time::SystemTime::now())
                        .ok(),
                    reqwest_retry::RetryDecision::DoNotRetry => None,
                })
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or_default();
    let show = |name: &str, d: Duration| {
        let within = if d <= cap { "within" } else { "over" };
        format!("{name}: longest {} ms ({within} the cap)", d.as_millis())
    };
    [
        show("`max_delay(2s)`, default jitter", ours_max),
        show("`ExponentialBackoffMaker::new(1s, 2s, 0.5)`", tower_max),
        #[cfg(feature = "tower-resilience")]
        show(
            "`ExponentialRandomBackoff::new(1s, 0.5).max_interval(2s)`",
            resilience_max,
        ),
        #[cfg(not(feature = "tower-resilience"))]
        NOT_BUILT.to_string(),
        show("`retry_bounds(1s, 2s)`, default jitter", reqwest_max),
    ]
}

// ---------------------------------------------------------------- the tables

/// The tower-resilience column without its feature.
#[cfg(not(feature = "tower-resilience"))]
const NOT_BUILT: &str = "not built: `--features tower-resilience`";

fn main() {
    let [ours_cap, tower_cap, resilience_cap, reqwest_cap] = jitter_caps();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!("| scenario | retry-runtime `RetryLayer` | tower 0.5.3 `retry` | tower-resilience-retry 0.14.0 |");
        println!("|---|---|---|---|");
        for scenario in &SCENARIOS {
            let budgeted = scenario.requests > 1;
            let ours_config = HttpRetry::new(policy());
            let ours_config = if budgeted {
                ours_config.budget(Arc::new(RetryBudget::new().ratio(0.1).min_per_second(0)))
            } else {
                ours_config
            };
            let ours = run(scenario, &ours_layer(ours_config)).await;
            let tower_budget = budgeted
                .then(|| Arc::new(TpsBudget::new(Duration::from_secs(10), 0, 0.1)));
            let tower = run(scenario, &tower_retry(tower_budget)).await;
            #[cfg(not(feature = "tower-resilience"))]
            let resilience = NOT_BUILT;
            #[cfg(feature = "tower-resilience")]
            let resilience = if budgeted {
                "budget API (`TokenBucketBudget`, `AimdBudget`: tokens per second), no ratio to requests; not run".to_string()
            } else {
                run(scenario, &tower_resilience()).await
            };
            println!("| {} | {ours} | {tower} | {resilience} |", scenario.name);
        }
        println!("| jitter cap: start 1 s, doubling, cap 2 s, 3 pauses × 10,000 | {ours_cap} | {tower_cap} | {resilience_cap} |");
        println!();
        println!("| scenario | retry-runtime `RetryMiddleware` | reqwest-retry 0.9.1 |");
        println!("|---|---|---|");
        for scenario in &SCENARIOS {
            let budgeted = scenario.requests > 1;
            let ours_config = HttpRetry::new(policy());
            let ours_config = if budgeted {
                ours_config.budget(Arc::new(RetryBudget::new().ratio(0.1).min_per_second(0)))
            } else {
                ours_config
            };
            let ours = run(scenario, &ours_middleware(ours_config)).await;
            let peer = if budgeted {
                format!("no budget: {}", run(scenario, &reqwest_retry()).await)
            } else {
                run(scenario, &reqwest_retry()).await
            };
            println!("| {} | {ours} | {peer} |", scenario.name);
        }
        println!("| jitter cap: start 1 s, doubling, cap 2 s, 3 pauses × 10,000 | {ours_cap} | {reqwest_cap} |");
    });
}
