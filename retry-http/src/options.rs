//! What the tower layer and the reqwest middleware share: the options ([`HttpRetry`]), the
//! rule of which requests may be sent again (method, key, body), the buffering of a body, the
//! counters and the events, and the loop of one request ([`send`]), which is the engine's
//! ([`engine::drive`]).

use ::http::{HeaderMap, HeaderValue, Method};
use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use retry_runtime::TokioTimer;
use retry_runtime::engine::first::FirstAttempt;
use retry_runtime::engine::{self, DynHooks, Event, HookFuture, Operation, Settings};
use retry_runtime::headers::key_from_header;
use retry_runtime::named::Named;
use retry_runtime::{
    AdmissionGate, Aws2026, Aws2026Standard, Backoff, CircuitBreaker, CircuitOpen, Elapsed, GiveUp,
    IdempotencyKey, Jitter, LogLevel, Policy, Rejected, RetryBudget, RetryEvent, Verdict,
};
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An error of any service, boxed: what tower's own middleware returns (`tower::BoxError`).
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The largest request body buffered for replay by default: 64 KiB.
pub const DEFAULT_BODY_LIMIT: usize = 64 * 1024;

/// A `notify` hook, shared by the clones of the options.
type NotifyFn = Arc<dyn Fn(&Resend) + Send + Sync>;
/// An `on_give_up` hook, shared by the clones of the options.
type GiveUpFn = Arc<dyn Fn(&GiveUp) + Send + Sync>;
/// A `route` chooser, shared by the clones of the options.
type RouteFn = Arc<dyn Fn(&Route<'_>) -> Option<Arc<Named>> + Send + Sync>;
/// An async `notify` or `on_give_up` hook (`A` is [`Resend`] or [`GiveUp`]), its future boxed.
type AsyncFn<A> = Arc<dyn Fn(&A) -> HookFuture<'static> + Send + Sync>;
/// An `on_response` judge, shared by the clones of the options.
type ResponseFn = Arc<dyn Fn(http::StatusCode, &HeaderMap) -> Verdict + Send + Sync>;

/// The options of the tower layer and of the reqwest middleware: a [`Policy`] and what the
/// attribute's other options would say (`budget`, `breaker`, `notify`, `on_give_up`,
/// `timeout`, `on_result` as [`on_response`](HttpRetry::on_response), `nested`, `log_level`),
/// the body limit and whether to add an idempotency key. Cheap to clone (the shared parts are
/// behind `Arc`s).
///
/// The attribute's keys that it does not offer, and why, are in the crate's guide ("The
/// attribute's options"); a test holds the table to the attribute's keys.
#[derive(Clone)]
pub struct HttpRetry {
    pub(crate) policy: Policy,
    pub(crate) name: &'static str,
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) breaker: Option<Arc<CircuitBreaker>>,
    pub(crate) gate: Option<Arc<AdmissionGate>>,
    pub(crate) aws: Option<Arc<Aws2026Standard>>,
    pub(crate) body_limit: usize,
    pub(crate) add_key: bool,
    pub(crate) counters: Arc<Counters>,
    pub(crate) notify: Option<NotifyFn>,
    pub(crate) on_give_up: Option<GiveUpFn>,
    pub(crate) notify_async: Option<AsyncFn<Resend>>,
    pub(crate) on_give_up_async: Option<AsyncFn<GiveUp>>,
    pub(crate) on_response: Option<ResponseFn>,
    pub(crate) route: Option<RouteFn>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) nested_retry: bool,
    pub(crate) level: LogLevel,
}

impl fmt::Debug for HttpRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRetry")
            .field("policy", &self.policy)
            .field("name", &self.name)
            .field("budget", &self.budget.is_some())
            .field("breaker", &self.breaker.is_some())
            .field("gate", &self.gate.as_ref().map(|gate| gate.get_name()))
            .field("body_limit", &self.body_limit)
            .field("add_key", &self.add_key)
            .field("timeout", &self.timeout)
            .field("route", &self.route.is_some())
            .field("nested_retry", &self.nested_retry)
            .field("log_level", &self.level)
            .finish_non_exhaustive()
    }
}

impl HttpRetry {
    /// Retries with `policy` (its `max`, backoff, jitter, `max_delay` and `deadline`), under the
    /// name `"http"` in events.
    pub fn new(policy: Policy) -> Self {
        HttpRetry {
            policy,
            name: "http",
            budget: None,
            breaker: None,
            gate: None,
            aws: None,
            body_limit: DEFAULT_BODY_LIMIT,
            add_key: false,
            counters: Arc::default(),
            notify: None,
            on_give_up: None,
            notify_async: None,
            on_give_up_async: None,
            on_response: None,
            route: None,
            timeout: None,
            nested_retry: false,
            level: LogLevel::Error,
        }
    }

    /// `max = 3`: retries after the first attempt ([`Policy::max`]).
    pub fn max(mut self, retries: u32) -> Self {
        self.policy = self.policy.max(retries);
        self
    }

    /// `attempts = 4`: the same limit counted as attempts, the first one included.
    pub fn attempts(self, attempts: u32) -> Self {
        self.max(attempts.saturating_sub(1))
    }

    /// `base = "1s"`: the pause before the first retry ([`Policy::base`]).
    pub fn base(mut self, base: Duration) -> Self {
        self.policy = self.policy.base(base);
        self
    }

    /// `factor = 2`: the growth of the pause per retry ([`Policy::factor`]).
    pub fn factor(mut self, factor: f64) -> Self {
        self.policy = self.policy.factor(factor);
        self
    }

    /// `backoff = exponential`: how the pause grows ([`Policy::backoff`]).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.policy = self.policy.backoff(backoff);
        self
    }

    /// `throttle_base = "1s"`: the pause before a retry after a throttled answer (a 429, a 503
    /// with `Retry-After`), growing from there as `base` does ([`Policy::throttle_base`]; a
    /// `Retry-After` stays a floor above it).
    pub fn throttle_base(mut self, throttle_base: Duration) -> Self {
        self.policy = self.policy.throttle_base(throttle_base);
        self
    }

    /// `max_delay = "30s"`: no single pause is longer, `Retry-After` included
    /// ([`Policy::max_delay`]); a `Retry-After` longer than this gives up at once.
    pub fn max_delay(mut self, max_delay: Duration) -> Self {
        self.policy = self.policy.max_delay(max_delay);
        self
    }

    /// `deadline = "10s"`: the time budget of a request from its first attempt, attempts and
    /// pauses included ([`Policy::deadline`]).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.policy = self.policy.deadline(deadline);
        self
    }

    /// `jitter = full`, ...: how each pause is randomised ([`Policy::jitter`]).
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.policy = self.policy.jitter(jitter);
        self
    }

    /// `nested = retry`: retry even when a layer above retries this work (an annotated function
    /// or a `Retrier` around the request); by default such a request makes one attempt and
    /// leaves the retrying to that layer.
    pub fn nested_retry(mut self) -> Self {
        self.nested_retry = true;
        self
    }

    /// `log_level = "warn"`: the level of the one event that ends a request that failed after
    /// retrying (`ERROR` by default).
    pub fn log_level(mut self, level: impl Into<LogLevel>) -> Self {
        self.level = level.into();
        self
    }

    /// `on_result = f`, for answers: judge each response's status and headers with `f` instead
    /// of the status table (408, 429, 500, 502, 503, 504 retried, `Retry-After` a floor). A
    /// response `f` rejects (a [`Verdict`] that retries) is retried, and returned when the
    /// retries run out. Asked only about requests that may be sent again.
    pub fn on_response(
        mut self,
        f: impl Fn(http::StatusCode, &HeaderMap) -> Verdict + Send + Sync + 'static,
    ) -> Self {
        self.on_response = Some(Arc::new(f));
        self
    }

    /// The judge of a response: [`on_response`](HttpRetry::on_response)'s, or the status table.
    #[inline]
    pub(crate) fn judge(&self, status: http::StatusCode, headers: &HeaderMap) -> Verdict {
        match &self.on_response {
            Some(judge) => judge(status, headers),
            // AWS's conventions only for a configuration that asked for them.
            None if self.aws.is_some() => Aws2026::response_verdict(status, headers),
            // Inline: a success is one compare of its status (the headers are read only for a
            // transient one).
            None => retry_runtime::integrations::http::status_verdict(status, headers),
        }
    }

    /// The name the loop's tracing events and [`RetryEvent::function`] carry, for example the
    /// service called: `"payments"`.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; each request deposits into it.
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, requests fail at once with
    /// [`CircuitOpen`] (boxed) without being sent; every attempt feeds it.
    pub fn breaker(mut self, breaker: Arc<CircuitBreaker>) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; one it
    /// sheds fails at once with [`Rejected`] (boxed) without being sent, and is not retried.
    /// Every attempt sent reports its answer to the gate: a 429, or a 503 with `Retry-After`,
    /// as shed load (a throttling verdict of the status table or of
    /// [`on_response`](HttpRetry::on_response)), a timeout as such, anything else as handled.
    /// Shared like a breaker: the clones of these options, and every layer made from them,
    /// ask the same gate.
    pub fn gate(mut self, gate: Arc<AdmissionGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// `aws2026 = AWS`: the AWS SDKs' updated standard mode decides after each failure, in
    /// place of the policy's `max` and pauses, with its retry quota shared by every clone of
    /// these options (see [`Aws2026Standard`]).
    ///
    /// Answers are then judged by AWS's conventions too
    /// ([`Aws2026::response_verdict`], unless [`on_response`](HttpRetry::on_response) judges
    /// them): an `x-amzn-ErrorType` that names a throttling error code (`ThrottlingException`,
    /// `SlowDown`, ... in any status, a `400` included, with or without the `:http://...`
    /// suffix) is a throttled attempt (1 s base, 5 tokens), as is a 429; `x-amz-retry-after`
    /// (milliseconds, or else `Retry-After`) is the server's pause, held to
    /// [computed, computed + 5 s]. A long-polling policy ([`Aws2026::long_polling`]) whose quota
    /// is empty pauses for its backoff before it returns the answer.
    pub fn aws2026(mut self, aws: Arc<Aws2026Standard>) -> Self {
        self.aws = Some(aws);
        self
    }

    /// The largest body buffered so that a request can be sent again ([`DEFAULT_BODY_LIMIT`],
    /// 64 KiB, by default). A body whose length is not known in advance (a stream) or is larger
    /// is sent once, as it is, and never retried: [`SendOnce`] says why.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.body_limit = bytes;
        self
    }

    /// Give a POST or PATCH (any method that is not idempotent) that carries no
    /// `Idempotency-Key` a fresh one ([`IdempotencyKey::new`], a UUID v4), the same on every
    /// attempt, so that it may be retried. Without this, such a request is retried only when
    /// it provably never reached the server.
    ///
    /// The header is sent as the IETF draft writes it, a structured-field string: the UUID in
    /// double quotes (`Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`). A server that
    /// reads the raw header sees the quotes; this crate's own decoder
    /// ([`key_from_header`](retry_runtime::headers::key_from_header)) accepts the key with or
    /// without them.
    pub fn add_idempotency_key(mut self) -> Self {
        self.add_key = true;
        self
    }

    /// `notify = f`: called before each pause with what is about to be resent.
    pub fn notify(mut self, f: impl Fn(&Resend) + Send + Sync + 'static) -> Self {
        self.notify = Some(Arc::new(f));
        self
    }

    /// `on_give_up = f`: called once when the loop gives up on a request that it could have
    /// retried (retries used up, the deadline, a `Retry-After` longer than `max_delay`, the
    /// budget empty, the breaker open), with why, the attempts and the time spent, as the
    /// attribute's `on_give_up`. A permanent failure (a 404, an error that is not transient, a
    /// request that may not be sent again) is an answer, and nobody hears a [`GiveUp`] for it.
    pub fn on_give_up(mut self, f: impl Fn(&GiveUp) + Send + Sync + 'static) -> Self {
        self.on_give_up = Some(Arc::new(f));
        self
    }

    /// `notify = f` with an async `f`, in place of a sync [`notify`](HttpRetry::notify): the
    /// loop awaits `f`'s future before the pause it announces, inside that pause (whose rest it
    /// then takes) and the policy's deadline (a hook still running then is dropped; without a
    /// deadline the loop waits for it as long as it runs), as the attribute's async `notify`.
    /// A panic in it is contained: the request goes on as if the hook had returned, and the
    /// panic is logged at `ERROR` and counted ([`Counters::hooks_panicked`]). The future owns
    /// what it needs (`Send + 'static`).
    pub fn notify_async<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(&Resend) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.notify_async = Some(Arc::new(move |resend: &Resend| -> HookFuture<'static> {
            Box::pin(f(resend))
        }));
        self
    }

    /// `on_give_up = f` with an async `f`, in place of a sync
    /// [`on_give_up`](HttpRetry::on_give_up): awaited before the call returns, as long as it
    /// runs (the deadline bounds the retries, not this hook). A panic in it is contained (the
    /// answer is returned all the same), logged at `ERROR` and counted
    /// ([`Counters::hooks_panicked`]).
    pub fn on_give_up_async<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(&GiveUp) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_give_up_async = Some(Arc::new(move |why: &GiveUp| -> HookFuture<'static> {
            Box::pin(f(why))
        }));
        self
    }

    /// `timeout = limit`: each attempt is abandoned after `limit` (clipped to the time left
    /// before the policy's deadline), as the attribute's `timeout`. The abandoned attempt fails
    /// with [`Elapsed`](retry_runtime::Elapsed), which counts as transient for a request that may be
    /// sent again, and is the caller's error (boxed) when it is the last. A request that may not
    /// be sent again (a POST without a key) is not resent after a timeout: it may have reached
    /// the server.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// A policy per host or per route, chosen per request: `f` sees the request's method, host
    /// and path, and names the [`Named`] policy it runs under (a registry's lookup, such as
    /// `retry-config`'s `Registry::get`, so that a reload reaches the next request), or `None`
    /// for these options' own. The request holds what `f` gave for all its attempts.
    ///
    /// Under a named policy, the request runs with its timings, its name in the events and the
    /// metrics, and its budget, breaker and timeout where it has them (shared with every door
    /// that uses the name), these options' own where it has none; the rest (the gate,
    /// `aws2026`, the hooks, the body limit, the keys, the counters) stays these options'.
    /// With a route, every request runs in the loop (no first attempt before it: its settings
    /// are known only once the request is).
    ///
    /// ```
    /// use retry_http::{HttpRetry, Route};
    /// use retry_runtime::named::Named;
    /// use retry_runtime::Policy;
    /// use std::sync::Arc;
    ///
    /// let payments = Arc::new(Named::new("payments", Policy::new().max(5)));
    /// let config = HttpRetry::new(Policy::new().max(2))
    ///     .route(move |route: &Route<'_>| {
    ///         (route.host == Some("payments.internal") && route.path.starts_with("/v1/"))
    ///             .then(|| payments.clone())
    ///     });
    /// # let _ = config;
    /// ```
    pub fn route(
        mut self,
        f: impl Fn(&Route<'_>) -> Option<Arc<Named>> + Send + Sync + 'static,
    ) -> Self {
        self.route = Some(Arc::new(f));
        self
    }

    /// The counts of this configuration's requests, retries and requests sent once, shared by
    /// every clone of it (and of the layer or middleware made from it).
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }
}

/// What [`HttpRetry::route`] chooses a request's named policy by.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Route<'a> {
    /// The request's method.
    pub method: &'a Method,
    /// The host the request goes to, without the port: the URI's, else the `Host` header's.
    pub host: Option<&'a str>,
    /// The URI's path.
    pub path: &'a str,
}

/// The named policy `config`'s [`route`](HttpRetry::route) chooses for a request, if it has
/// one (the request's host read only then).
#[inline]
pub(crate) fn chosen<'r>(
    config: &HttpRetry,
    method: &Method,
    host: impl FnOnce() -> Option<&'r str>,
    path: &str,
) -> Option<Arc<Named>> {
    let choose = config.route.as_ref()?;
    choose(&Route {
        method,
        host: host(),
        path,
    })
}

/// What `notify` hears before each pause of the tower layer or the reqwest middleware.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resend {
    /// The loop's own event: the attempt that failed, the pause, the time spent.
    pub event: RetryEvent,
    /// The failed attempt provably never reached the server (a refused connection, a DNS or
    /// connect failure): it is resent even when the request could not be retried otherwise (a
    /// POST without a key), as gRPC's transparent retries are.
    pub never_sent: bool,
}

/// Why a request was sent once and never retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendOnce {
    /// Its body's length was not known in advance (a stream): buffering it could end past the
    /// limit with part of it consumed, so it is not buffered.
    UnknownLength,
    /// Its body is longer than the limit ([`HttpRetry::body_limit`]).
    OverLimit {
        /// The body's length, or the least it will be.
        length: u64,
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for SendOnce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendOnce::UnknownLength => f.write_str(
                "the body's length is not known in advance (a stream), so it cannot be buffered to be sent again",
            ),
            SendOnce::OverLimit { length, limit } => write!(
                f,
                "the body ({length} bytes) is longer than the {limit}-byte buffer limit (`body_limit`)"
            ),
        }
    }
}

/// The counts of the requests a tower layer or a reqwest middleware handled, shared by its
/// clones: the runtime's one `Counters` (`retry_runtime::engine::Counters`), which every door
/// hands out. These doors count [`requests`](Counters::requests),
/// [`never_sent_retries`](Counters::never_sent_retries), [`sent_once`](Counters::sent_once) and
/// [`without_key`](Counters::without_key), and hand the counts to the engine's loop
/// (`Settings::sink`), which counts each [`retry`](Counters::retries) and each attempt the
/// [`gate`](HttpRetry::gate) sheds ([`gate_rejected`](Counters::gate_rejected)), once.
pub use retry_runtime::engine::Counters;

/// Whether a method is idempotent (RFC 9110 §9.2.2): GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
/// Any other (POST, PATCH, CONNECT, an extension method) needs an idempotency key to be retried.
#[inline]
pub(crate) fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Counts one request.
#[inline]
pub(crate) fn count_request(config: &HttpRetry) {
    engine::report(config.name, Event::Call, &*config.counters);
}

/// Whether a request may be sent again after it reached the server: an idempotent method, or
/// a valid `Idempotency-Key` (added here if `add_key` and there is none). Counts one request.
/// Inline: an idempotent request (a GET) is a count and a compare of its method.
#[inline]
pub(crate) fn may_resend(config: &HttpRetry, method: &Method, headers: &mut HeaderMap) -> bool {
    count_request(config);
    idempotent(method) || keyed(config, method, headers)
}

/// [`may_resend`] for a method that is not idempotent: whether the request has a valid key, or
/// gets one.
fn keyed(config: &HttpRetry, method: &Method, headers: &mut HeaderMap) -> bool {
    let present = headers.get(IdempotencyKey::HEADER);
    if present.is_none() && config.add_key {
        let key = retry_runtime::headers::key_header_value(&IdempotencyKey::new());
        // A UUID in quotes is always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&key) {
            headers.insert(IdempotencyKey::HEADER, value);
            return true;
        }
    }
    let keyed = key_from_header(headers.get(IdempotencyKey::HEADER)).is_ok();
    if !keyed {
        let method = method.as_str();
        engine::report(config.name, Event::WithoutKey { method }, &*config.counters);
    }
    keyed
}

/// A body read whole, to be sent again as often as needed.
#[derive(Clone, Debug)]
pub(crate) struct Buffered {
    // `None` for a body that had ended before it was read: nothing to clone or drop.
    pub(crate) data: Option<Bytes>,
    // Boxed: trailers are rare, and a request's future holds this (`Buffered` is 40 bytes, not
    // 128).
    pub(crate) trailers: Option<Box<HeaderMap>>,
}

/// Reads `body` whole if its length is known and within `limit`; otherwise gives it back
/// untouched with the reason, so that it is sent once as it is and nothing of it is lost.
pub(crate) async fn buffer<B: Body>(
    body: B,
    limit: usize,
) -> Result<Result<Buffered, (B, SendOnce)>, B::Error> {
    // A body that says it has ended (an empty one) has nothing to read, trailers included.
    if body.is_end_stream() {
        return Ok(Ok(Buffered::empty()));
    }
    let hint = body.size_hint();
    let over = SendOnce::OverLimit {
        length: hint.lower(),
        limit,
    };
    match hint.upper() {
        Some(length) if length <= limit as u64 => {
            let collected = body.collect().await?;
            let trailers = collected.trailers().cloned().map(Box::new);
            Ok(Ok(Buffered {
                data: Some(collected.to_bytes()),
                trailers,
            }))
        }
        Some(_) => Ok(Err((body, over))),
        None if hint.lower() > limit as u64 => Ok(Err((body, over))),
        None => Ok(Err((body, SendOnce::UnknownLength))),
    }
}

pin_project_lite::pin_project! {
    /// A request body as the tower layer hands it to the service below: buffered, sent again
    /// on each attempt, or the original body, sent once.
    #[project = ReplayProj]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum ReplayBody<B> {
        /// A body read whole (within the limit), with its trailers (boxed: they are rare, and
        /// the service below moves the request about).
        Buffered { data: Option<Bytes>, trailers: Option<Box<HeaderMap>> },
        /// A body that could not be buffered ([`SendOnce`]): the request is sent once.
        Once { #[pin] body: B },
    }
}

impl Buffered {
    /// The body of a request whose body had ended before it was read: nothing.
    pub(crate) fn empty() -> Self {
        Buffered {
            data: None,
            trailers: None,
        }
    }
}

impl<B> ReplayBody<B> {
    pub(crate) fn buffered(buffered: &Buffered) -> Self {
        ReplayBody::Buffered {
            data: buffered.data.clone(),
            trailers: buffered.trailers.clone(),
        }
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayBody::Buffered { data, .. } => f
                .debug_struct("Buffered")
                .field("len", &data.as_ref().map_or(0, Bytes::len))
                .finish_non_exhaustive(),
            ReplayBody::Once { .. } => f.write_str("Once"),
        }
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        use bytes::Buf;
        use std::task::Poll;
        match self.project() {
            ReplayProj::Buffered { data, trailers } => {
                if let Some(data) = data.take().filter(|d| !d.is_empty()) {
                    return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
                }
                Poll::Ready(trailers.take().map(|t| Ok(http_body::Frame::trailers(*t))))
            }
            ReplayProj::Once { body } => body.poll_frame(cx).map(|frame| {
                frame.map(|frame| {
                    frame
                        .map(|frame| frame.map_data(|mut d| d.copy_to_bytes(d.remaining())))
                        .map_err(Into::into)
                })
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplayBody::Buffered { data, trailers } => {
                data.as_ref().is_none_or(Bytes::is_empty) && trailers.is_none()
            }
            ReplayBody::Once { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ReplayBody::Buffered { data, .. } => {
                http_body::SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            ReplayBody::Once { body } => body.size_hint(),
        }
    }
}

/// Reports a request sent once, and why.
pub(crate) fn sent_once(config: &HttpRetry, why: SendOnce) {
    engine::report(
        config.name,
        Event::SentOnce { reason: &why },
        &*config.counters,
    );
}

/// The error of one attempt inside the loop: the service's, the breaker's refusal, or the
/// attempt's `timeout`.
pub(crate) enum Failed<E> {
    Inner(E),
    Open(CircuitOpen),
    Shed(Rejected),
    Elapsed(Elapsed),
}

/// The error as the loop's events show it: the service's own, not the wrapper.
impl<E: fmt::Debug> fmt::Debug for Failed<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failed::Inner(error) => error.fmt(f),
            Failed::Open(open) => open.fmt(f),
            Failed::Shed(rejected) => rejected.fmt(f),
            Failed::Elapsed(elapsed) => elapsed.fmt(f),
        }
    }
}

impl<E> From<Elapsed> for Failed<E> {
    fn from(elapsed: Elapsed) -> Self {
        Failed::Elapsed(elapsed)
    }
}

impl<E> From<CircuitOpen> for Failed<E> {
    fn from(open: CircuitOpen) -> Self {
        Failed::Open(open)
    }
}

impl<E> From<Rejected> for Failed<E> {
    fn from(rejected: Rejected) -> Self {
        Failed::Shed(rejected)
    }
}

/// Before each pause: counts a never-sent retry and tells `notify`.
pub(crate) fn heard(config: &HttpRetry, never_sent: bool, event: &RetryEvent) {
    retried(config, never_sent, event.attempt);
    if let Some(notify) = &config.notify {
        notify(&Resend {
            event: *event,
            never_sent,
        });
    }
}

/// Before each pause: reports a retry of attempt number `attempt` that never reached the
/// server. The retry itself the loop reports to the door's counters ([`settings`]'s sink).
pub(crate) fn retried(config: &HttpRetry, never_sent: bool, attempt: u32) {
    if never_sent {
        engine::report(config.name, Event::NeverSent { attempt }, &*config.counters);
    }
}

/// When the loop gives up: tells `on_give_up`.
pub(crate) fn gave_up(config: &HttpRetry, why: &GiveUp) {
    if let Some(on_give_up) = &config.on_give_up {
        on_give_up(why);
    }
}

/// The settings of one request's loop: under its named policy if [`HttpRetry::route`] chose
/// one.
pub(crate) fn settings<'a>(config: &'a HttpRetry, named: Option<&'a Named>) -> Settings<'a> {
    let budget = config.budget.as_deref();
    let breaker = config.breaker.as_deref();
    let settings = match named {
        None => Settings::new(&config.policy)
            .name(config.name)
            .budget(budget)
            .breaker(breaker)
            .timeout(config.timeout),
        Some(named) => Settings::new(named.policy())
            .name(named.name())
            .budget(named.get_budget().or(budget))
            .breaker(named.get_breaker().or(breaker))
            .timeout(named.get_timeout().or(config.timeout)),
    };
    settings
        .aws2026(config.aws.as_deref())
        .nested_retry(config.nested_retry)
        .log_level(config.level)
        .sink(&*config.counters)
}

/// Whether a request's first attempt may be made before its loop ([`FirstAttempt`]): its
/// settings allow it, no hook hears the time (the hooks' times would start after it), and no
/// gate admits the attempt, and no `route` chooses its settings per request.
pub(crate) fn first_attempt(config: &HttpRetry) -> Option<FirstAttempt> {
    if config.notify.is_some()
        || config.on_give_up.is_some()
        || config.notify_async.is_some()
        || config.on_give_up_async.is_some()
        || config.gate.is_some()
        || config.route.is_some()
    {
        return None;
    }
    FirstAttempt::new(&settings(config, None))
}

/// A first attempt made before the loop ([`FirstAttempt`]) that was not accepted: its outcome,
/// and for an answer, the verdict that rejected it (so that the judge is not asked twice).
pub(crate) type FirstOutcome<T, E> = (Result<T, E>, Option<Verdict>);

/// The loop of one request, on the engine: `body` once per attempt, its errors judged by
/// `classify` (a request that may be sent again) or by `never_sent` (any request: one that
/// never reached the server is resent even without a key), its answers by `judge` (a request
/// that may be sent again; every answer is accepted for one that may not), a timed-out attempt
/// retried only if the request may be sent again (it may have reached the server). The retries
/// are counted, and `notify` and `on_give_up` hear them. With `first`, the first attempt was
/// made before the loop ([`first_attempt`]) and the loop takes it over
/// ([`FirstAttempt::drive_after`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send<T, E: fmt::Debug>(
    config: &HttpRetry,
    named: Option<&Named>,
    may_resend: bool,
    classify: &(dyn Fn(&E) -> Verdict + Sync),
    never_sent: &(dyn Fn(&E) -> bool + Sync),
    judge: &(dyn Fn(&T) -> Verdict + Sync),
    first: Option<FirstOutcome<T, E>>,
    body: impl Operation<T, E>,
) -> Result<T, Failed<E>> {
    let verdict = |failed: &Failed<E>| match failed {
        Failed::Inner(error) if never_sent(error) => Verdict::Retry,
        Failed::Inner(error) if may_resend => classify(error),
        Failed::Elapsed(_) if may_resend => Verdict::Retry,
        _ => Verdict::Fail,
    };
    // The verdict on the first answer when it was judged before the loop, taken by the loop's
    // first judgement.
    let judged = Mutex::new(first.as_ref().and_then(|(_, verdict)| *verdict));
    let accept = |answer: &T| {
        if let Some(verdict) = judged.lock().ok().and_then(|mut judged| judged.take()) {
            verdict
        } else if may_resend {
            judge(answer)
        } else {
            Verdict::Fail
        }
    };
    let notify = |outcome: Result<&T, &Failed<E>>, event: &RetryEvent| {
        let never = matches!(outcome, Err(Failed::Inner(error)) if never_sent(error));
        heard(config, never, event)
    };
    let give_up = |_: Result<&T, &Failed<E>>, why: &GiveUp| gave_up(config, why);
    let hooks = DynHooks::new(&verdict).on_result(Some(&accept));
    // Without the user's `notify`, nobody reads the event's times: no clock read per request.
    let hooks = match config.notify {
        Some(_) => hooks.notify(Some(&notify)),
        None => hooks.notify_untimed(Some(&notify)),
    };
    let hooks = hooks
        .on_give_up(config.on_give_up.is_some().then_some(&give_up as _))
        .gate(config.gate.as_deref());
    // The async hooks: the retry counted as the sync `notify` counts it, then the user's future.
    let notify_async = |outcome: Result<&T, &Failed<E>>, event: &RetryEvent| {
        let never = matches!(outcome, Err(Failed::Inner(error)) if never_sent(error));
        retried(config, never, event.attempt);
        let resend = Resend {
            event: *event,
            never_sent: never,
        };
        config
            .notify_async
            .as_ref()
            .map_or_else(|| Box::pin(std::future::ready(())) as _, |f| f(&resend))
    };
    let give_up_async = |_: Result<&T, &Failed<E>>, why: &GiveUp| {
        config
            .on_give_up_async
            .as_ref()
            .map_or_else(|| Box::pin(std::future::ready(())) as _, |f| f(why))
    };
    let hooks = hooks
        .notify_async(config.notify_async.is_some().then_some(&notify_async as _))
        .on_give_up_async(
            config
                .on_give_up_async
                .is_some()
                .then_some(&give_up_async as _),
        );
    let settings = settings(config, named);
    match first {
        None => engine::drive(&settings, hooks, TokioTimer, Inner(body)).await,
        Some((outcome, _)) => {
            let outcome = outcome.map_err(Failed::Inner);
            FirstAttempt::drive_after(&settings, hooks, TokioTimer, outcome, Inner(body)).await
        }
    }
}

/// A door's body, its errors the loop's [`Failed::Inner`].
struct Inner<B>(B);

impl<T, E, B: Operation<T, E>> Operation<T, Failed<E>> for Inner<B> {
    fn attempt(&mut self) -> impl Future<Output = Result<T, Failed<E>>> {
        let attempt = self.0.attempt();
        async move { attempt.await.map_err(Failed::Inner) }
    }
}
