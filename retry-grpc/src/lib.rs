//! gRPC retries as gRFC A6 specifies them, for tonic: a tower layer under a `Channel`
//! ([`channel::GrpcRetryLayer`]) that retries and hedges every method from the standard service
//! config, and the config and A6's arithmetic as plain tested types it is built from.
//!
//! - [`channel`]: the door. One layer under a `Channel`; tonic's bodies in and out, so a
//!   generated client takes it as is.
//! - [`ServiceConfig`] reads the JSON service config that Go, Java and C++ clients read
//!   (`methodConfig` with `retryPolicy`, `hedgingPolicy` and `timeout`; `retryThrottling`),
//!   with the official implementations' validation, errors that name the field and the rule,
//!   per-method lookup, and builders.
//! - [`RetryCall`] is the retry decision of one call in C-core's order: retryable codes,
//!   throttling, the commit rule, `maxAttempts`, pushback that replaces the pause exactly, and
//!   the `grpc-previous-rpc-attempts` value of each attempt.
//! - [`backoff`]: A6's `random(0, …)` pauses (the default) and C-core's ±20 % form.
//! - [`RetryThrottle`] and [`ThrottleRegistry`]: A6's token arithmetic, in exact thousandths,
//!   one count per server name.
//! - [`Commit`], [`TransparentRetries`], [`HedgingCall`], [`AttemptStatus`]: when a call can no
//!   longer be retried, which failures are retried without the policy, the hedging decision
//!   (the engine's schedule of copies and when the next one goes after a failure), and the
//!   status of a trailers-only answer or of trailers.
//!
//! How the door was designed, and what it takes from the retry engine: [`design`].
//!
#![doc = include_str!("../docs/guide.md")]
//!
//! # The arithmetic on its own
//!
//! ```
//! use retry_grpc::backoff::Jitter;
//! use retry_grpc::{Decision, Pushback, RetryCall, ServiceConfig, ThrottleRegistry};
//! use std::time::Duration;
//! use tonic::Code;
//!
//! let config = ServiceConfig::from_json(r#"{
//!   "methodConfig": [{"name": [{"service": "pkg.Echo"}],
//!     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
//!                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#)?;
//! let policy = config.method_config("/pkg.Echo/Say").and_then(|m| m.retry_policy()).expect("a policy");
//! let throttle = config
//!     .retry_throttling()
//!     .map(|t| ThrottleRegistry::global().get("dns:///echo.internal:443", t));
//! let mut call = RetryCall::new(policy, Jitter::A6, throttle);
//! match call.on_status(Code::Unavailable, Pushback::Absent) {
//!     Decision::Retry { pause, previous_attempts } => {
//!         assert!(pause < Duration::from_millis(100));
//!         assert_eq!(previous_attempts, 1);
//!     }
//!     Decision::Stop(stop) => unreachable!("{stop:?}"),
//! }
//! # Ok::<(), retry_grpc::ConfigError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod backoff;
pub mod channel;
pub mod code;
mod commit;
pub mod config;
pub mod duration;
mod hedging;
mod retry;
mod status;
mod throttle;
mod transparent;

#[doc = include_str!("../DESIGN.md")]
pub mod design {}

pub use code::CodeSet;
pub use commit::{Commit, CommitCause};
pub use config::{
    CallPolicy, ConfigError, FieldError, HedgingPolicy, MethodConfig, MethodName, RetryPolicy,
    RetryThrottling, ServiceConfig,
};
pub use hedging::HedgingCall;
// The server's pushback, `grpc-retry-pushback-ms`: the runtime's one parser of it, which its
// `tonic` integration reads too.
pub use retry::{Decision, GRPC_PREVIOUS_RPC_ATTEMPTS, RetryCall, Stop};
pub use retry_runtime::headers::{GRPC_RETRY_PUSHBACK_MS, Pushback};
pub use status::{AttemptStatus, GRPC_STATUS, is_trailers_only};
pub use throttle::{RetryThrottle, ThrottleRegistry};
pub use transparent::{TransparentRetries, Unsent};
