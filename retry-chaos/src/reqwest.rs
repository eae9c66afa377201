//! The chaos middleware for reqwest-middleware: under retry-http's `RetryMiddleware` (added
//! after it: the first `with` is the outermost), it answers an attempt with a made-up status
//! and headers (`Retry-After`), which the retry middleware reads as the server's.
//!
//! ```
//! use retry_chaos::reqwest::ChaosMiddleware;
//! use retry_chaos::{Rule, Site};
//! use retry_http::HttpRetry;
//! use retry_http::reqwest::RetryMiddleware;
//! use retry_runtime::Policy;
//!
//! let site = Site::new("quotes-client").rule(Rule::status(503).rate(0.2)).install();
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryMiddleware::new(HttpRetry::new(Policy::new().max(3))))
//!     .with(ChaosMiddleware::new(site.clone()))
//!     .build();
//! # let _ = client;
//! site.remove();
//! ```

use crate::answer::{self, SharedSink};
use crate::site::Installed;
use reqwest_middleware::{Middleware, Next};
use retry_runtime::engine::Sink;
use std::sync::Arc;

/// The middleware that injects a site's answers ([`Rule::status`](crate::Rule::status)), and
/// what a request's header asks for where the site allows it.
#[derive(Clone)]
pub struct ChaosMiddleware {
    site: Installed,
    sink: SharedSink,
}

impl std::fmt::Debug for ChaosMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChaosMiddleware")
            .field("site", &self.site)
            .finish_non_exhaustive()
    }
}

impl ChaosMiddleware {
    /// The middleware of `site`.
    pub fn new(site: Installed) -> Self {
        ChaosMiddleware {
            site,
            sink: Arc::new(()),
        }
    }

    /// Reports each injected answer to `sink` too (the retry middleware's `Counters`:
    /// `RetryMiddleware::counters()`), beside the logs and the metrics.
    pub fn sink(mut self, sink: Arc<dyn Sink + Send + Sync>) -> Self {
        self.sink = sink;
        self
    }
}

#[async_trait::async_trait]
impl Middleware for ChaosMiddleware {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let attempt = retry_runtime::attempt().number();
        if let Some(kind) = answer::planned(&self.site, request.headers(), attempt) {
            if let Some((made_up, code)) = answer::response(&kind, Vec::<u8>::new()) {
                answer::report(self.site.name(), attempt, code, &self.sink);
                return Ok(reqwest::Response::from(made_up));
            }
        }
        next.run(request, extensions).await
    }
}
