//! A `reqwest_middleware::Middleware` that retries with the attribute's loop and the rules of
//! the tower layer: feature `reqwest-middleware`; the guide is [the crate's page](crate).
//!
//! ```
//! use retry_http::HttpRetry;
//! use retry_http::reqwest::RetryMiddleware;
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
//! - **Verdicts**: a response by
//!   [`reqwest::response_verdict`](retry_runtime::integrations::reqwest::response_verdict)
//!   (the status table, `Retry-After` as a floor for the pause; or [`HttpRetry::on_response`]),
//!   a `reqwest::Error` by its [`Transient`] implementation; an error of another middleware is
//!   not retried.
//! - **Keys**: GET, HEAD, OPTIONS, TRACE, PUT and DELETE are resent; POST, PATCH and any other
//!   method only with a valid `Idempotency-Key` header, which
//!   [`HttpRetry::add_idempotency_key`] adds (a UUID v4, the same on every attempt, sent in
//!   double quotes as a structured-field string, `"8e03978e-…"`, which a server reading the raw
//!   header sees with its quotes). Without
//!   one, such a request is resent only after a connect error (`reqwest::Error::is_connect`: a
//!   refused connection, a DNS or TLS failure) or an HTTP/2 stream the server refused or
//!   announced it did not process (the tower layer's rule, [`never_sent`](crate::never_sent)),
//!   which prove it never reached the server.
//! - **Bodies**: a body reqwest cannot clone (made with `Body::wrap` or `Body::wrap_stream`) is
//!   read whole when its length is known and within [`HttpRetry::body_limit`]; otherwise it is
//!   sent once, untouched, with the reason ([`SendOnce`](crate::SendOnce)) in an event and in
//!   [`Counters::sent_once`], where `reqwest-retry` fails with "Request object is not
//!   cloneable".
//! - **Hooks and timeout**: [`HttpRetry::notify`], [`HttpRetry::on_give_up`] (or, async,
//!   [`HttpRetry::notify_async`] and [`HttpRetry::on_give_up_async`], awaited before the pause
//!   and before the call returns) and [`HttpRetry::timeout`] (each attempt abandoned after the
//!   limit, transient for a request that may be sent again) as for the tower layer.
//! - **Errors**: a breaker's refusal is `reqwest_middleware::Error::Middleware` holding a
//!   [`CircuitOpen`](retry_runtime::CircuitOpen), the last attempt's timeout one holding an
//!   [`Elapsed`](retry_runtime::Elapsed).

use crate::options::{self, Failed};
use crate::{Counters, HttpRetry, ReplayBody};
use ::http::Extensions;
use ::reqwest::{Body, Request, Response};
use reqwest_middleware::{Error, Middleware, Next};
use retry_runtime::{Transient, Verdict};
use std::future::Future;

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
    matches!(error, Error::Reqwest(error) if error.is_connect() || crate::never_sent(error))
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
        let may_resend = options::may_resend(config, &method, request.headers_mut());
        if request.try_clone().is_none() {
            if let Some(body) = request.body_mut().take() {
                match options::buffer(body, config.body_limit).await {
                    Ok(Ok(buffered)) if buffered.trailers.is_none() => {
                        *request.body_mut() = Some(Body::from(buffered.data.unwrap_or_default()));
                    }
                    // Trailers (rare in a request) survive only in a body that is not cloneable.
                    Ok(Ok(buffered)) => {
                        *request.body_mut() =
                            Some(Body::wrap(ReplayBody::<Body>::buffered(&buffered)));
                    }
                    Ok(Err((body, why))) => {
                        *request.body_mut() = Some(body);
                        options::sent_once(config, why);
                    }
                    Err(error) => return Err(Error::Reqwest(error)),
                }
            }
        }
        if request.try_clone().is_none() {
            return next.run(request, extensions).await;
        }
        let url = request.url();
        let named = options::chosen(config, &method, || url.host_str(), url.path());
        let outcome = options::send(
            config,
            named.as_deref(),
            may_resend,
            &classify,
            &never_sent,
            &|response: &Response| config.judge(response.status(), response.headers()),
            None,
            Sending {
                request,
                next,
                extensions,
            },
        )
        .await;
        outcome.map_err(|failed| match failed {
            Failed::Inner(error) => error,
            Failed::Open(open) => Error::middleware(open),
            Failed::Shed(rejected) => Error::middleware(rejected),
            Failed::Elapsed(elapsed) => Error::middleware(elapsed),
        })
    }
}

/// The operation of the middleware's loop: each attempt sends a clone of the request to the rest
/// of the chain, with the request's extensions borrowed for the attempt.
struct Sending<'a> {
    request: Request,
    next: Next<'a>,
    extensions: &'a mut Extensions,
}

impl retry_runtime::engine::Operation<Response, Error> for Sending<'_> {
    fn attempt(&mut self) -> impl Future<Output = Result<Response, Error>> {
        let attempt = self.request.try_clone();
        let next = self.next.clone();
        let extensions = &mut *self.extensions;
        async move {
            match attempt {
                Some(attempt) => next.run(attempt, extensions).await,
                None => Err(Error::middleware(NotCloneable)),
            }
        }
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
