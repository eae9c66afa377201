//! A `tower::Layer` that retries HTTP requests with the attribute's loop: a [`Policy`](crate::Policy),
//! the status table and `Retry-After`, a budget, a breaker, `notify` and the tracing events.
//! Feature `tower`; the guide is [`guide::tower`](crate::guide::tower).
//!
//! ```
//! use retry_runtime::integrations::tower::{HttpRetry, RetryLayer};
//! use retry_runtime::Policy;
//! use std::time::Duration;
//!
//! let layer = RetryLayer::new(
//!     HttpRetry::new(Policy::new().max(3).base(Duration::from_millis(100)))
//!         .name("payments")
//!         .add_idempotency_key(),
//! );
//! # let _ = layer;
//! ```
//!
//! [`RetryService`] takes an `http::Request<B>` and hands the service below an
//! `http::Request<ReplayBody<B>>`:
//!
//! - **Which requests are sent again.** GET, HEAD, OPTIONS, TRACE, PUT and DELETE (idempotent,
//!   RFC 9110 §9.2.2); any other method (POST, PATCH) only with a valid `Idempotency-Key`
//!   header, which [`HttpRetry::add_idempotency_key`] adds when it is missing (a UUID v4, the
//!   same on every attempt). A request without one is still resent when it provably never
//!   reached the server ([`never_sent`]: a refused connection, an HTTP/2 stream the server
//!   refused or announced it did not process), as gRPC's transparent retries
//!   are; such retries are counted apart ([`Counters::never_sent_retries`]) and reported
//!   ([`Resend::never_sent`], and an `INFO` event).
//! - **Bodies.** A body whose length is known and within [`HttpRetry::body_limit`] (64 KiB by
//!   default) is read whole before the first attempt and sent again on each; any other (a
//!   stream, or a longer body) is passed through untouched and the request is sent once, with
//!   the reason ([`SendOnce`]) in an `INFO` event and in [`Counters::sent_once`]. A request is
//!   never resent with a missing body.
//! - **Answers.** A response is judged by [`http::response_verdict`](super::http::response_verdict):
//!   408, 429, 500, 502, 503 and 504 are retried (a dropped response's body is not read), a
//!   `Retry-After` is a floor for the next pause that the policy's jitter spreads above, and one
//!   longer than `max_delay` gives up at once. Errors are judged by [`error_verdict`] (a
//!   transient I/O error anywhere in the `source()` chain, a connection closed mid-message),
//!   which [`RetryLayer::classify`] replaces.
//! - **Errors.** The service's error is boxed ([`BoxError`], tower's convention for middleware
//!   that adds errors); a breaker's refusal is a boxed [`CircuitOpen`](crate::CircuitOpen).

use super::replay::{self, Failed, drive};
pub use super::replay::{
    BoxError, Counters, DEFAULT_BODY_LIMIT, HttpRetry, ReplayBody, Resend, SendOnce,
};
use crate::Verdict;
use ::http::{Request, Response};
use http_body::Body;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_service::Service;

/// The default classifier of a service's errors: transient when an error in the `source()`
/// chain is a transient [`std::io::Error`] ([`has_transient_io_cause`](crate::has_transient_io_cause):
/// reset, refused, timed out, ...), a connection that hyper saw close mid-message or a request
/// it canceled, or this crate's [`Elapsed`](crate::Elapsed).
pub fn error_verdict(error: &(dyn Error + 'static)) -> Verdict {
    if crate::has_transient_io_cause(error) || error.is::<crate::Elapsed>() {
        return Verdict::Retry;
    }
    let broke = std::iter::successors(Some(error), |&cause| cause.source())
        .take(64)
        .filter_map(|cause| cause.downcast_ref::<::hyper::Error>())
        .any(|hyper| hyper.is_incomplete_message() || hyper.is_canceled());
    Verdict::from(broke)
}

/// The default test of an error for "the request never reached the server", anywhere in the
/// `source()` chain: a refused connection ([`std::io::ErrorKind::ConnectionRefused`]), or an
/// HTTP/2 stream that the server refused (a reset with REFUSED_STREAM, RFC 9113 §8.7) or
/// announced it did not process (above the last stream id of a GOAWAY it sent, §6.8), as h2
/// reports them under hyper's errors. A reset with another reason, or a GOAWAY that covers the
/// stream, may come after the server began, and does not count.
///
/// A client's own connect errors say more; with hyper-util's client under the layer, a DNS or
/// connect failure of any kind is recognised by:
///
/// ```ignore
/// layer.never_sent(|e| {
///     retry_runtime::integrations::tower::never_sent(e)
///         || e.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|e| e.is_connect())
/// })
/// ```
pub fn never_sent(error: &(dyn Error + 'static)) -> bool {
    super::sent::never_reached(error)
}

/// The layer: wraps a service in a [`RetryService`]. Cheap to clone; every service it makes
/// shares its budget, breaker and [`Counters`].
#[derive(Clone)]
pub struct RetryLayer {
    config: HttpRetry,
    classify: fn(&(dyn Error + 'static)) -> Verdict,
    never_sent: fn(&(dyn Error + 'static)) -> bool,
}

impl fmt::Debug for RetryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl RetryLayer {
    /// A layer with these options, [`error_verdict`] and [`never_sent`].
    pub fn new(config: HttpRetry) -> Self {
        RetryLayer {
            config,
            classify: error_verdict,
            never_sent,
        }
    }

    /// Judge the service's errors with `f` instead of [`error_verdict`]. It is asked only about
    /// requests that may be sent again.
    pub fn classify(mut self, f: fn(&(dyn Error + 'static)) -> Verdict) -> Self {
        self.classify = f;
        self
    }

    /// Tell errors of requests that never reached the server with `f` instead of
    /// [`never_sent`]: such an attempt is resent whatever the method and key.
    pub fn never_sent(mut self, f: fn(&(dyn Error + 'static)) -> bool) -> Self {
        self.never_sent = f;
        self
    }

    /// The counts of the requests that the services of this layer handled.
    pub fn counters(&self) -> std::sync::Arc<Counters> {
        self.config.counters()
    }
}

impl<S> tower_layer::Layer<S> for RetryLayer {
    type Service = RetryService<S>;

    fn layer(&self, inner: S) -> RetryService<S> {
        RetryService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of a [`RetryLayer`]: sends each request to `S` and again while the policy, the
/// verdicts and the rules of the [module](self) allow.
#[derive(Clone, Debug)]
pub struct RetryService<S> {
    inner: S,
    layer: RetryLayer,
}

impl<S, B, RB> Service<Request<B>> for RetryService<S>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    RB: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service that was polled ready takes the first attempt; its clone stays here.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        Box::pin(respond(self.layer.clone(), ready, request))
    }
}

async fn respond<S, B, RB>(
    layer: RetryLayer,
    ready: S,
    request: Request<B>,
) -> Result<Response<RB>, BoxError>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>> + Clone,
    S::Error: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    let config = &layer.config;
    let (mut parts, body) = request.into_parts();
    let may_resend = replay::may_resend(config, &parts.method, &mut parts.headers);
    let buffered = match replay::buffer(body, config.body_limit)
        .await
        .map_err(Into::into)?
    {
        Ok(buffered) => buffered,
        Err((body, why)) => {
            replay::sent_once(config, why);
            let mut ready = ready;
            let request = Request::from_parts(parts, ReplayBody::Once { body });
            return ready.call(request).await.map_err(Into::into);
        }
    };
    let spare = ready.clone();
    let mut first = Some(ready);
    let (classify, never_sent) = (layer.classify, layer.never_sent);
    let outcome = drive!(
        config,
        Response<RB>,
        BoxError,
        may_resend,
        |error: &BoxError| classify(&**error),
        |error: &BoxError| never_sent(&**error),
        super::http::response_verdict::<RB>,
        _retries => {
            let service = first.take().ok_or_else(|| spare.clone());
            let request = Request::from_parts(parts.clone(), ReplayBody::buffered(&buffered));
            send(service, request)
        }
    );
    outcome.map_err(|failed| match failed {
        Failed::Inner(error) => error,
        Failed::Open(open) => Box::new(open) as BoxError,
    })
}

/// One attempt: `Ok` holds the service polled ready by the caller (the first attempt), `Err` a
/// clone to be polled ready here.
async fn send<S, Req>(service: Result<S, S>, request: Req) -> Result<S::Response, BoxError>
where
    S: Service<Req>,
    S::Error: Into<BoxError>,
{
    let mut service = match service {
        Ok(ready) => ready,
        Err(mut spare) => {
            std::future::poll_fn(|cx| spare.poll_ready(cx))
                .await
                .map_err(Into::into)?;
            spare
        }
    };
    service.call(request).await.map_err(Into::into)
}
