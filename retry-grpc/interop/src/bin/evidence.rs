//! Prints the rows of `bench/RESULTS.md` §10: each scenario run by grpcio's client and by the
//! door (`retry_grpc::channel::GrpcRetryLayer` over a tonic `Channel`, reading the same JSON
//! config), each against its own scripted tonic server process, with more calls than the tests
//! make, so that the pauses are ranges over many samples. Two rows per scenario, one per client.
//!
//!     cargo build -p retry-grpc-interop --bins && cargo run -p retry-grpc-interop --bin evidence [-- CALLS]
//!
//! (`cargo run` builds only the binary it runs; the first command builds the server beside it.)
//!
//! Needs Python with grpcio 1.85.x and grpcio-tools (`.ci/grpcio.sh install`), found as the tests
//! find it (`harness::python`).

use retry_grpc::{
    HedgingPolicy, MethodConfig, MethodName, RetryPolicy, RetryThrottling, ServiceConfig,
};
use retry_grpc_interop::harness::{
    self, ClientReport, ClientRun, ServerProcess, closed_port, of_call, pauses_ms,
    previous_attempts,
};
use retry_grpc_interop::server::AttemptRecord;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::Code;

const SERVICE: &str = "retry.interop.Scripted";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn retry(max_attempts: u32, initial: Duration, max: Duration, codes: &[Code]) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .max_attempts_limit(u32::MAX)
        .initial_backoff(initial)
        .max_backoff(max)
        .backoff_multiplier(2.0)
        .retryable_status_codes(codes.iter().copied())
        .build()
        .expect("valid")
}

fn config(policy: RetryPolicy, throttling: Option<RetryThrottling>) -> Value {
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(policy)
        .build()
        .expect("valid");
    let mut config = ServiceConfig::builder().method_config(method);
    if let Some(throttling) = throttling {
        config = config.retry_throttling(throttling);
    }
    config.build().expect("valid").to_json()
}

/// Who makes the calls.
#[derive(Clone, Copy, PartialEq)]
enum Client {
    Grpcio,
    Door,
}

impl Client {
    fn label(self) -> &'static str {
        match self {
            Client::Grpcio => "grpcio",
            Client::Door => "door",
        }
    }
}

const CLIENTS: [Client; 2] = [Client::Grpcio, Client::Door];

struct Runner {
    python: PathBuf,
    /// One server per client, so that their (scenario, call) counts never mix.
    grpcio_server: ServerProcess,
    door_server: ServerProcess,
    runtime: tokio::runtime::Runtime,
}

impl Runner {
    fn run(&self, client: Client, run: ClientRun) -> (ClientReport, Vec<AttemptRecord>) {
        let server = match client {
            Client::Grpcio => &self.grpcio_server,
            Client::Door => &self.door_server,
        };
        let report = self.run_at(client, &run, server.address());
        let attempts = server.attempts_of(&run.scenario);
        (report, attempts)
    }

    fn run_at(&self, client: Client, run: &ClientRun, target: &str) -> ClientReport {
        match client {
            Client::Grpcio => run
                .run(&self.python, target)
                .expect("the client driver ran"),
            Client::Door => {
                self.runtime
                    .block_on(harness::run_door(run, target))
                    .expect("the door ran")
                    .0
            }
        }
    }
}

fn range(values: &[f64]) -> String {
    if values.is_empty() {
        return "—".into();
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.0}–{max:.0}")
}

fn codes(report: &ClientReport) -> String {
    let mut codes: Vec<&str> = report.calls.iter().map(|c| c.code.as_str()).collect();
    codes.dedup();
    codes.join(", ")
}

fn header_list(attempts: &[AttemptRecord]) -> String {
    previous_attempts(attempts)
        .iter()
        .map(|h| h.as_deref().unwrap_or("—").to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Pause `i` of every call, as a range.
fn pause_ranges(attempts: &[AttemptRecord], calls: u32) -> Vec<String> {
    let per_call: Vec<Vec<f64>> = (0..calls)
        .map(|call| pauses_ms(&of_call(attempts, call)))
        .collect();
    let longest = per_call.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .map(|i| {
            range(
                &per_call
                    .iter()
                    .filter_map(|p| p.get(i).copied())
                    .collect::<Vec<_>>(),
            )
        })
        .collect()
}

fn attempts_per_call(attempts: &[AttemptRecord], calls: u32) -> String {
    let mut counts: Vec<usize> = (0..calls)
        .map(|call| of_call(attempts, call).len())
        .collect();
    counts.dedup();
    counts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() {
    let calls: u32 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(20);
    let (python, version) = match harness::python() {
        Ok(found) => found,
        Err(reason) => {
            eprintln!("{reason}");
            std::process::exit(1);
        }
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("scripted-server")));
    let binary = binary.filter(|path| path.exists()).unwrap_or_else(|| {
        eprintln!(
            "build the server first: cargo build -p retry-grpc-interop --bin scripted-server"
        );
        std::process::exit(1);
    });
    let runner = Runner {
        python: python.clone(),
        grpcio_server: ServerProcess::tonic(Path::new(&binary)).expect("the server starts"),
        door_server: ServerProcess::tonic(Path::new(&binary)).expect("the server starts"),
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime"),
    };
    let unavailable = &[Code::Unavailable, Code::ResourceExhausted];
    println!("grpcio {version}; {calls} calls where a row says N\n");
    println!(
        "| scenario | service config | client | attempts per call | pauses (ms) | `grpc-previous-rpc-attempts` | status, messages delivered |"
    );
    println!("|---|---|---|---|---|---|---|");

    let policy = retry(5, ms(100), ms(1000), unavailable);
    for client in CLIENTS {
        let (report, attempts) = runner.run(
            client,
            ClientRun::unary("unavailable_then_ok:3", config(policy.clone(), None)).calls(calls),
        );
        let pauses = pause_ranges(&attempts, calls);
        let below: usize = (0..calls)
            .map(|call| {
                pauses_ms(&of_call(&attempts, call))
                    .iter()
                    .enumerate()
                    .filter(|(i, pause)| **pause < 0.8 * 100.0 * 2f64.powi(*i as i32))
                    .count()
            })
            .sum();
        println!(
            "| UNAVAILABLE ×3, then OK (unary, N calls) | retry 5, 0.1s–1s ×2 | {} | {} | {} ({} of {} below 0.8×nominal) | {} | {} |",
            client.label(),
            attempts_per_call(&attempts, calls),
            pauses.join(" / "),
            below,
            3 * calls,
            header_list(&of_call(&attempts, 0)),
            codes(&report)
        );
    }

    let pushback_calls = calls.min(10);
    let policy = retry(4, ms(100), ms(200), unavailable);
    for client in CLIENTS {
        let (report, attempts) = runner.run(
            client,
            ClientRun::unary("pushback:250", config(policy.clone(), None)).calls(pushback_calls),
        );
        println!(
            "| RESOURCE_EXHAUSTED + pushback 250 ms, UNAVAILABLE, OK (N = {pushback_calls}) | retry 4, 0.1s–0.2s ×2 | {} | {} | {} (pushback, then the backoff from initialBackoff) | {} | {} |",
            client.label(),
            attempts_per_call(&attempts, pushback_calls),
            pause_ranges(&attempts, pushback_calls).join(" / "),
            header_list(&of_call(&attempts, 0)),
            codes(&report)
        );
    }

    let short = retry(4, ms(10), ms(10), unavailable);
    for (scenario, label) in [
        ("pushback_stop", "RESOURCE_EXHAUSTED + pushback −1"),
        ("internal", "INTERNAL (not in the list)"),
    ] {
        for client in CLIENTS {
            let (report, attempts) = runner.run(
                client,
                ClientRun::unary(scenario, config(short.clone(), None)),
            );
            println!(
                "| {label} | retry 4, codes UNAVAILABLE, RESOURCE_EXHAUSTED | {} | {} | — | {} | {} |",
                client.label(),
                attempts.len(),
                header_list(&attempts),
                codes(&report)
            );
        }
    }

    for client in CLIENTS {
        let mut capped = config(retry(9, ms(10), ms(10), unavailable), None);
        capped["methodConfig"][0]["retryPolicy"]["maxAttempts"] = 9.into();
        let (report, attempts) =
            runner.run(client, ClientRun::unary("always_unavailable:9", capped));
        println!(
            "| UNAVAILABLE always | retry **9** | {} | {} (capped at 5) | — | {} | {} |",
            client.label(),
            attempts.len(),
            header_list(&attempts),
            codes(&report)
        );
    }

    let throttling = RetryThrottling::new(10, 0.1).expect("valid");
    for client in CLIENTS {
        let (report, attempts) = runner.run(
            client,
            ClientRun::unary(
                "always_unavailable",
                config(retry(4, ms(5), ms(5), unavailable), Some(throttling)),
            )
            .calls(20),
        );
        println!(
            "| UNAVAILABLE always, 20 calls | retry 4 + `retryThrottling` 10, 0.1 | {} | {} in all: {} | — | call 1: {} | {} |",
            client.label(),
            attempts.len(),
            (0..20)
                .map(|c| of_call(&attempts, c).len().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            header_list(&of_call(&attempts, 0)),
            codes(&report)
        );
    }

    for (scenario, label) in [
        (
            "stream_fails_after:2",
            "server stream: 2 messages, then UNAVAILABLE",
        ),
        (
            "stream_headers_then_error",
            "server stream: headers, then UNAVAILABLE",
        ),
        (
            "stream_unavailable_then_ok:1",
            "server stream: UNAVAILABLE (trailers-only), then 3 messages",
        ),
    ] {
        for client in CLIENTS {
            let (report, attempts) = runner.run(
                client,
                ClientRun::unary(scenario, config(short.clone(), None)).method("server_stream"),
            );
            let delivered: Vec<String> = report.calls[0]
                .replies
                .iter()
                .map(|r| format!("{}.{}", r.attempt, r.index))
                .collect();
            println!(
                "| {label} | retry 4 | {} | {} | — | {} | {}; delivered (attempt.index) {} |",
                client.label(),
                attempts.len(),
                header_list(&attempts),
                codes(&report),
                if delivered.is_empty() {
                    "none".to_owned()
                } else {
                    delivered.join(", ")
                }
            );
        }
    }

    for client in CLIENTS {
        let (report, attempts) = runner.run(
            client,
            ClientRun::unary("unavailable_then_ok:2", config(short.clone(), None))
                .method("client_stream"),
        );
        println!(
            "| client stream of 3: UNAVAILABLE ×2, then OK | retry 4 | {} | {} (requests received: {}) | — | {} | {} |",
            client.label(),
            attempts.len(),
            attempts
                .iter()
                .map(|a| a.received.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            header_list(&attempts),
            codes(&report)
        );
    }

    let target = format!("127.0.0.1:{}", closed_port().expect("a port"));
    let closed_calls = calls.min(5);
    for client in CLIENTS {
        let run = ClientRun::unary("ok", config(retry(4, ms(100), ms(1000), unavailable), None))
            .calls(closed_calls);
        let report = runner.run_at(client, &run, &target);
        let elapsed: Vec<f64> = report.calls.iter().map(|c| c.elapsed_ms).collect();
        println!(
            "| closed port (N = {closed_calls}) | retry 4, 0.1s–1s ×2 | {} | (no server) | call ends after {} ms | — | {} |",
            client.label(),
            range(&elapsed),
            codes(&report)
        );
    }
    for client in CLIENTS {
        let run = ClientRun::unary("ok", json!({})).calls(closed_calls);
        let report = runner.run_at(client, &run, &target);
        let elapsed: Vec<f64> = report.calls.iter().map(|c| c.elapsed_ms).collect();
        println!(
            "| closed port (N = {closed_calls}) | none | {} | (no server) | call ends after {} ms | — | {} |",
            client.label(),
            range(&elapsed),
            codes(&report)
        );
    }
    for client in CLIENTS {
        let run = ClientRun::unary("ok", json!({}))
            .timeout(ms(300))
            .wait_for_ready();
        let report = runner.run_at(client, &run, &target);
        println!(
            "| closed port, `waitForReady`, deadline 300 ms | none | {} | (no server) | call ends after {:.0} ms | — | {} |",
            client.label(),
            report.calls[0].elapsed_ms,
            codes(&report)
        );
    }

    let hedging = HedgingPolicy::builder()
        .max_attempts(3)
        .hedging_delay(ms(50))
        .non_fatal_status_codes([Code::Unavailable])
        .build()
        .expect("valid");
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .hedging_policy(hedging)
        .build()
        .expect("valid");
    let hedged = ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("valid")
        .to_json();
    for client in CLIENTS {
        let (report, attempts) =
            runner.run(client, ClientRun::unary("slow_first:300", hedged.clone()));
        println!(
            "| first attempt answers after 300 ms | hedging 3, 50 ms | {} | {} | call took {:.0} ms (arrivals {}) | {} | {}; answered by attempt {} |",
            client.label(),
            attempts.len(),
            report.calls[0].elapsed_ms,
            attempts
                .iter()
                .map(|a| format!("{:.0}", a.at_ms - attempts[0].at_ms))
                .collect::<Vec<_>>()
                .join(", "),
            header_list(&attempts),
            codes(&report),
            report.calls[0]
                .replies
                .first()
                .map_or("—".to_owned(), |r| r.attempt.to_string())
        );
    }
}
