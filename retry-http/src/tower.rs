//! A `tower::Layer` that retries HTTP requests with the attribute's loop: a
//! [`Policy`](retry_runtime::Policy), the status table and `Retry-After`, a budget, a breaker,
//! `notify`, `on_give_up` (sync or async), a per-attempt `timeout` and the tracing events; and
//! [`CloneRetryLayer`], the same loop for any service whose request is `Clone`. Feature `tower`;
//! the guide is [the crate's page](crate).
//!
//! ```
//! use retry_http::HttpRetry;
//! use retry_http::tower::RetryLayer;
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
//! For a tonic `Channel` (gRPC) use the `retry-grpc` crate's `GrpcRetryLayer` instead: this
//! layer judges HTTP statuses, and a gRPC status is not one (see the crate's guide).
//!
//! [`RetryService`] takes an `http::Request<B>` and hands the service below an
//! `http::Request<ReplayBody<B>>`:
//!
//! - **Which requests are sent again.** GET, HEAD, OPTIONS, TRACE, PUT and DELETE (idempotent,
//!   RFC 9110 §9.2.2); any other method (POST, PATCH) only with a valid `Idempotency-Key`
//!   header, which [`HttpRetry::add_idempotency_key`] adds when it is missing (a UUID v4, the
//!   same on every attempt, sent as the IETF draft writes it, a quoted structured-field string:
//!   `Idempotency-Key: "8e03978e-…"`; a server that reads the raw header sees the quotes, and
//!   [`key_from_header`](retry_runtime::headers::key_from_header) accepts the key with or
//!   without them). A request without one is still resent when it provably never
//!   reached the server ([`never_sent`](crate::never_sent): a refused connection, an HTTP/2
//!   stream the server refused or announced it did not process), as gRPC's transparent retries
//!   are; such retries are counted apart ([`Counters::never_sent_retries`]) and reported
//!   ([`Resend::never_sent`](crate::Resend::never_sent), and an `INFO` event).
//! - **Bodies.** A body whose length is known and within [`HttpRetry::body_limit`] (64 KiB by
//!   default) is read whole before the first attempt and sent again on each; any other (a
//!   stream, or a longer body) is passed through untouched and the request is sent once, with
//!   the reason ([`SendOnce`](crate::SendOnce)) in an `INFO` event and in [`Counters::sent_once`]. A request is
//!   never resent with a missing body.
//! - **Answers.** A response is judged by
//!   [`http::response_verdict`](retry_runtime::integrations::http::response_verdict)
//!   (or [`HttpRetry::on_response`]):
//!   408, 429, 500, 502, 503 and 504 are retried (a dropped response's body is not read), a
//!   `Retry-After` is a floor for the next pause that the policy's jitter spreads above, and one
//!   longer than `max_delay` gives up at once. Errors are judged by [`error_verdict`] (a
//!   transient I/O error anywhere in the `source()` chain, a connection closed mid-message),
//!   which [`RetryLayer::classify`] replaces.
//! - **Errors.** The service's error is boxed ([`BoxError`], tower's convention for middleware
//!   that adds errors); a breaker's refusal is a boxed
//!   [`CircuitOpen`](retry_runtime::CircuitOpen).
//! - **Cost.** A request without a body to read, under options without a budget, breaker,
//!   gate, `aws2026`, `timeout`, deadline, `notify` or `on_give_up`, is sent by `call` itself
//!   (its first attempt, [`FirstAttempt`]), and its
//!   [`ResponseFuture`] boxes the loop only if that attempt's outcome is not accepted; any other
//!   request runs in the loop, boxed, from its first attempt.

use crate::options::{self, Buffered, Failed, FirstOutcome};
use crate::{BoxError, Counters, HttpRetry, ReplayBody};
use ::http::{Request, Response};
use http_body::Body;
use retry_runtime::engine::first::{FirstAttempt, InAttempt};
use retry_runtime::named::Named;
use retry_runtime::{Transient, Verdict};
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The default classifier of a service's errors: transient when the connection broke under the
/// request ([`connection_broke`](crate::connection_broke): a transient [`std::io::Error`] in the
/// `source()` chain, reset, refused, timed out, ..., or a connection hyper saw close
/// mid-message, or a request it canceled, the rule `Transient for reqwest::Error` uses too), or
/// the error is the loop's own [`Elapsed`](retry_runtime::Elapsed).
pub fn error_verdict(error: &(dyn Error + 'static)) -> Verdict {
    Verdict::from(crate::connection_broke(error) || error.is::<retry_runtime::Elapsed>())
}

/// The layer: wraps a service in a [`RetryService`]. Cheap to clone; every service it makes
/// shares its budget, breaker and [`Counters`].
#[derive(Clone)]
pub struct RetryLayer {
    config: HttpRetry,
    // Whether the options let a request's first attempt be made before its loop, asked once.
    first: Option<FirstAttempt>,
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
    /// A layer with these options, [`error_verdict`] and [`never_sent`](crate::never_sent).
    pub fn new(config: HttpRetry) -> Self {
        RetryLayer {
            first: options::first_attempt(&config),
            config,
            classify: error_verdict,
            never_sent: crate::never_sent,
        }
    }

    /// Judge the service's errors with `f` instead of [`error_verdict`]. It is asked only about
    /// requests that may be sent again.
    pub fn classify(mut self, f: fn(&(dyn Error + 'static)) -> Verdict) -> Self {
        self.classify = f;
        self
    }

    /// Tell errors of requests that never reached the server with `f` instead of
    /// [`never_sent`](crate::never_sent): such an attempt is resent whatever the method and key.
    pub fn never_sent(mut self, f: fn(&(dyn Error + 'static)) -> bool) -> Self {
        self.never_sent = f;
        self
    }

    /// The counts of the requests that the services of this layer handled.
    pub fn counters(&self) -> Arc<Counters> {
        self.config.counters()
    }
}

impl<S> tower_layer::Layer<S> for RetryLayer {
    type Service = RetryService<S>;

    fn layer(&self, inner: S) -> RetryService<S> {
        RetryService {
            inner,
            layer: Arc::new(self.clone()),
        }
    }
}

/// The service of a [`RetryLayer`]: sends each request to `S` and again while the policy, the
/// verdicts and the rules of the [module](self) allow.
#[derive(Clone, Debug)]
pub struct RetryService<S> {
    inner: S,
    // One reference count per request, where the options would be several.
    layer: Arc<RetryLayer>,
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
    type Future = ResponseFuture<S, B, RB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: Request<B>) -> Self::Future {
        let config = &self.layer.config;
        let (mut parts, body) = request.into_parts();
        let may_resend = options::may_resend(config, &parts.method, &mut parts.headers);
        let named = options::chosen(config, &parts.method, || host(&parts), parts.uri.path());
        // A request without a body to read (a GET) whose loop needs nothing before its first
        // attempt: the attempt is sent here, and the loop is made only if it fails.
        let first = self.layer.first.filter(|_| body.is_end_stream());
        if let Some(first) = first.and_then(|first| first.again_plain()) {
            let buffered = Buffered::empty();
            let body = ReplayBody::Buffered {
                data: None,
                trailers: None,
            };
            let request = Request::from_parts(parts.clone(), body);
            // The service the caller polled ready takes the first attempt; its clone, polled
            // ready again, the others.
            let attempt = first.run(|| self.inner.call(request));
            let rest = HttpRest {
                layer: Arc::clone(&self.layer),
                service: self.inner.clone(),
                parts,
                buffered,
                may_resend,
                named: None,
                body: PhantomData,
            };
            return ResponseFuture {
                state: State::first(attempt, rest),
            };
        }
        // The service that was polled ready takes the first attempt and, polled ready again,
        // the others; its clone stays here.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let request = Request::from_parts(parts, body);
        let future = Box::pin(respond(
            Arc::clone(&self.layer),
            ready,
            request,
            may_resend,
            named,
        ));
        ResponseFuture {
            state: State::Loop { future },
        }
    }
}

/// The host a request goes to, for its route: the URI's, else the `Host` header's, without the
/// port.
fn host(parts: &::http::request::Parts) -> Option<&str> {
    parts.uri.host().or_else(|| {
        let header = parts.headers.get(::http::header::HOST)?.to_str().ok()?;
        // `[::1]:8080` or `example.com:8080`: the port is after the last `:` outside brackets.
        match header.rfind(':') {
            Some(colon) if !header[colon..].contains(']') => Some(&header[..colon]),
            _ => Some(header),
        }
    })
}

async fn respond<S, B, RB>(
    layer: Arc<RetryLayer>,
    mut service: S,
    request: Request<B>,
    may_resend: bool,
    named: Option<Arc<Named>>,
) -> Result<Response<RB>, BoxError>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    let config = &layer.config;
    let (parts, body) = request.into_parts();
    let buffered = match options::buffer(body, config.body_limit)
        .await
        .map_err(Into::into)?
    {
        Ok(buffered) => buffered,
        Err((body, why)) => {
            options::sent_once(config, why);
            let request = Request::from_parts(parts, ReplayBody::Once { body });
            return service.call(request).await.map_err(Into::into);
        }
    };
    let rest = HttpRest {
        layer: Arc::clone(&layer),
        service,
        parts,
        buffered,
        may_resend,
        named,
        body: PhantomData,
    };
    rest.send(None, true).await
}

/// What a [`RetryService`]'s request needs after its first attempt: the options, the service
/// for the other attempts, the request's parts and body to make each, and the named policy its
/// route chose (held for all its attempts).
struct HttpRest<S, B> {
    layer: Arc<RetryLayer>,
    service: S,
    parts: ::http::request::Parts,
    buffered: Buffered,
    may_resend: bool,
    named: Option<Arc<Named>>,
    body: PhantomData<fn() -> B>,
}

impl<S, B, RB> HttpRest<S, B>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
{
    /// The loop of the request: from its first attempt (`ready`: the service is the one the
    /// caller polled ready), or after it (`first`).
    async fn send(
        mut self,
        first: Option<FirstOutcome<Response<RB>, Boxed>>,
        ready: bool,
    ) -> Result<Response<RB>, BoxError> {
        let (layer, may_resend) = (&*self.layer, self.may_resend);
        let config = &layer.config;
        let (classify, never_sent) = (layer.classify, layer.never_sent);
        let named = self.named.take();
        let outcome = options::send(
            config,
            named.as_deref(),
            may_resend,
            &|error: &Boxed| classify(&*error.0),
            &|error: &Boxed| never_sent(&*error.0),
            &|response: &Response<RB>| config.judge(response.status(), response.headers()),
            first,
            Resending {
                service: &mut self.service,
                ready,
                request: (self.parts, self.buffered),
                make: |(parts, buffered): &(::http::request::Parts, Buffered)| {
                    Request::from_parts(parts.clone(), ReplayBody::buffered(buffered))
                },
                into: |error: S::Error| Boxed(error.into()),
            },
        )
        .await;
        outcome.map_err(into_box_error)
    }
}

impl<S, B, RB> Rest<Response<RB>, S::Error> for HttpRest<S, B>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    RB: Send + 'static,
{
    fn judge(&self, response: &Response<RB>) -> Verdict {
        if self.may_resend {
            self.layer
                .config
                .judge(response.status(), response.headers())
        } else {
            Verdict::Fail
        }
    }

    fn accepted(&self) {
        if let Some(first) = self.layer.first {
            first.accepted();
        }
    }

    fn resume(self, first: FirstOutcome<Response<RB>, S::Error>) -> Loop<Response<RB>> {
        let (outcome, verdict) = first;
        let outcome = outcome.map_err(|error| Boxed(error.into()));
        Box::pin(self.send(Some((outcome, verdict)), false))
    }
}

/// The loop of a request, boxed: it is the engine's `async` loop, which borrows the options.
type Loop<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// What a request needs after a first attempt made before its loop ([`FirstAttempt`]).
trait Rest<T, Er> {
    /// The verdict on the first attempt's answer.
    fn judge(&self, answer: &T) -> Verdict;
    /// The first attempt's answer was accepted ([`FirstAttempt::accepted`]).
    fn accepted(&self);
    /// The loop, after the first attempt that was not accepted.
    fn resume(self, first: FirstOutcome<T, Er>) -> Loop<T>;
}

pin_project_lite::pin_project! {
    /// A request under way: its first attempt, made before the loop (a request without a body
    /// to read, whose loop needs nothing before it, `FirstAttempt`), or the loop, boxed.
    #[project = StateProj]
    enum State<F, R, T> {
        First { #[pin] attempt: InAttempt<F>, rest: Option<R> },
        Loop { future: Loop<T> },
    }
}

impl<F, R, T> State<F, R, T> {
    fn first(attempt: InAttempt<F>, rest: R) -> Self {
        State::First {
            attempt,
            rest: Some(rest),
        }
    }
}

impl<F, R, T, Er> Future for State<F, R, T>
where
    F: Future<Output = Result<T, Er>>,
    R: Rest<T, Er>,
{
    type Output = Result<T, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (outcome, rest) = match self.as_mut().project() {
            StateProj::Loop { future } => return future.as_mut().poll(cx),
            StateProj::First { attempt, rest } => {
                let judged = match (std::task::ready!(attempt.poll(cx)), rest.as_ref()) {
                    (Ok(answer), Some(rest)) => {
                        let verdict = rest.judge(&answer);
                        if !verdict.is_retry() {
                            rest.accepted();
                            return Poll::Ready(Ok(answer));
                        }
                        (Ok(answer), Some(verdict))
                    }
                    (outcome, _) => (outcome, None),
                };
                match rest.take() {
                    Some(rest) => (judged, rest),
                    // Not reached: the state is the loop once the first attempt has ended.
                    None => return Poll::Pending,
                }
            }
        };
        let mut future = rest.resume(outcome);
        let polled = future.as_mut().poll(cx);
        self.set(State::Loop { future });
        polled
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`RetryService`]'s call: its first attempt, made before the loop when
    /// nothing has to come before it (a request without a body to read, options without a
    /// budget, breaker, gate, `aws2026`, `timeout`, deadline, `notify` or `on_give_up`), so that
    /// an answer accepted at once costs no boxed loop; otherwise the loop, boxed.
    pub struct ResponseFuture<S, B, RB>
    where
        S: Service<Request<ReplayBody<B>>, Response = Response<RB>>,
    {
        #[pin]
        state: State<S::Future, HttpRest<S, B>, Response<RB>>,
    }
}

impl<S, B, RB> fmt::Debug for ResponseFuture<S, B, RB>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<S, B, RB> Future for ResponseFuture<S, B, RB>
where
    S: Service<Request<ReplayBody<B>>, Response = Response<RB>> + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    RB: Send + 'static,
{
    type Output = Result<Response<RB>, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().state.poll(cx)
    }
}

pin_project_lite::pin_project! {
    /// One attempt, a named future rather than an `async fn`, so that the request is held once
    /// (`PERFORMANCE.md` §4): the service to call when first polled (not before: a breaker may
    /// refuse the attempt), polled ready first unless it is still the one the caller polled;
    /// then the service's call under way.
    #[project = AttemptProj]
    enum Attempt<'s, S, Req, F, Er, E> {
        Called { #[pin] future: F, into: fn(Er) -> E },
        Waiting { service: &'s mut S, request: Option<Req>, ready: bool, into: fn(Er) -> E },
    }
}

/// The operation of a request's loop: each attempt sends the request `make` makes from `request`
/// to `service`, borrowed for the attempt, its error turned into the loop's by `into`; `ready` is
/// true until the first call, while the service is the one the caller polled ready.
struct Resending<'s, S, R, M, Er, E> {
    service: &'s mut S,
    ready: bool,
    request: R,
    make: M,
    into: fn(Er) -> E,
}

impl<S, R, M, Req, E> retry_runtime::engine::Operation<S::Response, E>
    for Resending<'_, S, R, M, S::Error, E>
where
    S: Service<Req>,
    M: Fn(&R) -> Req,
{
    fn attempt(&mut self) -> impl Future<Output = Result<S::Response, E>> {
        Attempt::Waiting {
            request: Some((self.make)(&self.request)),
            service: &mut *self.service,
            ready: std::mem::replace(&mut self.ready, false),
            into: self.into,
        }
    }
}

impl<S, Req, E> Future for Attempt<'_, S, Req, S::Future, S::Error, E>
where
    S: Service<Req>,
{
    type Output = Result<S::Response, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let (future, into) = match self.as_mut().project() {
                AttemptProj::Called { future, into } => return future.poll(cx).map_err(*into),
                AttemptProj::Waiting {
                    service,
                    request,
                    ready,
                    into,
                } => {
                    if !*ready {
                        if let Err(error) = std::task::ready!(service.poll_ready(cx)) {
                            return Poll::Ready(Err(into(error)));
                        }
                        *ready = true;
                    }
                    match request.take() {
                        Some(request) => (service.call(request), *into),
                        // Not reached: the variant is replaced once the request is sent.
                        None => return Poll::Pending,
                    }
                }
            };
            self.set(Attempt::Called { future, into });
        }
    }
}

/// A service's error, boxed, as the loop of a [`RetryService`] holds it: a type of its own, not
/// the `Box<dyn Error>` itself, whose object lifetime rustc loses in the future of the call
/// ("implementation of `Operation` is not general enough").
struct Boxed(BoxError);

impl fmt::Debug for Boxed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Boxed> for BoxError {
    fn from(boxed: Boxed) -> Self {
        boxed.0
    }
}

/// The caller's error: the service's, or the loop's own (a breaker's refusal, a gate's
/// rejection, a timeout), boxed.
pub(crate) fn into_box_error<E: Into<BoxError>>(failed: Failed<E>) -> BoxError {
    match failed {
        Failed::Inner(error) => error.into(),
        Failed::Open(open) => Box::new(open),
        Failed::Shed(rejected) => Box::new(rejected),
        Failed::Elapsed(elapsed) => Box::new(elapsed),
    }
}

/// How a [`CloneRetryLayer`] judges the service's errors: [`ByTransient`] (the error type's
/// [`Transient`] implementation, by default), or a function `Fn(&E) -> V` where `V` is a
/// `bool` (`true`: worth another try) or a [`Verdict`].
pub trait ClassifyError<E> {
    /// The verdict on one error.
    fn verdict(&self, error: &E) -> Verdict;
}

/// The default classifier of a [`CloneRetryLayer`]: the error type's [`Transient`]
/// implementation, with its server-suggested pause, as `#[retry]` without `on = ...`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByTransient;

impl<E: Transient> ClassifyError<E> for ByTransient {
    fn verdict(&self, error: &E) -> Verdict {
        error.verdict()
    }
}

impl<E, F, V> ClassifyError<E> for F
where
    F: Fn(&E) -> V,
    V: Into<Verdict>,
{
    fn verdict(&self, error: &E) -> Verdict {
        self(error).into()
    }
}

/// How a [`CloneRetryLayer`] judges the service's answers, as the attribute's `on_result`:
/// [`AnyResponse`] (every answer accepted, by default), or a function `Fn(&T) -> V` where `V`
/// is a `bool` (`true`: retry) or a [`Verdict`]. When the retries run out, the last answer is
/// returned.
pub trait ClassifyResponse<T> {
    /// The verdict on one answer.
    fn verdict(&self, answer: &T) -> Verdict;
}

/// The default answer classifier of a [`CloneRetryLayer`]: every answer is accepted.
#[derive(Clone, Copy, Debug, Default)]
pub struct AnyResponse;

impl<T> ClassifyResponse<T> for AnyResponse {
    fn verdict(&self, _: &T) -> Verdict {
        Verdict::Fail
    }
}

impl<T, F, V> ClassifyResponse<T> for F
where
    F: Fn(&T) -> V,
    V: Into<Verdict>,
{
    fn verdict(&self, answer: &T) -> Verdict {
        self(answer).into()
    }
}

/// A layer for any service whose request is `Clone` (a request enum to a custom service, a
/// tonic message, ...): each attempt sends a clone of the request through the attribute's loop,
/// with the [`HttpRetry`] options that apply to any request (the policy, `name`, `budget`,
/// `breaker`, `gate`, `aws2026`, `notify`, `on_give_up`, `timeout`; `body_limit` and
/// `add_idempotency_key` are for HTTP requests and have no effect here). A request that the
/// `gate` sheds is never sent: the caller's error is the boxed
/// [`Rejected`](retry_runtime::Rejected). Errors are judged by `C` ([`ByTransient`] by
/// default), answers by `R` ([`AnyResponse`] by default). The caller's error is boxed
/// ([`BoxError`]), as with [`RetryLayer`].
///
/// Whether a request may be sent again is the classifier's to say: it hears every error, so a
/// request that is not idempotent needs a classifier that answers `false` (or a key of its own,
/// the same on every clone).
///
/// ```
/// use retry_http::tower::CloneRetryLayer;
/// use retry_http::HttpRetry;
/// use retry_runtime::{Jitter, Policy, Verdict};
/// use std::time::Duration;
///
/// #[derive(Clone)]
/// enum Command { Get(String), Put(String, u64) }
///
/// #[derive(Debug)]
/// struct Busy;
/// # impl std::fmt::Display for Busy { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("busy") } }
/// # impl std::error::Error for Busy {}
///
/// let layer = CloneRetryLayer::new(HttpRetry::new(Policy::new().max(3).jitter(Jitter::None)))
///     .classify(|_: &Busy| Verdict::Retry)
///     .on_response(|stored: &Option<u64>| stored.is_none());
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct CloneRetryLayer<C = ByTransient, R = AnyResponse> {
    config: HttpRetry,
    // Whether the options let a request's first attempt be made before its loop, asked once.
    first: Option<FirstAttempt>,
    classify: C,
    judge: R,
}

impl<C, R> fmt::Debug for CloneRetryLayer<C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloneRetryLayer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CloneRetryLayer {
    /// A layer with these options, judging errors by their [`Transient`] implementation and
    /// accepting every answer.
    pub fn new(config: HttpRetry) -> Self {
        CloneRetryLayer {
            first: options::first_attempt(&config),
            config,
            classify: ByTransient,
            judge: AnyResponse,
        }
    }
}

impl<C, R> CloneRetryLayer<C, R> {
    /// Judge the service's errors with `f` (`Fn(&E) -> bool` or `Fn(&E) -> Verdict`) instead of
    /// their [`Transient`] implementation, as the attribute's `on = ...`.
    pub fn classify<F>(self, f: F) -> CloneRetryLayer<F, R> {
        CloneRetryLayer {
            config: self.config,
            first: self.first,
            classify: f,
            judge: self.judge,
        }
    }

    /// Judge the service's answers with `f` (`Fn(&T) -> bool` or `Fn(&T) -> Verdict`), as the
    /// attribute's `on_result`: an answer it rejects is retried, and returned when the retries
    /// run out.
    pub fn on_response<F>(self, f: F) -> CloneRetryLayer<C, F> {
        CloneRetryLayer {
            config: self.config,
            first: self.first,
            classify: self.classify,
            judge: f,
        }
    }

    /// The counts of the requests that the services of this layer handled.
    pub fn counters(&self) -> Arc<Counters> {
        self.config.counters()
    }
}

impl<S, C: Clone, R: Clone> tower_layer::Layer<S> for CloneRetryLayer<C, R> {
    type Service = CloneRetryService<S, C, R>;

    fn layer(&self, inner: S) -> CloneRetryService<S, C, R> {
        CloneRetryService {
            inner,
            layer: Arc::new(self.clone()),
        }
    }
}

/// The service of a [`CloneRetryLayer`]: sends a clone of each request to `S`, and another
/// while the policy and the verdicts allow.
pub struct CloneRetryService<S, C = ByTransient, R = AnyResponse> {
    inner: S,
    layer: Arc<CloneRetryLayer<C, R>>,
}

impl<S: Clone, C, R> Clone for CloneRetryService<S, C, R> {
    fn clone(&self) -> Self {
        CloneRetryService {
            inner: self.inner.clone(),
            layer: Arc::clone(&self.layer),
        }
    }
}

impl<S: fmt::Debug, C, R> fmt::Debug for CloneRetryService<S, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloneRetryService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, Req, C, R> Service<Req> for CloneRetryService<S, C, R>
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + fmt::Debug + Send + 'static,
    Req: Clone + Send + 'static,
    C: ClassifyError<S::Error> + Send + Sync + 'static,
    R: ClassifyResponse<S::Response> + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = CloneResponseFuture<S, Req, C, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        let config = &self.layer.config;
        options::count_request(config);
        // Options that need nothing before the first attempt: it is sent here, and the loop is
        // made only if it fails.
        if let Some(first) = self.layer.first.and_then(|first| first.again_plain()) {
            let attempt = first.run(|| self.inner.call(request.clone()));
            let rest = CloneRest {
                layer: Arc::clone(&self.layer),
                service: self.inner.clone(),
                request,
            };
            return CloneResponseFuture {
                state: State::first(attempt, rest),
            };
        }
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let rest = CloneRest {
            layer: Arc::clone(&self.layer),
            service: ready,
            request,
        };
        CloneResponseFuture {
            state: State::Loop {
                future: Box::pin(rest.send(None, true)),
            },
        }
    }
}

/// What a [`CloneRetryService`]'s request needs after its first attempt: the options, the
/// service for the other attempts, and the request to clone for each.
struct CloneRest<S, Req, C, R> {
    layer: Arc<CloneRetryLayer<C, R>>,
    service: S,
    request: Req,
}

impl<S, Req, C, R> CloneRest<S, Req, C, R>
where
    S: Service<Req>,
    S::Error: Into<BoxError> + fmt::Debug,
    Req: Clone,
    C: ClassifyError<S::Error> + Send + Sync,
    R: ClassifyResponse<S::Response> + Send + Sync,
{
    /// The loop of the request: from its first attempt (`ready`: the service is the one the
    /// caller polled ready), or after it (`first`).
    async fn send(
        mut self,
        first: Option<FirstOutcome<S::Response, S::Error>>,
        ready: bool,
    ) -> Result<S::Response, BoxError> {
        let layer = &*self.layer;
        let outcome = options::send(
            &layer.config,
            None,
            true,
            &|error: &S::Error| layer.classify.verdict(error),
            &|_: &S::Error| false,
            &|answer: &S::Response| layer.judge.verdict(answer),
            first,
            Resending {
                service: &mut self.service,
                ready,
                request: self.request,
                make: Req::clone,
                into: |error| error,
            },
        )
        .await;
        outcome.map_err(into_box_error)
    }
}

impl<S, Req, C, R> Rest<S::Response, S::Error> for CloneRest<S, Req, C, R>
where
    S: Service<Req> + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + fmt::Debug + Send + 'static,
    Req: Clone + Send + 'static,
    C: ClassifyError<S::Error> + Send + Sync + 'static,
    R: ClassifyResponse<S::Response> + Send + Sync + 'static,
{
    fn judge(&self, answer: &S::Response) -> Verdict {
        self.layer.judge.verdict(answer)
    }

    fn accepted(&self) {
        if let Some(first) = self.layer.first {
            first.accepted();
        }
    }

    fn resume(self, first: FirstOutcome<S::Response, S::Error>) -> Loop<S::Response> {
        Box::pin(self.send(Some(first), false))
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`CloneRetryService`]'s call: its first attempt, made before the loop
    /// when the options need nothing before it (no budget, breaker, gate, `aws2026`,
    /// `timeout`, deadline, `notify` or `on_give_up`), so that an answer accepted at once costs
    /// no boxed loop; otherwise the loop, boxed.
    pub struct CloneResponseFuture<S, Req, C, R>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S::Future, CloneRest<S, Req, C, R>, S::Response>,
    }
}

impl<S: Service<Req>, Req, C, R> fmt::Debug for CloneResponseFuture<S, Req, C, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloneResponseFuture")
            .finish_non_exhaustive()
    }
}

// The bounds spelled out (those of `CloneRest`'s `Rest`), so that the rustdoc page names only
// public items.
impl<S, Req, C, R> Future for CloneResponseFuture<S, Req, C, R>
where
    S: Service<Req> + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
    S::Error: Into<BoxError> + fmt::Debug + Send + 'static,
    Req: Clone + Send + 'static,
    C: ClassifyError<S::Error> + Send + Sync + 'static,
    R: ClassifyResponse<S::Response> + Send + Sync + 'static,
{
    type Output = Result<S::Response, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().state.poll(cx)
    }
}
