//! HTTP/2 requests that the server provably never processed (issue 18), through the tower layer
//! over hyper's HTTP/2 client and through the reqwest middleware over reqwest with HTTP/2 prior
//! knowledge: a stream the server refused (RST_STREAM with REFUSED_STREAM, RFC 9113 §8.7) and a
//! stream above the last stream id of a GOAWAY (§6.8) are resent even without an
//! `Idempotency-Key`, once, and counted and reported as never sent; a stream reset with
//! INTERNAL_ERROR after the server read it, and a stream that a GOAWAY covers, are not resent.
//!
//! The server is real and on loopback: h2's server, and for the GOAWAYs a few frames written by
//! hand (h2's server names the last stream it accepted in its GOAWAY, so it cannot send one
//! below a stream it has read). What it saw is counted: connections, streams that arrived, and
//! the bodies of the requests its handler processed.

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use retry_http::reqwest::RetryMiddleware;
use retry_http::tower::RetryLayer;
use retry_http::{BoxError, Counters, HttpRetry, ReplayBody, Resend};
use retry_runtime::{Jitter, Policy, testing};
use std::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tower::{ServiceBuilder, ServiceExt};

const S: Duration = Duration::from_secs(1);
const BODY: &str = "amount=100&to=4711";

/// What the server does with a connection (the n-th connection gets the n-th, the last again
/// once they run out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Conn {
    /// Resets its first stream with REFUSED_STREAM before reading it; answers the others.
    RefuseFirst,
    /// Reads the first request's HEADERS and sends GOAWAY(NO_ERROR) with last stream id 0,
    /// below it.
    GoAwayBelow,
    /// The same with the reason ENHANCE_YOUR_CALM: RFC 9113 §6.8's guarantee holds whatever
    /// the reason.
    GoAwayBelowCalm,
    /// Reads each request whole (the handler saw it), then resets it with INTERNAL_ERROR.
    ResetAfterReading,
    /// Reads the first request whole, sends GOAWAY with its stream id (1) as the last, and
    /// closes the connection.
    GoAwayCovering,
    /// Reads each request whole and answers 200 "paid".
    Answer,
}

/// What the server saw.
#[derive(Debug, Default)]
struct Seen {
    connections: AtomicUsize,
    /// Streams whose HEADERS arrived, refused ones included.
    arrived: AtomicUsize,
    /// The bodies of the requests the handler read whole.
    processed: Mutex<Vec<Vec<u8>>>,
}

impl Seen {
    fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn processed(&self) -> Vec<Vec<u8>> {
        self.processed.lock().expect("the log").clone()
    }
}

async fn server(script: &'static [Conn]) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("a bound address");
    let seen = Arc::new(Seen::default());
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let n = log.connections.fetch_add(1, Ordering::SeqCst);
            let conn = script[n.min(script.len() - 1)];
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                match conn {
                    Conn::GoAwayBelow => go_away(socket, &log, 0, h2::Reason::NO_ERROR).await,
                    Conn::GoAwayBelowCalm => {
                        go_away(socket, &log, 0, h2::Reason::ENHANCE_YOUR_CALM).await
                    }
                    Conn::GoAwayCovering => go_away(socket, &log, 1, h2::Reason::NO_ERROR).await,
                    _ => serve(socket, &log, conn).await,
                }
            });
        }
    });
    (format!("http://{address}/pay"), seen)
}

/// h2's server: each stream is handled in a task of its own while `accept` drives the
/// connection.
async fn serve(socket: TcpStream, seen: &Arc<Seen>, conn: Conn) {
    let Ok(mut connection) = h2::server::handshake(socket).await else {
        return;
    };
    let mut first = true;
    while let Some(Ok((request, mut respond))) = connection.accept().await {
        seen.arrived.fetch_add(1, Ordering::SeqCst);
        if conn == Conn::RefuseFirst && std::mem::take(&mut first) {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            continue;
        }
        let seen = Arc::clone(seen);
        tokio::spawn(async move {
            let mut body = request.into_body();
            let mut data = Vec::new();
            while let Some(Ok(chunk)) = body.data().await {
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            seen.processed.lock().expect("the log").push(data);
            if conn == Conn::ResetAfterReading {
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            if let Ok(mut stream) = respond.send_response(http::Response::new(()), false) {
                let _ = stream.send_data(Bytes::from_static(b"paid"), true);
            }
        });
    }
}

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;

/// An HTTP/2 frame (RFC 9113 §4.1).
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len())
        .expect("a short payload")
        .to_be_bytes();
    let mut frame = vec![length[1], length[2], length[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The next frame: its type, flags and payload.
async fn read_frame(socket: &mut TcpStream) -> Option<(u8, u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    socket.read_exact(&mut head).await.ok()?;
    let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0; length];
    socket.read_exact(&mut payload).await.ok()?;
    Some((head[3], head[4], payload))
}

/// A server that reads the first request's HEADERS (and, when its GOAWAY will cover the
/// stream, its whole body) and answers with GOAWAY(last stream id, reason). One that covers
/// the stream then closes the connection; one below it lets the client close it.
async fn go_away(mut socket: TcpStream, seen: &Seen, last_stream_id: u32, reason: h2::Reason) {
    // The server's preface is a SETTINGS frame; the client's, 24 octets and its SETTINGS.
    let mut preface = [0u8; 24];
    if socket.write_all(&frame(SETTINGS, 0, 0, &[])).await.is_err()
        || socket.read_exact(&mut preface).await.is_err()
    {
        return;
    }
    let mut ended = loop {
        let Some((kind, flags, _)) = read_frame(&mut socket).await else {
            return;
        };
        if kind == SETTINGS && flags & ACK == 0 {
            let _ = socket.write_all(&frame(SETTINGS, ACK, 0, &[])).await;
        }
        if kind == HEADERS {
            seen.arrived.fetch_add(1, Ordering::SeqCst);
            break flags & END_STREAM != 0;
        }
    };
    let covers = last_stream_id > 0;
    if covers {
        // The request whole, as the handler of a processed request reads it (h2's client
        // sends no padding).
        let mut body = Vec::new();
        while !ended {
            let Some((kind, flags, payload)) = read_frame(&mut socket).await else {
                return;
            };
            if kind == DATA {
                body.extend_from_slice(&payload);
                ended = flags & END_STREAM != 0;
            }
        }
        seen.processed.lock().expect("the log").push(body);
    }
    let mut payload = last_stream_id.to_be_bytes().to_vec();
    payload.extend_from_slice(&u32::from(reason).to_be_bytes());
    if socket
        .write_all(&frame(GOAWAY, 0, 0, &payload))
        .await
        .is_err()
    {
        return;
    }
    if covers {
        let _ = socket.shutdown().await;
    }
    // Read until the client closes: closing with unread data would reset the connection, and
    // the client might lose the GOAWAY.
    let mut sink = [0u8; 4096];
    while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
}

fn policy() -> Policy {
    Policy::new().max(3).base(S).jitter(Jitter::None)
}

/// The retry options with a log of what `notify` heard.
fn config() -> (HttpRetry, Arc<Mutex<Vec<Resend>>>) {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let config =
        HttpRetry::new(policy()).notify(move |r: &Resend| log.lock().expect("the log").push(*r));
    (config, heard)
}

/// The h2 error in a chain: its reason, and whether it was a reset or a GOAWAY received from
/// the server.
fn h2_error(error: &(dyn Error + 'static)) -> Option<(h2::Reason, bool, bool, bool)> {
    std::iter::successors(Some(error), |&e| e.source())
        .find_map(|e| e.downcast_ref::<h2::Error>())
        .map(|h2| {
            let reason = h2.reason().unwrap_or(h2::Reason::NO_ERROR);
            (reason, h2.is_reset(), h2.is_go_away(), h2.is_remote())
        })
}

/// What a POST without a key ended with, through one of the doors.
#[derive(Debug)]
struct Outcome {
    /// The answer's status and body, or the error's `Debug`.
    result: Result<(StatusCode, String), String>,
    /// The h2 error in the error's chain.
    h2: Option<(h2::Reason, bool, bool, bool)>,
    pauses: Vec<Duration>,
    /// Attempts the client below the tower layer was asked to send (the server's count of the
    /// streams that arrived says it for reqwest, whose attempts the middleware hands on).
    attempts: Option<usize>,
    counters: Arc<Counters>,
    heard: Vec<Resend>,
}

type TestBody = BoxBody<Bytes, std::io::Error>;

/// A POST without a key through the tower layer over hyper-util's client, HTTP/2 only (prior
/// knowledge over plain TCP).
async fn through_tower(url: &str) -> Outcome {
    let (config, heard) = config();
    let retry = RetryLayer::new(config);
    let counters = retry.counters();
    let client: Client<HttpConnector, ReplayBody<TestBody>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    let service = ServiceBuilder::new().layer(retry).service_fn(
        move |request: Request<ReplayBody<TestBody>>| {
            counted.fetch_add(1, Ordering::SeqCst);
            client.request(request)
        },
    );
    let body = Full::new(Bytes::from_static(BODY.as_bytes()))
        .map_err(|never| match never {})
        .boxed();
    let request = Request::post(url).body(body).expect("a valid request");
    let (outcome, pauses) = testing::record_async(service.oneshot(request)).await;
    let (result, h2) = match outcome {
        Ok(response) => {
            let status = response.status();
            let body = response.into_body().collect().await.expect("a body");
            let text = String::from_utf8_lossy(&body.to_bytes()).to_string();
            (Ok((status, text)), None)
        }
        Err(error) => {
            let error: BoxError = error;
            (Err(format!("{error:?}")), h2_error(&*error))
        }
    };
    let heard = heard.lock().expect("the log").clone();
    Outcome {
        result,
        h2,
        pauses,
        attempts: Some(attempts.load(Ordering::SeqCst)),
        counters,
        heard,
    }
}

/// A POST without a key through the middleware over reqwest, HTTP/2 with prior knowledge.
/// `own_retries`: whether reqwest keeps its default retries of HTTP/2 refusals (below the
/// middleware); without them, every refusal reaches the middleware.
async fn through_reqwest(url: &str, own_retries: bool) -> Outcome {
    let (config, heard) = config();
    let middleware = RetryMiddleware::new(config);
    let counters = middleware.counters();
    let mut client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(Duration::from_secs(10));
    if !own_retries {
        client = client.retry(reqwest::retry::never());
    }
    let client = client.build().expect("a client without TLS builds");
    let client = reqwest_middleware::ClientBuilder::new(client)
        .with(middleware)
        .build();
    let send = client.post(url).body(BODY).send();
    let (outcome, pauses) = testing::record_async(send).await;
    let (result, h2) = match outcome {
        Ok(response) => {
            let status = response.status();
            (Ok((status, response.text().await.expect("a body"))), None)
        }
        Err(error) => (Err(format!("{error:?}")), h2_error(&error)),
    };
    let heard = heard.lock().expect("the log").clone();
    Outcome {
        result,
        h2,
        pauses,
        attempts: None,
        counters,
        heard,
    }
}

/// The request was resent once, as never sent, and the server's handler processed it once.
fn assert_resent_as_never_sent(outcome: &Outcome, seen: &Seen) {
    assert_eq!(
        outcome.result,
        Ok((StatusCode::OK, "paid".to_string())),
        "{outcome:?}"
    );
    assert!(matches!(outcome.attempts, None | Some(2)), "{outcome:?}");
    assert_eq!(outcome.pauses, [S]);
    let counters = &outcome.counters;
    assert_eq!(
        (
            counters.requests(),
            counters.retries(),
            counters.never_sent_retries(),
            counters.without_key()
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(outcome.heard.len(), 1, "{outcome:?}");
    assert!(outcome.heard[0].never_sent, "{outcome:?}");
    assert_eq!(outcome.heard[0].event.attempt, 1);
    assert_eq!(seen.arrived(), 2);
    assert_eq!(seen.processed(), [BODY.as_bytes()]);
}

/// The request was sent once, the server's handler processed it, the error came back.
fn assert_sent_once(outcome: &Outcome, seen: &Seen) {
    assert!(outcome.result.is_err(), "{outcome:?}");
    assert!(matches!(outcome.attempts, None | Some(1)), "{outcome:?}");
    assert!(outcome.pauses.is_empty());
    let counters = &outcome.counters;
    assert_eq!(
        (
            counters.retries(),
            counters.never_sent_retries(),
            counters.without_key()
        ),
        (0, 0, 1)
    );
    assert!(outcome.heard.is_empty());
    assert_eq!((seen.connections(), seen.arrived()), (1, 1));
    assert_eq!(seen.processed(), [BODY.as_bytes()]);
}

/// (reason, is_reset, is_go_away, is_remote) of a stream the server reset.
fn reset_by_server(reason: h2::Reason) -> Option<(h2::Reason, bool, bool, bool)> {
    Some((reason, true, false, true))
}

#[tokio::test]
async fn tower_resends_a_refused_stream_without_a_key() {
    let (url, seen) = server(&[Conn::RefuseFirst]).await;
    let outcome = through_tower(&url).await;
    assert_resent_as_never_sent(&outcome, &seen);
    // Both streams on the one connection.
    assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn tower_resends_a_stream_above_a_goaway_without_a_key() {
    let (url, seen) = server(&[Conn::GoAwayBelow, Conn::Answer]).await;
    let outcome = through_tower(&url).await;
    assert_resent_as_never_sent(&outcome, &seen);
    assert_eq!(seen.connections(), 2);
}

#[tokio::test]
async fn tower_resends_a_stream_above_a_goaway_with_an_error_without_a_key() {
    let (url, seen) = server(&[Conn::GoAwayBelowCalm, Conn::Answer]).await;
    let outcome = through_tower(&url).await;
    assert_resent_as_never_sent(&outcome, &seen);
    assert_eq!(seen.connections(), 2);
}

#[tokio::test]
async fn tower_does_not_resend_a_stream_reset_after_the_server_read_it() {
    let (url, seen) = server(&[Conn::ResetAfterReading, Conn::Answer]).await;
    let outcome = through_tower(&url).await;
    assert_eq!(
        outcome.h2,
        reset_by_server(h2::Reason::INTERNAL_ERROR),
        "{outcome:?}"
    );
    assert_sent_once(&outcome, &seen);
}

#[tokio::test]
async fn tower_does_not_resend_a_stream_a_goaway_covers() {
    let (url, seen) = server(&[Conn::GoAwayCovering, Conn::Answer]).await;
    let outcome = through_tower(&url).await;
    // No h2 error: the stream ends with the connection ("broken pipe").
    assert_eq!(outcome.h2, None, "{outcome:?}");
    assert_sent_once(&outcome, &seen);
}

#[tokio::test]
async fn reqwest_resends_a_refused_stream_without_a_key() {
    let (url, seen) = server(&[Conn::RefuseFirst]).await;
    let outcome = through_reqwest(&url, false).await;
    assert_resent_as_never_sent(&outcome, &seen);
    assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn reqwest_resends_a_stream_above_a_goaway_without_a_key() {
    let (url, seen) = server(&[Conn::GoAwayBelow, Conn::Answer]).await;
    let outcome = through_reqwest(&url, false).await;
    assert_resent_as_never_sent(&outcome, &seen);
    assert_eq!(seen.connections(), 2);
}

#[tokio::test]
async fn reqwest_does_not_resend_a_stream_reset_after_the_server_read_it() {
    let (url, seen) = server(&[Conn::ResetAfterReading, Conn::Answer]).await;
    let outcome = through_reqwest(&url, false).await;
    assert_eq!(
        outcome.h2,
        reset_by_server(h2::Reason::INTERNAL_ERROR),
        "{outcome:?}"
    );
    assert_sent_once(&outcome, &seen);
}

#[tokio::test]
async fn reqwest_does_not_resend_a_stream_a_goaway_covers() {
    let (url, seen) = server(&[Conn::GoAwayCovering, Conn::Answer]).await;
    let outcome = through_reqwest(&url, false).await;
    assert_eq!(outcome.h2, None, "{outcome:?}");
    assert_sent_once(&outcome, &seen);
}

/// reqwest 0.13 resends a refused stream, and one above a GOAWAY with NO_ERROR, by itself by
/// default (its "protocol NACK" retries, up to two), below the middleware: the middleware sees
/// the answer, and counts no retry.
fn assert_resent_below_the_middleware(outcome: &Outcome, seen: &Seen) {
    assert_eq!(
        outcome.result,
        Ok((StatusCode::OK, "paid".to_string())),
        "{outcome:?}"
    );
    assert_eq!(
        (
            outcome.counters.requests(),
            outcome.counters.retries(),
            outcome.counters.never_sent_retries()
        ),
        (1, 0, 0)
    );
    assert!(outcome.heard.is_empty());
    assert_eq!(seen.arrived(), 2);
    assert_eq!(seen.processed(), [BODY.as_bytes()]);
}

#[tokio::test]
async fn reqwest_by_default_resends_a_refused_stream_below_the_middleware() {
    let (url, seen) = server(&[Conn::RefuseFirst]).await;
    let outcome = through_reqwest(&url, true).await;
    assert_resent_below_the_middleware(&outcome, &seen);
    assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn reqwest_by_default_resends_a_stream_above_a_goaway_below_the_middleware() {
    let (url, seen) = server(&[Conn::GoAwayBelow, Conn::Answer]).await;
    let outcome = through_reqwest(&url, true).await;
    assert_resent_below_the_middleware(&outcome, &seen);
    assert_eq!(seen.connections(), 2);
}

/// reqwest's own retries take a GOAWAY with NO_ERROR only; the middleware resends a stream
/// above a GOAWAY with any reason.
#[tokio::test]
async fn reqwest_with_its_defaults_leaves_a_goaway_with_an_error_to_the_middleware() {
    let (url, seen) = server(&[Conn::GoAwayBelowCalm, Conn::Answer]).await;
    let outcome = through_reqwest(&url, true).await;
    assert_resent_as_never_sent(&outcome, &seen);
    assert_eq!(seen.connections(), 2);
}
