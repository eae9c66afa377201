//! `/metrics` for the example services: the instruments of `retry-runtime` and
//! `retry-durable` (their features `metrics`, tables in `retry-runtime/docs/metrics.md` and
//! `retry-durable/docs/metrics.md`) in Prometheus's text format, on the service's own axum
//! router.
//!
//! The recorder is `metrics-exporter-prometheus` without its HTTP listener or push gateway: a
//! service that already serves HTTP renders the recorder's text on a route of its own, and pulls
//! in no second HTTP stack. [`Metrics::install`] installs it for the process (once), and
//! [`Metrics::route`] adds `GET /metrics` to a router.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use retry_durable::queue::Queue;
use retry_durable::store::{Backend, BoxFuture};
use std::fmt;
use std::io;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The path Prometheus scrapes.
pub const PATH: &str = "/metrics";

/// The upper bounds of `retry_attempts`' buckets: attempts per call.
pub const ATTEMPT_BUCKETS: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0];

/// The upper bounds of `retry_pause_seconds`' buckets: from a few milliseconds to a minute.
pub const PAUSE_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// The process's Prometheus recorder, and the queues whose depth a scrape reads first.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    queues: Arc<[Arc<dyn Observed>]>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

/// A queue of either engine, whose gauges a scrape sets.
trait Observed: Send + Sync {
    fn observe(&self) -> BoxFuture<'_, ()>;
}

impl<B: Backend> Observed for Queue<B> {
    fn observe(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // A queue whose database is down keeps its last values.
            let _ = Queue::observe(self).await;
        })
    }
}

impl Metrics {
    /// Installs the Prometheus recorder as the process's `metrics` recorder, with real
    /// histograms (buckets, not summaries) for the attempts and the pauses.
    ///
    /// # Errors
    ///
    /// When a recorder is installed already (a process has one).
    pub fn install() -> Result<Self, BuildError> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full("retry_attempts".into()), &ATTEMPT_BUCKETS)?
            .set_buckets_for_metric(Matcher::Full("retry_pause_seconds".into()), &PAUSE_BUCKETS)?
            .install_recorder()?;
        Ok(Metrics {
            handle,
            queues: Arc::new([]),
        })
    }

    /// Reads `queue`'s depth and the age of its oldest due job ([`Queue::observe`]) at each
    /// scrape, so that the gauges are those of the moment even while no worker runs.
    pub fn observe<B: Backend>(mut self, queue: &Queue<B>) -> Self {
        let mut queues = self.queues.to_vec();
        queues.push(Arc::new(queue.clone()));
        self.queues = queues.into();
        self
    }

    /// What a scrape gets: the queues observed, then every series in Prometheus's text format.
    pub async fn render(&self) -> String {
        for queue in self.queues.iter() {
            queue.observe().await;
        }
        // Histograms drain their samples here, so that they do not grow between scrapes.
        self.handle.run_upkeep();
        self.handle.render()
    }

    /// `router` with `GET /metrics`.
    pub fn route<S: Clone + Send + Sync + 'static>(&self, router: Router<S>) -> Router<S> {
        let metrics = self.clone();
        router.route(
            PATH,
            get(move || {
                let metrics = metrics.clone();
                async move { metrics.scrape().await }
            }),
        )
    }

    /// Serves `GET /metrics` alone on `listener`, for a program that serves no HTTP of its own
    /// (the portal), until the process ends.
    pub async fn serve(self, listener: TcpListener) -> io::Result<()> {
        let router = self.route(Router::new());
        axum::serve(listener, router).await
    }

    async fn scrape(&self) -> Response {
        let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
        ([(header::CONTENT_TYPE, content_type)], self.render().await).into_response()
    }
}
