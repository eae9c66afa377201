//! The scripted tonic server: per scenario it answers as the script says, and reports every
//! attempt it sees (its arrival time, its `grpc-previous-rpc-attempts`, its user agent).
//!
//! A request names its scenario as `name` or `name:param` and its call number; the server
//! counts the attempts of each (scenario, call), so that attempt `n` of a call gets the `n`-th
//! answer of the script:
//!
//! | scenario | method | attempt `n` gets |
//! |---|---|---|
//! | `unavailable_then_ok:k` | unary, client stream | `UNAVAILABLE` (trailers-only) while `n ≤ k`, then `OK` |
//! | `pushback:ms` | unary | 1: `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms: ms`; 2: `UNAVAILABLE`; then `OK` |
//! | `pushback_stop` | unary | `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms: -1` |
//! | `internal` | unary | `INTERNAL` |
//! | `always_unavailable` | unary | `UNAVAILABLE` |
//! | `ok` | unary | `OK` |
//! | `slow_first:ms` | unary | 1: `OK` after `ms` milliseconds; then `OK` at once |
//! | `slow:ms` | unary | `OK` after `ms` milliseconds |
//! | `later_copy_fails` | client stream | 1: every message read, then `OK`; later attempts: `UNAVAILABLE` (trailers-only) on their first message |
//! | `stream_fails_after:k` | server stream | `k` messages, then `UNAVAILABLE` in the trailers |
//! | `stream_unavailable_then_ok:k` | server stream | `UNAVAILABLE` (trailers-only) while `n ≤ k`, then 3 messages and `OK` |
//! | `stream_headers_then_error` | server stream | headers, then `UNAVAILABLE` in the trailers, no message |
//!
//! Every status carries `x-server-attempt: n` in its trailers, every reply `attempt = n`.

use crate::proto::scripted_server::{Scripted, ScriptedServer};
use crate::proto::{Reply, Request};
use futures_util::stream::{self, BoxStream, StreamExt};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Response, Status};

/// One attempt the server saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// `Unary`, `ClientStream` or `ServerStream`.
    pub method: String,
    /// The scenario as the request named it (`pushback:250`).
    pub scenario: String,
    /// The call number the client gave.
    pub call: u32,
    /// The attempt's number for this (scenario, call), from 1.
    pub attempt: u32,
    /// Arrival, in milliseconds since the server started.
    pub at_ms: f64,
    /// The `grpc-previous-rpc-attempts` header, as sent.
    pub previous_rpc_attempts: Option<String>,
    /// The `user-agent` header.
    pub user_agent: Option<String>,
    /// Request messages received (client stream), else 1.
    pub received: u32,
}

type Sink = Box<dyn Fn(&AttemptRecord) + Send + Sync>;

struct State {
    start: Instant,
    attempts: Mutex<HashMap<(String, u32), u32>>,
    sink: Sink,
}

/// The service; [`serve`] runs it.
#[derive(Clone)]
pub struct ScriptedService {
    state: Arc<State>,
}

impl ScriptedService {
    /// A service that hands every attempt to `sink`.
    pub fn new(sink: impl Fn(&AttemptRecord) + Send + Sync + 'static) -> Self {
        ScriptedService {
            state: Arc::new(State {
                start: Instant::now(),
                attempts: Mutex::new(HashMap::new()),
                sink: Box::new(sink),
            }),
        }
    }

    fn record(
        &self,
        method: &str,
        metadata: &MetadataMap,
        scenario: &str,
        call: u32,
        received: u32,
    ) -> u32 {
        let attempt = {
            let mut attempts = self
                .state
                .attempts
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let n = attempts.entry((scenario.to_owned(), call)).or_insert(0);
            *n += 1;
            *n
        };
        let header = |name: &str| {
            metadata
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let record = AttemptRecord {
            method: method.to_owned(),
            scenario: scenario.to_owned(),
            call,
            attempt,
            at_ms: self.state.start.elapsed().as_secs_f64() * 1000.0,
            previous_rpc_attempts: header("grpc-previous-rpc-attempts"),
            user_agent: header("user-agent"),
            received,
        };
        (self.state.sink)(&record);
        attempt
    }
}

/// A status with `x-server-attempt` and any other metadata.
fn status(code: tonic::Code, attempt: u32, extra: &[(&'static str, &str)]) -> Status {
    let mut status = Status::new(code, format!("scripted, attempt {attempt}"));
    status
        .metadata_mut()
        .insert("x-server-attempt", MetadataValue::from(attempt));
    for (key, value) in extra {
        if let Ok(value) = value.parse() {
            status.metadata_mut().insert(*key, value);
        }
    }
    status
}

fn split(scenario: &str) -> (&str, u64) {
    match scenario.split_once(':') {
        Some((name, param)) => (name, param.parse().unwrap_or(0)),
        None => (scenario, 0),
    }
}

fn reply(attempt: u32, index: u32, received: u32) -> Reply {
    Reply {
        attempt,
        index,
        received,
    }
}

fn ok(attempt: u32, received: u32) -> Result<Response<Reply>, Status> {
    let mut response = Response::new(reply(attempt, 0, received));
    response
        .metadata_mut()
        .insert("x-server-attempt", MetadataValue::from(attempt));
    Ok(response)
}

/// The answer of a unary or client-streaming attempt.
async fn answer(scenario: &str, attempt: u32, received: u32) -> Result<Response<Reply>, Status> {
    use tonic::Code;
    let (name, param) = split(scenario);
    match name {
        "unavailable_then_ok" if u64::from(attempt) <= param => {
            Err(status(Code::Unavailable, attempt, &[]))
        }
        "unavailable_then_ok" | "ok" => ok(attempt, received),
        "pushback" => match attempt {
            1 => Err(status(
                Code::ResourceExhausted,
                attempt,
                &[("grpc-retry-pushback-ms", &param.to_string())],
            )),
            2 => Err(status(Code::Unavailable, attempt, &[])),
            _ => ok(attempt, received),
        },
        "pushback_stop" => Err(status(
            Code::ResourceExhausted,
            attempt,
            &[("grpc-retry-pushback-ms", "-1")],
        )),
        "internal" => Err(status(Code::Internal, attempt, &[])),
        "always_unavailable" => Err(status(Code::Unavailable, attempt, &[])),
        "slow_first" => {
            if attempt == 1 {
                tokio::time::sleep(Duration::from_millis(param)).await;
            }
            ok(attempt, received)
        }
        "slow" => {
            tokio::time::sleep(Duration::from_millis(param)).await;
            ok(attempt, received)
        }
        "later_copy_fails" => ok(attempt, received),
        _ => Err(Status::invalid_argument(format!(
            "unknown scenario {scenario:?} for this method"
        ))),
    }
}

#[tonic::async_trait]
impl Scripted for ScriptedService {
    async fn unary(&self, request: tonic::Request<Request>) -> Result<Response<Reply>, Status> {
        let (metadata, _, message) = request.into_parts();
        let attempt = self.record("Unary", &metadata, &message.scenario, message.call, 1);
        answer(&message.scenario, attempt, 1).await
    }

    async fn client_stream(
        &self,
        request: tonic::Request<tonic::Streaming<Request>>,
    ) -> Result<Response<Reply>, Status> {
        let (metadata, _, mut messages) = request.into_parts();
        let first = messages.message().await?;
        let mut received = u32::from(first.is_some());
        let first = first.unwrap_or_default();
        let early = split(&first.scenario).0 == "later_copy_fails";
        // `later_copy_fails` counts an attempt at its first message, and fails a later one there
        // (while the client is still sending).
        let mut attempt = None;
        if early {
            let n = self.record("ClientStream", &metadata, &first.scenario, first.call, 1);
            if n > 1 {
                return Err(status(tonic::Code::Unavailable, n, &[]));
            }
            attempt = Some(n);
        }
        while messages.message().await?.is_some() {
            received += 1;
        }
        let attempt = attempt.unwrap_or_else(|| {
            self.record(
                "ClientStream",
                &metadata,
                &first.scenario,
                first.call,
                received,
            )
        });
        answer(&first.scenario, attempt, received).await
    }

    type ServerStreamStream = BoxStream<'static, Result<Reply, Status>>;

    async fn server_stream(
        &self,
        request: tonic::Request<Request>,
    ) -> Result<Response<Self::ServerStreamStream>, Status> {
        use tonic::Code;
        let (metadata, _, message) = request.into_parts();
        let attempt = self.record(
            "ServerStream",
            &metadata,
            &message.scenario,
            message.call,
            1,
        );
        let (name, param) = split(&message.scenario);
        let items: Vec<Result<Reply, Status>> = match name {
            "stream_fails_after" => (0..param as u32)
                .map(|i| Ok(reply(attempt, i, 1)))
                .chain([Err(status(Code::Unavailable, attempt, &[]))])
                .collect(),
            "stream_unavailable_then_ok" if u64::from(attempt) <= param => {
                return Err(status(Code::Unavailable, attempt, &[]));
            }
            "stream_unavailable_then_ok" => (0..3).map(|i| Ok(reply(attempt, i, 1))).collect(),
            "stream_headers_then_error" => vec![Err(status(Code::Unavailable, attempt, &[]))],
            _ => {
                return Err(Status::invalid_argument(format!(
                    "unknown scenario {:?} for this method",
                    message.scenario
                )));
            }
        };
        Ok(Response::new(stream::iter(items).boxed()))
    }
}

/// Serves `service` on `listener` until the process ends.
pub async fn serve(
    service: ScriptedService,
    listener: tokio::net::TcpListener,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tonic::transport::Server::builder()
        .add_service(ScriptedServer::new(service))
        .serve_with_incoming(incoming)
        .await
}

/// [`serve`], closing each connection gracefully once it is `max_connection_age` old: a
/// `GOAWAY`, the streams it covers answered, then the connection closed, as a gRPC server's
/// `max_connection_age` does. tonic's own `Server::max_connection_age` panics in the task of
/// the connection right after its `GOAWAY` (tonic 0.14.5, hyperium/tonic#2522), which resets
/// the streams in flight; so the service is served here by hyper's HTTP/2 server, as tonic's
/// server serves it, with the `GOAWAY` sent by `graceful_shutdown`.
pub async fn serve_aging(
    service: ScriptedService,
    listener: tokio::net::TcpListener,
    max_connection_age: Duration,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;

    let service = ScriptedServer::new(service);
    loop {
        let (socket, _) = listener.accept().await?;
        socket.set_nodelay(true)?;
        let service = TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                () = tokio::time::sleep(max_connection_age) => {}
            }
            connection.as_mut().graceful_shutdown();
            // The client may drop the connection first: nothing to report.
            let _ = connection.await;
        });
    }
}

/// Binds a free loopback port.
pub async fn bind() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
