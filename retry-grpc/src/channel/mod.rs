//! The door: a tower layer under a tonic `Channel` that retries and hedges every call as its
//! method's config in the standard service config says (gRFC A6).
//!
//! ```no_run
//! use retry_grpc::channel::GrpcRetryLayer;
//! use tower::ServiceBuilder;
//! # mod pb { pub mod echo_client { #[derive(Clone)] pub struct EchoClient<T>(T);
//! #   impl<T> EchoClient<T> { pub fn new(t: T) -> Self { EchoClient(t) } } } }
//! use pb::echo_client::EchoClient;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let channel = tonic::transport::Channel::from_static("http://echo.internal:50051").connect_lazy();
//! let channel = ServiceBuilder::new()
//!     .layer(GrpcRetryLayer::from_service_config(r#"{
//!       "methodConfig": [{"name": [{"service": "pkg.Echo"}],
//!         "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
//!                         "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
//!       "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//!     }"#)?)
//!     .service(channel);
//! let client = EchoClient::new(channel); // every method retries per the config
//! # let _ = client; Ok(()) }
//! ```
//!
//! What it does per call is in the [crate's guide](crate#the-door-step-by-step). Hooks that
//! await ([`GrpcRetryLayer::notify_async`], [`GrpcRetryLayer::on_give_up_async`]) hear a call
//! under a retry policy: each retry before its pause, and the end of a call that gave up.

mod attempt;
mod body;
mod call;
mod decide;

use crate::backoff::Jitter;
use crate::{ConfigError, RetryThrottle, ServiceConfig, ThrottleRegistry};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use retry_runtime::engine::HookFuture;
use retry_runtime::named::Named;
use retry_runtime::{CircuitBreaker, GiveUp, RetryBudget, RetryEvent};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tower_service::Service;

/// An error of any service, boxed: what tower's middleware and tonic's generated clients take
/// (`tower::BoxError`, `tonic`'s `StdError`). A `tonic::Status` inside (a deadline the door
/// enforced) becomes the call's status.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The largest request kept for replay by default: 256 KiB, C-core's
/// `grpc.per_rpc_retry_buffer_size`.
pub const DEFAULT_BUFFER_LIMIT: usize = 256 * 1024;

/// The door's layer: wraps a tonic `Channel` (or any service of
/// `http::Request<tonic::body::Body>`) in a [`GrpcRetry`] that retries and hedges each call as
/// its method's config says. Cheap to clone; the services it makes share its [`Counters`].
///
/// **Throttling is per server**, as gRFC A6 keeps one `retryThrottling` count per server name:
/// each service the layer makes (each channel it wraps) has its own count, and within a service,
/// calls whose request URI names an authority (a client made `with_origin`) have one count per
/// authority. So one layer, cloned over channels to two servers, throttles them apart: one
/// server's failures never stop the other's retries. Give the server's name with
/// [`target`](Self::target) to share one count across layers and channels to the same server,
/// as C-core does for every channel of one target.
///
/// ```
/// use retry_grpc::backoff::Jitter;
/// use retry_grpc::channel::GrpcRetryLayer;
/// use retry_grpc::{MethodConfig, MethodName, RetryPolicy, ServiceConfig};
/// use std::time::Duration;
/// use tonic::Code;
///
/// // The same config built in code.
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .initial_backoff(Duration::from_millis(100))
///     .max_backoff(Duration::from_secs(1))
///     .backoff_multiplier(2.0)
///     .retryable_status_codes([Code::Unavailable])
///     .build()?;
/// let config = ServiceConfig::builder()
///     .method_config(MethodConfig::builder().name(MethodName::service("pkg.Echo")).retry_policy(policy).build()?)
///     .build()?;
/// let layer = GrpcRetryLayer::new(config)
///     .jitter(Jitter::CCore) // pause as a C-core client beside it does
///     .target("dns:///echo.internal:50051"); // share the throttle with every layer to that server
/// # let _ = layer;
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct GrpcRetryLayer {
    config: ServiceConfig,
    jitter: Jitter,
    buffer_limit: usize,
    /// The throttle of the calls: the server name's when one was given ([`target`](Self::target)),
    /// else `None` here and a new one in each service's copy of the layer ([`PerServer`]).
    throttle: Option<Arc<RetryThrottle>>,
    /// Whether `throttle` is a named server's, shared by every service.
    named: bool,
    name: &'static str,
    budget: Option<Arc<RetryBudget>>,
    breaker: Option<Arc<CircuitBreaker>>,
    /// [`named`](Self::named)'s lookup, asked once per call.
    lookup: Option<Arc<dyn Fn() -> Option<Arc<Named>> + Send + Sync>>,
    counters: Arc<Counters>,
    /// The async `notify`, if any ([`notify_async`](Self::notify_async)).
    notify: Option<HookFn<RetryEvent>>,
    /// The async `on_give_up`, if any ([`on_give_up_async`](Self::on_give_up_async)).
    on_give_up: Option<HookFn<GiveUp>>,
}

/// An async hook of the layer, shared by its copies: it hears `&A` and returns its future.
type HookFn<A> = Arc<dyn Fn(&A) -> HookFuture<'static> + Send + Sync>;

impl fmt::Debug for GrpcRetryLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcRetryLayer")
            .field("config", &self.config)
            .field("jitter", &self.jitter)
            .field("buffer_limit", &self.buffer_limit)
            .field("throttle", &self.throttle)
            .field("named", &self.named)
            .field("name", &self.name)
            .field("budget", &self.budget.is_some())
            .field("breaker", &self.breaker.is_some())
            .field("lookup", &self.lookup.is_some())
            .field("notify", &self.notify.is_some())
            .field("on_give_up", &self.on_give_up.is_some())
            .finish_non_exhaustive()
    }
}

impl GrpcRetryLayer {
    /// A door with `config`: A6's backoff ([`Jitter::A6`]), a 256 KiB replay buffer, and, if the
    /// config has `retryThrottling`, one token count per server: per service this layer makes
    /// (per channel), and per authority of the request URIs within it, unless
    /// [`target`](Self::target) names the server.
    pub fn new(config: ServiceConfig) -> Self {
        GrpcRetryLayer {
            config,
            jitter: Jitter::A6,
            buffer_limit: DEFAULT_BUFFER_LIMIT,
            throttle: None,
            named: false,
            name: "grpc",
            budget: None,
            breaker: None,
            lookup: None,
            counters: Arc::new(Counters::default()),
            notify: None,
            on_give_up: None,
        }
    }

    /// A door with the service config in `json`, read as the other gRPC implementations read it
    /// ([`ServiceConfig::from_json`]); an invalid config is an error naming the field and the
    /// rule.
    pub fn from_service_config(json: &str) -> Result<Self, ConfigError> {
        ServiceConfig::from_json(json).map(Self::new)
    }

    /// The backoff's jitter form: [`Jitter::A6`] (the default: what A6 writes, grpc-go and
    /// grpc-java do) or [`Jitter::CCore`] (±20 %, as `grpcio` and C++ clients pause). See
    /// [`backoff`](crate::backoff).
    pub fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The largest request (the bytes of its messages) kept for replay, per call: a request
    /// that grows past it is sent once, and the call is committed to the attempt in flight.
    pub fn buffer_limit(mut self, bytes: usize) -> Self {
        self.buffer_limit = bytes;
        self
    }

    /// The server's name (the channel's target, such as `dns:///echo.internal:50051`): every
    /// call of every service this layer makes counts in the retry throttle of that name in the
    /// process's [`ThrottleRegistry`], shared with every other layer given the same name, as
    /// C-core keeps one count per target for all its channels. Give it to a layer used for one
    /// server only: the calls to any other server would count there too.
    pub fn target(self, target: &str) -> Self {
        self.throttle_registry(ThrottleRegistry::global(), target)
    }

    /// [`target`](Self::target) in another registry (a test's own).
    pub fn throttle_registry(mut self, registry: &ThrottleRegistry, target: &str) -> Self {
        self.throttle = self
            .config
            .retry_throttling()
            .map(|throttling| registry.get(target, throttling));
        self.named = true;
        self
    }

    /// The throttle every service of this layer shares: the server's given to
    /// [`target`](Self::target), if the config has `retryThrottling`. `None` without a target:
    /// each service has its own ([`GrpcRetry::throttle`]).
    pub fn throttle(&self) -> Option<&Arc<RetryThrottle>> {
        self.throttle.as_ref()
    }

    /// The name the engine's events and metrics give these calls (`"grpc"` by default).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The library's retry budget on top of A6's throttle: each retry and each hedged copy
    /// also draws from it (an empty budget sends no more copies), and each call deposits in it.
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The library's circuit breaker: it admits each attempt and each hedged copy, and hears
    /// each one's failure; while open, no retry or copy is sent, and a call is refused before its
    /// first attempt (with the breaker's `CircuitOpen` as its error).
    pub fn breaker(mut self, breaker: Arc<CircuitBreaker>) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// A named policy beside the service config: `lookup` is asked once per call (a registry's
    /// `get`, such as `retry-config`'s `Registry::get`, or
    /// [`named::resolve`](retry_runtime::named::resolve) for the process's resolver), and the
    /// call holds what it gave for all its attempts and copies, so that a reload reaches the
    /// next call and never one under way.
    ///
    /// The service config still says when and how often a method is retried or hedged (A6);
    /// the name brings the budget and the breaker that every door using it shares (the
    /// `Retrier`, the HTTP doors, `#[retry(policy = "...")]`), in place of this layer's own
    /// [`budget`](Self::budget) and [`breaker`](Self::breaker) when it has them. A call of a
    /// method without a policy makes one attempt, as without a name.
    ///
    /// ```
    /// use retry_grpc::channel::GrpcRetryLayer;
    /// use retry_runtime::named::{self, Named};
    /// use retry_runtime::{CircuitBreaker, Policy};
    /// use std::sync::Arc;
    ///
    /// let layer = GrpcRetryLayer::from_service_config(r#"{"methodConfig": []}"#)?
    ///     .named(|| named::resolve("contract-service"));
    /// # let _ = layer;
    /// # Ok::<(), retry_grpc::ConfigError>(())
    /// ```
    pub fn named(
        mut self,
        lookup: impl Fn() -> Option<Arc<Named>> + Send + Sync + 'static,
    ) -> Self {
        self.lookup = Some(Arc::new(lookup));
        self
    }

    /// `notify = f`, async: before each pause of a call under a retry policy (not a hedged
    /// copy, not a transparent resend), the engine awaits `f`'s future, inside that pause
    /// (whose rest it then takes) and the call's deadline (which drops a hook still running
    /// then), as the attribute's async `notify`. A panic in it is contained: the call goes on
    /// as if the hook had returned, and the panic is logged at `ERROR` and counted
    /// (`Counters::hooks_panicked`). The future owns what it needs (`Send + 'static`): record
    /// the retry in a database, page someone.
    pub fn notify_async<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(&RetryEvent) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.notify = Some(Arc::new(move |event: &RetryEvent| -> HookFuture<'static> {
            Box::pin(f(event))
        }));
        self
    }

    /// `on_give_up = f`, async: when a call under a retry policy gives up on a failure it
    /// could have retried, the engine awaits `f`'s future before the call returns. A panic in
    /// it is contained (the status is returned all the same), logged at `ERROR` and counted
    /// (`Counters::hooks_panicked`).
    pub fn on_give_up_async<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(&GiveUp) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_give_up = Some(Arc::new(move |why: &GiveUp| -> HookFuture<'static> {
            Box::pin(f(why))
        }));
        self
    }

    /// The service config.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// The counts of the calls the services of this layer handled.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }
}

impl<S> tower_layer::Layer<S> for GrpcRetryLayer {
    type Service = GrpcRetry<S>;

    fn layer(&self, inner: S) -> GrpcRetry<S> {
        GrpcRetry {
            inner,
            servers: Arc::new(PerServer::new(self)),
        }
    }
}

/// The layer as the calls of one service see it, with one throttle per server: the named
/// server's ([`GrpcRetryLayer::target`]), else a new count for the service (its channel's
/// server: a tonic `Channel` adds the authority below the door, so its requests carry none) and
/// one per authority that request URIs name.
#[derive(Debug)]
struct PerServer {
    /// The layer for calls without an authority, or for every call when the server is named or
    /// the config has no `retryThrottling`.
    own: Arc<GrpcRetryLayer>,
    /// A copy of the layer per authority, each with its own count; `None` when `own` serves every
    /// call.
    by_authority: Option<Mutex<HashMap<String, Arc<GrpcRetryLayer>>>>,
}

impl PerServer {
    fn new(layer: &GrpcRetryLayer) -> Self {
        let throttling = layer.config.retry_throttling().filter(|_| !layer.named);
        PerServer {
            own: Arc::new(layer.with_own_throttle()),
            by_authority: throttling.map(|_| Mutex::new(HashMap::new())),
        }
    }

    fn layer_for(&self, authority: Option<&http::uri::Authority>) -> Arc<GrpcRetryLayer> {
        let (Some(layers), Some(authority)) = (&self.by_authority, authority) else {
            return Arc::clone(&self.own);
        };
        // Each operation is one lookup or one insert: a panic elsewhere cannot leave the map
        // inconsistent, so a poisoned lock is used as is.
        let mut layers = layers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let layer = layers
            .entry(authority.as_str().to_ascii_lowercase())
            .or_insert_with(|| Arc::new(self.own.with_own_throttle()));
        Arc::clone(layer)
    }
}

impl GrpcRetryLayer {
    /// A copy whose calls count in a new throttle, unless the server is named.
    fn with_own_throttle(&self) -> Self {
        let mut layer = self.clone();
        if !self.named {
            layer.throttle = self
                .config
                .retry_throttling()
                .map(|throttling| Arc::new(RetryThrottle::new(throttling)));
        }
        layer
    }
}

/// The service of a [`GrpcRetryLayer`]: tonic's request in, tonic's body out, so that a
/// generated client takes it as its transport (`EchoClient::new(service)`). Its clones share
/// its throttle.
#[derive(Clone, Debug)]
pub struct GrpcRetry<S> {
    inner: S,
    servers: Arc<PerServer>,
}

impl<S> GrpcRetry<S> {
    /// `inner` with the door of `layer`.
    pub fn new(inner: S, layer: &GrpcRetryLayer) -> Self {
        tower_layer::Layer::layer(layer, inner)
    }

    /// The counts of the calls of this service and its clones (and of the layer's other
    /// services).
    pub fn counters(&self) -> Arc<Counters> {
        self.servers.own.counters()
    }

    /// The retry throttle of this service's calls whose request URI names no authority (every
    /// call through a tonic `Channel`, whose server it is), if the config has `retryThrottling`:
    /// this service's own count, or the named server's ([`GrpcRetryLayer::target`]).
    pub fn throttle(&self) -> Option<&Arc<RetryThrottle>> {
        self.servers.own.throttle.as_ref()
    }
}

impl<S, RB> Service<Request<tonic::body::Body>> for GrpcRetry<S>
where
    S: Service<Request<tonic::body::Body>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    RB: Body<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    type Response = Response<tonic::body::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> Self::Future {
        // The service that was polled ready takes the first attempt; its clone stays here.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let layer = self.servers.layer_for(request.uri().authority());
        Box::pin(call::respond(layer, ready, request))
    }
}

/// What the services of a layer did, counted since it was made: the runtime's one
/// `Counters` (`retry_runtime::engine::Counters`), which every door hands out. This door counts
/// [`calls`](Counters::calls), [`attempts`](Counters::attempts), [`throttled`](Counters::throttled)
/// and [`deadline_exceeded`](Counters::deadline_exceeded), and reports each of these events to
/// the logs and the metrics too (retry-runtime's features `tracing` and `metrics`); the engine's
/// loop, which the door hands these counts as its sink, counts [`retries`](Counters::retries),
/// [`hedged_copies`](Counters::hedged_copies) and
/// [`transparent_retries`](Counters::transparent_retries), and logs and measures them.
pub use retry_runtime::engine::Counters;
