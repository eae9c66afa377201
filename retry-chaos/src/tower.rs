//! The chaos layer for tower services: under a door's layer (retry-http's `HttpRetryLayer`,
//! retry-grpc's `GrpcRetryLayer`), it answers an attempt with a made-up HTTP status and headers
//! (`Retry-After`), or a gRPC status with `grpc-retry-pushback-ms`, which the door reads as the
//! server's, so that the door's own reading of answers is rehearsed.
//!
//! ```
//! use retry_chaos::tower::ChaosLayer;
//! use retry_chaos::{Rule, Site};
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let site = Site::new("quotes-http")
//!     .seed(7)
//!     .rule(Rule::status(503).header("retry-after", "1"))
//!     .install();
//! let mut service = ServiceBuilder::new()
//!     .layer(ChaosLayer::new(site.clone()))
//!     .service_fn(|_: http::Request<String>| async {
//!         Ok::<_, std::convert::Infallible>(http::Response::new(String::from("quote")))
//!     });
//! let answer = service.ready().await.unwrap().call(http::Request::new(String::new())).await.unwrap();
//! assert_eq!(answer.status(), 503);
//! assert_eq!(answer.headers()["retry-after"], "1");
//! site.remove();
//! # }
//! ```

use crate::answer::{self, SharedSink};
use crate::site::Installed;
use http::{Request, Response};
use retry_runtime::engine::Sink;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Makes [`Chaos`] services over a site's answers. Cheap to clone.
#[derive(Clone)]
pub struct ChaosLayer {
    site: Installed,
    sink: SharedSink,
}

impl std::fmt::Debug for ChaosLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("site", &self.site)
            .finish_non_exhaustive()
    }
}

impl ChaosLayer {
    /// The layer that injects `site`'s answers ([`Rule::status`](crate::Rule::status),
    /// [`Rule::grpc`](crate::Rule::grpc)), and what a request's header asks for where the site
    /// allows it.
    pub fn new(site: Installed) -> Self {
        ChaosLayer {
            site,
            sink: Arc::new(()),
        }
    }

    /// Reports each injected answer to `sink` too (the door's `Counters`:
    /// `HttpRetry::counters()`, `GrpcRetryLayer::counters()`), beside the logs and the metrics.
    pub fn sink(mut self, sink: Arc<dyn Sink + Send + Sync>) -> Self {
        self.sink = sink;
        self
    }
}

impl<S> Layer<S> for ChaosLayer {
    type Service = Chaos<S>;

    fn layer(&self, inner: S) -> Chaos<S> {
        Chaos {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose attempts may be answered by the site's faults instead of `S`.
#[derive(Clone, Debug)]
pub struct Chaos<S> {
    inner: S,
    layer: ChaosLayer,
}

impl<S, B, RB> Service<Request<B>> for Chaos<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ChaosFuture<S::Future, Response<RB>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The attempt's number, from the door's loop above (1 outside one).
        let attempt = retry_runtime::attempt().number();
        let layer = &self.layer;
        if let Some(kind) = answer::planned(&layer.site, request.headers(), attempt) {
            if let Some((made_up, code)) = answer::response(&kind, RB::default()) {
                answer::report(layer.site.name(), attempt, code, &layer.sink);
                return ChaosFuture::Injected {
                    answer: Some(made_up),
                };
            }
        }
        ChaosFuture::Inner {
            future: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Chaos`]: the inner service's, or an injected answer.
    #[project = ChaosProj]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum ChaosFuture<F, R> {
        /// The inner service answers.
        Inner { #[pin] future: F },
        /// The answer injected.
        Injected { answer: Option<R> },
    }
}

impl<F, R, E> Future for ChaosFuture<F, R>
where
    F: Future<Output = Result<R, E>>,
{
    type Output = Result<R, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            ChaosProj::Inner { future } => future.poll(cx),
            ChaosProj::Injected { answer } => match answer.take() {
                Some(answer) => Poll::Ready(Ok(answer)),
                None => Poll::Pending,
            },
        }
    }
}
