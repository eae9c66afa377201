//! A `reqwest_middleware::Middleware` that retries with the attribute's loop and the rules of
//! the [tower layer](super::tower): feature `reqwest-middleware`; the guide is
//! [`guide::tower`](crate::guide::tower).
//!
//! ```
//! use retry_runtime::integrations::reqwest_middleware::{HttpRetry, RetryMiddleware};
//! use retry_runtime::Policy;
//! use std::time::Duration;
//!
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryMiddleware::new(
//!         HttpRetry::new(Policy::new().max(3).base(Duration::from_millis(100)))
//!             .name("payments")
//!             .add_idempotency_key(),
//!     ))
//!     .build();
//! # let _ = client;
//! ```
//!
//! - **Verdicts**: a response by [`reqwest::response_verdict`](super::reqwest::response_verdict)
//!   (the status table, `Retry-After` as a floor for the pause), a `reqwest::Error` by its
//!   [`Transient`] implementation; an error of another middleware is not
//!   retried.
//! - **Keys**: GET, HEAD, OPTIONS, TRACE, PUT and DELETE are resent; POST, PATCH and any other
//!   method only with a valid `Idempotency-Key` header, which
//!   [`HttpRetry::add_idempotency_key`] adds (a UUID v4, the same on every attempt). Without
//!   one, such a request is resent only after a connect error (`reqwest::Error::is_connect`: a
//!   refused connection, a DNS or TLS failure) or an HTTP/2 stream the server refused or
//!   announced it did not process (the [tower layer's rule](super::tower::never_sent)), which
//!   prove it never reached the server.
//! - **Bodies**: a body reqwest cannot clone (made with `Body::wrap` or `Body::wrap_stream`) is
//!   read whole when its length is known and within [`HttpRetry::body_limit`]; otherwise it is
//!   sent once, untouched, with the reason ([`SendOnce`]) in an event and in
//!   [`Counters::sent_once`], where `reqwest-retry` fails with "Request object is not
//!   cloneable".
//! - **Hooks and timeout**: [`HttpRetry::notify`], [`HttpRetry::on_give_up`] and
//!   [`HttpRetry::timeout`] (each attempt abandoned after the limit, transient for a request
//!   that may be sent again) as for the tower layer.
//! - **Errors**: a breaker's refusal is `reqwest_middleware::Error::Middleware` holding a
//!   [`CircuitOpen`](crate::CircuitOpen), the last attempt's timeout one holding an
//!   [`Elapsed`](crate::Elapsed).

use super::replay::{self, Failed, drive};
pub use super::replay::{Counters, DEFAULT_BODY_LIMIT, HttpRetry, ReplayBody, Resend, SendOnce};
use crate::{Transient, Verdict};
use ::http::Extensions;
use ::reqwest::{Body, Request, Response};
use reqwest_middleware::{Error, Middleware, Next};

/// The middleware: add it with `reqwest_middleware::ClientBuilder::with`.
#[derive(Clone, Debug)]
pub struct RetryMiddleware {
    config: HttpRetry,
}

impl RetryMiddleware {
    /// A middleware with these options.
    pub fn new(config: HttpRetry) -> Self {
        RetryMiddleware { config }
    }

    /// The counts of the requests it handled.
    pub fn counters(&self) -> std::sync::Arc<Counters> {
        self.config.counters()
    }
}

/// An error of the client below: by reqwest's table; another middleware's is not retried.
fn classify(error: &Error) -> Verdict {
    match error {
        Error::Reqwest(error) => error.verdict(),
        Error::Middleware(_) => Verdict::Fail,
    }
}

/// A connect error, or an HTTP/2 stream the server refused or announced it did not process
/// (the tower layer's rule): the request never reached the server.
fn never_sent(error: &Error) -> bool {
    matches!(error, Error::Reqwest(error) if error.is_connect() || super::sent::never_reached(error))
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        mut request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let config = &self.config;
        let method = request.method().clone();
        let may_resend = replay::may_resend(config, &method, request.headers_mut());
        if request.try_clone().is_none() {
            if let Some(body) = request.body_mut().take() {
                match replay::buffer(body, config.body_limit).await {
                    Ok(Ok(buffered)) if buffered.trailers.is_none() => {
                        *request.body_mut() = Some(Body::from(buffered.data));
                    }
                    // Trailers (rare in a request) survive only in a body that is not cloneable.
                    Ok(Ok(buffered)) => {
                        *request.body_mut() =
                            Some(Body::wrap(ReplayBody::<Body>::buffered(&buffered)));
                    }
                    Ok(Err((body, why))) => {
                        *request.body_mut() = Some(body);
                        replay::sent_once(config, why);
                    }
                    Err(error) => return Err(Error::Reqwest(error)),
                }
            }
        }
        if request.try_clone().is_none() {
            return next.run(request, extensions).await;
        }
        let outcome = drive!(
            config,
            Response,
            Error,
            may_resend,
            classify,
            never_sent,
            super::reqwest::response_verdict,
            _retries => {
                let attempt = request.try_clone();
                let next = next.clone();
                let extensions = &mut *extensions;
                async move {
                    match attempt {
                        Some(attempt) => next.run(attempt, extensions).await,
                        None => Err(Error::middleware(NotCloneable)),
                    }
                }
            }
        );
        outcome.map_err(|failed| match failed {
            Failed::Inner(error) => error,
            Failed::Open(open) => Error::middleware(open),
            Failed::Elapsed(elapsed) => Error::middleware(elapsed),
        })
    }
}

/// A request that was cloneable before its first attempt and not after: reqwest never does
/// this, but the loop does not `unwrap` it.
#[derive(Debug)]
struct NotCloneable;

impl std::fmt::Display for NotCloneable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request could not be cloned for another attempt")
    }
}

impl std::error::Error for NotCloneable {}
