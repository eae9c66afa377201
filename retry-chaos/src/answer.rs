//! The answers the chaos layers make up: what a rule or a request's header asks for, as the
//! `http::Response` a door reads, and its event.

use crate::site::{Installed, Kind};
use retry_runtime::engine::{self, Event, Injection, Sink};
use std::sync::Arc;

/// The request header that asks for an HTTP status on this request (its attempts), as Envoy's
/// `x-envoy-fault-abort-request`: `x-retry-chaos-abort: 503`. Read only at a site that allowed
/// it ([`Site::allow_header_requests`](crate::Site::allow_header_requests)) while the switches
/// are on; the door above copies it to every attempt, so every attempt gets the status.
pub const ABORT_HEADER: &str = "x-retry-chaos-abort";

/// The request header that asks for a gRPC status on this call (its attempts), as Envoy's
/// `x-envoy-fault-abort-grpc-request`: `x-retry-chaos-grpc-abort: 14`. Read as
/// [`ABORT_HEADER`] is.
pub const GRPC_ABORT_HEADER: &str = "x-retry-chaos-grpc-abort";

/// Where a chaos layer reports what it injects: the door's sink (its `Counters`), beside the
/// logs and the metrics.
pub(crate) type SharedSink = Arc<dyn Sink + Send + Sync>;

/// The answer to inject into attempt `attempt` of a request with `headers`, if any: what a
/// header asked for where the site allows it, else the site's rules.
pub(crate) fn planned(site: &Installed, headers: &http::HeaderMap, attempt: u32) -> Option<Kind> {
    if site.header_requests_allowed() {
        if let Some(kind) = requested(headers) {
            site.count_answer();
            return Some(kind);
        }
    }
    site.answer(attempt)
}

fn requested(headers: &http::HeaderMap) -> Option<Kind> {
    let number = |name| -> Option<u16> { headers.get(name)?.to_str().ok()?.trim().parse().ok() };
    if let Some(status) = number(ABORT_HEADER).filter(|s| (100..=999).contains(s)) {
        return Some(Kind::Status {
            status,
            headers: Vec::new(),
        });
    }
    number(GRPC_ABORT_HEADER)
        .filter(|code| *code <= 16)
        .map(|code| Kind::Grpc {
            code,
            pushback: None,
        })
}

/// The answer `kind` describes, with `body`; its code for the event. `None` for a kind that is
/// not an answer, or a header that is not valid.
pub(crate) fn response<B>(kind: &Kind, body: B) -> Option<(http::Response<B>, u16)> {
    let mut answer = http::Response::builder();
    let code = match kind {
        Kind::Status { status, headers } => {
            answer = answer.status(*status);
            for (name, value) in headers {
                answer = answer.header(name.as_str(), value.as_str());
            }
            *status
        }
        Kind::Grpc { code, pushback } => {
            // Trailers-only: the status in the headers, as a server that fails at once sends it.
            answer = answer
                .status(200)
                .header("content-type", "application/grpc")
                .header("grpc-status", code.to_string())
                .header("grpc-message", "injected by retry-chaos");
            match pushback {
                Some(Some(pause)) => {
                    answer = answer.header("grpc-retry-pushback-ms", pause.as_millis().to_string())
                }
                Some(None) => answer = answer.header("grpc-retry-pushback-ms", "-1"),
                None => {}
            }
            *code
        }
        Kind::Error | Kind::Latency(_) => return None,
    };
    answer.body(body).ok().map(|answer| (answer, code))
}

/// Reports an injected answer of `code` into attempt `attempt` at `site`.
pub(crate) fn report(site: &'static str, attempt: u32, code: u16, sink: &SharedSink) {
    let event = Event::Injected {
        attempt,
        fault: Injection::Outcome { code },
    };
    engine::report(site, event, sink);
}
