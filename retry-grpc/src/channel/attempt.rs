//! One attempt of a call: the request it sends (the headers A6 asks for, the replayed body), its
//! transparent retries (decided by [`Transparent`], carried out by the engine), and how its
//! answer reads: committed (real response headers), or failed with a status (a trailers-only
//! answer, an HTTP error, a transport error).

use super::body::RequestBody;
use super::decide::Failure;
use super::{BoxError, Counters};
use crate::{AttemptStatus, GRPC_PREVIOUS_RPC_ATTEMPTS, Pushback, TransparentRetries, Unsent};
use http::request::Parts;
use http::{HeaderValue, Request, Response, StatusCode};
use retry_runtime::engine::{self, Event};
use retry_runtime::{Jitter, Policy};
use std::error::Error;
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;
use tower_service::Service;

/// The header that carries a call's remaining deadline.
pub(crate) const GRPC_TIMEOUT: &str = "grpc-timeout";

/// How an attempt ended.
enum Outcome<RB> {
    /// Response headers that are not trailers-only: the call is committed to this answer.
    Committed(Response<RB>),
    /// A status: `answer` is what the caller gets if the call ends here.
    Failed(AttemptStatus, Failed<RB>),
}

/// What a failed attempt hands the caller if it is the last.
pub(crate) enum Failed<RB> {
    /// A trailers-only answer or an HTTP error: tonic reads its status from the headers.
    Answer(Response<RB>),
    /// The service's error.
    Error(BoxError),
}

/// What the attempts of a call share: the request's head and body, and the deadline.
pub(crate) struct Request0<'a> {
    pub(crate) parts: &'a Parts,
    pub(crate) body: &'a RequestBody,
    pub(crate) deadline: Option<Instant>,
    /// The method's `waitForReady`: a refused connection waits for the server (until the
    /// deadline) instead of failing the attempt.
    pub(crate) wait_for_ready: bool,
    pub(crate) counters: &'a Counters,
    /// The door's name in the events ([`GrpcRetryLayer::name`](super::GrpcRetryLayer::name)).
    pub(crate) name: &'static str,
}

impl Request0<'_> {
    /// Reports `event` to the logs, the metrics and the door's counters.
    pub(crate) fn report(&self, event: Event<'_>) {
        engine::report(self.name, event, self.counters);
    }

    /// Whether the call's deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.deadline.is_some_and(|at| Instant::now() >= at)
    }

    /// The request of an attempt: the head with `grpc-previous-rpc-attempts` (from the second
    /// attempt on) and the time left in `grpc-timeout`, and a replay of the body.
    fn build(&self, previous_attempts: Option<u32>) -> Request<tonic::body::Body> {
        let mut parts = self.parts.clone();
        if let Some(previous) = previous_attempts {
            parts
                .headers
                .insert(GRPC_PREVIOUS_RPC_ATTEMPTS, HeaderValue::from(previous));
        }
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Ok(value) = HeaderValue::from_str(&format_timeout(left)) {
                parts.headers.insert(GRPC_TIMEOUT, value);
            }
        }
        Request::from_parts(parts, self.body.replay())
    }
}

/// C-core's connection backoff, which a call that waits for ready waits on between refused
/// connections: 1 s, ×1.6, at most 120 s, each pause within ±20 % of that after the cap
/// (C-core's subchannel backoff: initial 1 s, multiplier 1.6, jitter 0.2, max 120 s).
const RECONNECT: Policy = Policy::new()
    .base(Duration::from_secs(1))
    .factor(1.6)
    .max_delay(Duration::from_secs(120))
    .jitter(Jitter::Spread(0.2));

/// What an attempt gives the engine: a committed answer, or how it failed.
pub(crate) type Sent<RB> = Result<Response<RB>, Failure<RB>>;

/// The transparent retries of a call (gRFC A6), as its deciders ask them: a request that never
/// left the client, or that the server's gRPC library refused, is sent again at once as
/// [`TransparentRetries`] allows; a refused connection, for a call that waits for ready, after
/// C-core's reconnect backoff (the door's deadline cuts the wait).
pub(crate) struct Transparent<'r> {
    retries: TransparentRetries,
    request: &'r Request0<'r>,
    /// The refused connections the attempt under way waited for.
    reconnects: u32,
}

impl<'r> Transparent<'r> {
    pub(crate) fn new(request: &'r Request0<'r>) -> Self {
        Transparent {
            retries: TransparentRetries::new(),
            request,
            reconnects: 0,
        }
    }

    /// An attempt of the policy ends: the next one waits for a refused connection from the
    /// reconnect backoff's start again.
    pub(crate) fn attempt_ended(&mut self) {
        self.reconnects = 0;
    }

    /// The pause before the attempt (or the hedged copy) that failed `unsent` is sent again
    /// ([`Next::Resend`](engine::Next::Resend), [`NextCopy::Resend`](engine::NextCopy::Resend)),
    /// or `None`: the failure goes to the policy, as `UNAVAILABLE`.
    pub(crate) fn resend(&mut self, unsent: Unsent) -> Option<Duration> {
        if unsent == Unsent::ConnectionRefused && self.request.wait_for_ready {
            self.reconnects = self.reconnects.saturating_add(1);
            return Some(RECONNECT.delay(self.reconnects, Duration::ZERO));
        }
        (!self.request.body.outgrew() && self.retries.on_unsent(unsent)).then_some(Duration::ZERO)
    }
}

/// One request of an attempt, sent once: its committed answer, or how it failed (a status, or
/// an error that says it never reached the server's application).
pub(crate) async fn send_once<S, RB>(
    service: &mut S,
    ready: &mut bool,
    request: &Request0<'_>,
    previous_attempts: Option<u32>,
) -> Sent<RB>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    request.report(Event::Attempt);
    let error = match call(service, ready, request.build(previous_attempts)).await {
        // A failure seen at or after the deadline is the deadline's, whoever noticed it
        // first: the channel's own timer of the `grpc-timeout` the door sent (tonic's
        // "Timeout expired", which tonic makes CANCELLED), or the server's (tonic's server
        // answers CANCELLED), which fire at the same time or just after the door's.
        Ok(response) => {
            return match read(response) {
                Outcome::Committed(response) => Ok(response),
                Outcome::Failed(..) if request.expired() => Err(deadline_exceeded()),
                Outcome::Failed(status, failed) => Err(Failure::Status(status, failed)),
            };
        }
        Err(_) if request.expired() => return Err(deadline_exceeded()),
        Err(error) => error,
    };
    let status = AttemptStatus {
        code: code_of_error(&*error),
        pushback: Pushback::Absent,
    };
    Err(match unsent(&*error) {
        Some(unsent) => Failure::Unsent(unsent, status, error),
        None => Failure::Status(status, Failed::Error(error)),
    })
}

/// An attempt that failed at the call's deadline.
fn deadline_exceeded<RB>() -> Failure<RB> {
    let status = AttemptStatus {
        code: Code::DeadlineExceeded,
        pushback: Pushback::Absent,
    };
    let error = tonic::Status::deadline_exceeded("retry-grpc: the call's deadline passed");
    Failure::Status(status, Failed::Error(Box::new(error)))
}

/// One request on `service`, polled ready first unless `ready`; its error boxed at once (so
/// that the service's error type is never held across an await).
async fn call<S, RB>(
    service: &mut S,
    ready: &mut bool,
    request: Request<tonic::body::Body>,
) -> Result<Response<RB>, BoxError>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    if !std::mem::replace(ready, false) {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .map_err(Into::into)?;
    }
    service.call(request).await.map_err(Into::into)
}

/// How an answer's headers read.
fn read<RB>(response: Response<RB>) -> Outcome<RB> {
    if response.status() != StatusCode::OK {
        let status = AttemptStatus {
            code: code_of_http(response.status()),
            pushback: Pushback::Absent,
        };
        return Outcome::Failed(status, Failed::Answer(response));
    }
    match AttemptStatus::from_headers(response.headers()) {
        Some(status) => Outcome::Failed(status, Failed::Answer(response)),
        None => Outcome::Committed(response),
    }
}

/// Whether an attempt's error says it never reached the server's application, and how.
///
/// - hyper's `Canceled` ("operation was canceled"): the request was never handed to a
///   connection. hyper makes it for exactly two cases, both before anything is written: the
///   connection was closed when the request was given to it ("connection was not ready"), or it
///   closed with the request still in its queue ("connection closed"); a connection that
///   received a `GOAWAY` does both to the requests that raced it. Never left the client.
/// - a refused connection, a `REFUSED_STREAM`, a stream above a `GOAWAY`'s last stream id:
///   [`retry_http::never_sent`], the HTTP doors' rule.
///
/// The first rule is the door's, not `never_sent`'s: the reading above is of hyper's HTTP/2
/// client, all a tonic channel uses, while the HTTP doors also serve HTTP/1, whose dispatcher
/// was not read for it (a POST resent on a wrong reading is paid twice); and A6 tells the two
/// kinds apart (a request that never left the
/// client is retried transparently as often as it happens, one the server's application never
/// saw once).
fn unsent(error: &(dyn Error + 'static)) -> Option<Unsent> {
    if chain(error).any(|e| {
        e.downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled)
    }) {
        return Some(Unsent::NeverLeftClient);
    }
    if !retry_http::never_sent(error) {
        return None;
    }
    let refused = chain(error).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    Some(if refused {
        Unsent::ConnectionRefused
    } else {
        Unsent::NotSeenByServer
    })
}

/// An error and its sources, at most 64 deep (a longer chain is a cycle).
fn chain<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&e| e.source()).take(64)
}

/// The code of an attempt that ended in an error: a `tonic::Status` in its source chain says it;
/// anything else broke the transport, `UNAVAILABLE` as gRPC's clients report it.
fn code_of_error(error: &(dyn Error + 'static)) -> Code {
    chain(error)
        .find_map(|e| e.downcast_ref::<tonic::Status>())
        .map_or(Code::Unavailable, tonic::Status::code)
}

/// gRPC's mapping of an HTTP status that is not 200 (`doc/http-grpc-status-mapping.md`).
fn code_of_http(status: StatusCode) -> Code {
    match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// A `grpc-timeout` value: at most 8 digits and a unit, the finest unit that fits.
pub(crate) fn format_timeout(left: Duration) -> String {
    const MAX: u128 = 99_999_999;
    let units: [(u128, char); 6] = [
        (1, 'n'),
        (1_000, 'u'),
        (1_000_000, 'm'),
        (1_000_000_000, 'S'),
        (60_000_000_000, 'M'),
        (3_600_000_000_000, 'H'),
    ];
    let nanos = left.as_nanos();
    for (per, unit) in units {
        // Rounded up, so that the server never sees less time than there is.
        let value = nanos.div_ceil(per);
        if value <= MAX {
            return format!("{value}{unit}");
        }
    }
    format!("{MAX}H")
}

/// A `grpc-timeout` value, if it is well formed (1–8 digits and a unit).
pub(crate) fn parse_timeout(value: &HeaderValue) -> Option<Duration> {
    let text = value.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(value * 3600),
        "M" => Duration::from_secs(value * 60),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_round_trip_and_round_up() {
        for (duration, text) in [
            // 300 ms is 300,000,000 ns: 9 digits, so microseconds.
            (Duration::from_millis(300), "300000u"),
            (Duration::from_secs(5), "5000000u"),
            (Duration::from_secs(1000), "1000000m"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_nanos(1_500), "1500n"),
            (Duration::from_secs(200_000), "200000S"),
        ] {
            let formatted = format_timeout(duration);
            assert_eq!(formatted, text);
            let back = parse_timeout(&HeaderValue::from_str(&formatted).expect("ascii"));
            assert_eq!(back, Some(duration), "{formatted}");
        }
        // Rounded up: the server never sees less time than is left.
        assert_eq!(format_timeout(Duration::new(123_456, 1)), "123457S");
        assert_eq!(format_timeout(Duration::from_secs(200)), "200000m");
        for bad in ["", "m", "123", "123x", "123456789m", "-1m", "1.5S"] {
            assert_eq!(
                parse_timeout(&HeaderValue::from_str(bad).expect("ascii")),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_timeout(&HeaderValue::from_static("2M")),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn http_errors_map_as_grpc_says() {
        assert_eq!(
            code_of_http(StatusCode::SERVICE_UNAVAILABLE),
            Code::Unavailable
        );
        assert_eq!(
            code_of_http(StatusCode::TOO_MANY_REQUESTS),
            Code::Unavailable
        );
        assert_eq!(code_of_http(StatusCode::NOT_FOUND), Code::Unimplemented);
        assert_eq!(code_of_http(StatusCode::BAD_REQUEST), Code::Internal);
        assert_eq!(code_of_http(StatusCode::IM_A_TEAPOT), Code::Unknown);
    }

    #[test]
    fn refused_connections_and_refused_streams_are_told_apart() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(unsent(&refused), Some(Unsent::ConnectionRefused));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(unsent(&reset), None);
    }
}
