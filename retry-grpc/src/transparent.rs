//! Transparent retries (gRFC A6, "Transparent Retries"): attempts that never reached the
//! server's application are retried without the retry policy, and are not counted in
//! `maxAttempts`, in `grpc-previous-rpc-attempts` or by the throttle.
//!
//! | the attempt | how the door learns it | transparent retry |
//! |---|---|---|
//! | never left the client: the stream was never written (the connection closed or was not ready when the request was handed to it, as happens to a request racing a `GOAWAY`) | the transport's error says nothing was sent: hyper's `Canceled` ("operation was canceled") in its source chain | at once, as often as it happens, until the deadline (A6: "until a success occurs, or the RPC's deadline passes") |
//! | the connection was refused | an [`std::io::Error`] of kind `ConnectionRefused` in the error's source chain | at once, **once** per call; then the policy, as `UNAVAILABLE` |
//! | reached the server, not its application: an HTTP/2 `RST_STREAM` with `REFUSED_STREAM`, or a stream above a `GOAWAY`'s last stream id | `h2`'s error in the transport error's source chain | at once, **once** per call; after that the retry policy decides (A6) |
//!
//! A **refused connection** (nothing listens on the port) never left the client either, but
//! retrying it at once as often as it happens would spin until the deadline. C-core (measured
//! with `grpcio`, `bench/RESULTS.md` §10) fails such a call at once with `UNAVAILABLE`, and that
//! failure goes to the retry policy like any other (counted, with backoff); with `waitForReady`
//! the call waits for a connection until its deadline. tonic's `Channel` tries to connect again
//! on the next request, so the door retries a refused connection at once **once** per call (the
//! server may just have restarted: [`Unsent::ConnectionRefused`]); after that it is `UNAVAILABLE`
//! for the policy, as in C-core.
//!
//! ```
//! use retry_grpc::{TransparentRetries, Unsent};
//!
//! let mut transparent = TransparentRetries::new();
//! assert!(transparent.on_unsent(Unsent::NotSeenByServer)); // retried at once
//! assert!(!transparent.on_unsent(Unsent::NotSeenByServer)); // the second goes to the policy
//! assert!(transparent.on_unsent(Unsent::NeverLeftClient));
//! assert!(transparent.on_unsent(Unsent::NeverLeftClient));
//! assert!(transparent.on_unsent(Unsent::ConnectionRefused)); // once, at once
//! assert!(!transparent.on_unsent(Unsent::ConnectionRefused)); // then the policy, as UNAVAILABLE
//! assert_eq!(transparent.count(), 4);
//! ```

/// How far an attempt that failed without an answer got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unsent {
    /// Nothing of it was written to a connection.
    NeverLeftClient,
    /// The server's gRPC library refused it before its application saw it (`REFUSED_STREAM`, or
    /// a stream above a `GOAWAY`'s last stream id).
    NotSeenByServer,
    /// The connection was refused: nothing was sent. Retried at once, once per call; after
    /// that the failure goes to the policy as `UNAVAILABLE`.
    ConnectionRefused,
}

/// The transparent retries of one call.
#[derive(Clone, Debug, Default)]
pub struct TransparentRetries {
    not_seen_retried: bool,
    refused_retried: bool,
    count: u32,
}

impl TransparentRetries {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An attempt failed unsent: whether to retry it at once, transparently (`false`: the
    /// failure goes to the retry policy, as `UNAVAILABLE`).
    pub fn on_unsent(&mut self, unsent: Unsent) -> bool {
        let retry = match unsent {
            Unsent::NeverLeftClient => true,
            Unsent::NotSeenByServer => !std::mem::replace(&mut self.not_seen_retried, true),
            Unsent::ConnectionRefused => !std::mem::replace(&mut self.refused_retried, true),
        };
        if retry {
            self.count = self.count.saturating_add(1);
        }
        retry
    }

    /// The transparent retries made, for the `grpc-transparent-retry-attempts` metadata A6
    /// suggests and for metrics.
    pub fn count(&self) -> u32 {
        self.count
    }
}
