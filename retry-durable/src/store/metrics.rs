//! The stores' instruments (feature `metrics`): every answer of a `begin` and every error a
//! store hands its caller, counted through the `metrics` facade where the answer reaches the
//! caller. The table is `docs/metrics.md`. Without the feature each function here is the identity
//! or nothing, and the stores pay nothing.
//!
//! The labels are bounded: the kind of store ([`IdempotencyStore::metrics_label`]), the answer,
//! the error's variant. Never a key, a scope, a URL or an error's message.

use super::{Begin, BoxFuture, StoreError};
use std::future::Future;

/// `retry_store_begins_total{store, answer}`.
#[cfg(feature = "metrics")]
pub(crate) const BEGINS: &str = "retry_store_begins_total";
/// `retry_store_errors_total{store, kind}`.
#[cfg(feature = "metrics")]
pub(crate) const ERRORS: &str = "retry_store_errors_total";

/// What a `begin` answered, as the `answer` label says it.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) trait Answer {
    /// `execute`, `replay`, `in_progress` or `mismatch`.
    fn answer(&self) -> &'static str;
}

impl<R, T: Send> Answer for Begin<'_, R, T> {
    fn answer(&self) -> &'static str {
        match self {
            Begin::Execute(_) => "execute",
            Begin::Replay(_) => "replay",
            Begin::InProgress => "in_progress",
            Begin::Mismatch => "mismatch",
        }
    }
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
impl StoreError {
    /// The `kind` label of `retry_store_errors_total`: the variant's name in snake case.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            StoreError::Database { .. } => "database",
            StoreError::Superseded { .. } => "superseded",
            StoreError::TooLarge { .. } => "too_large",
            StoreError::Codec(_) => "codec",
            StoreError::Schema(_) => "schema",
            StoreError::InvalidKey => "invalid_key",
        }
    }
}

/// The future of a `begin` of the store labelled `store`, boxed, counting its answer or its
/// error when it resolves. A `begin` dropped before it answers counts nothing. (The SQL stores
/// use it; without their features nothing does.)
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn begin<'a, A: Answer + 'a>(
    store: &'static str,
    future: impl Future<Output = Result<A, StoreError>> + Send + 'a,
) -> BoxFuture<'a, Result<A, StoreError>> {
    #[cfg(feature = "metrics")]
    {
        Box::pin(async move {
            let answer = future.await;
            record_begin(store, &answer);
            answer
        })
    }
    #[cfg(not(feature = "metrics"))]
    {
        let _ = store;
        Box::pin(future)
    }
}

/// Counts a `begin`'s answer, or its error.
pub(crate) fn record_begin<A: Answer>(store: &'static str, answer: &Result<A, StoreError>) {
    #[cfg(feature = "metrics")]
    match answer {
        Ok(answer) => {
            metrics::counter!(BEGINS, "store" => store, "answer" => answer.answer()).increment(1);
        }
        Err(error) => record_error(store, error),
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (store, answer);
}

/// Counts an error of the store labelled `store`.
pub(crate) fn record_error(store: &'static str, error: &StoreError) {
    #[cfg(feature = "metrics")]
    metrics::counter!(ERRORS, "store" => store, "kind" => error.kind()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (store, error);
}

/// Counts the error in `result`, if there is one, and passes it on.
pub(crate) fn counted<T>(
    store: &'static str,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    if let Err(error) = &result {
        record_error(store, error);
    }
    result
}
