//! Named retry policies from configuration: a [`Registry`] built from the `[retry.<name>]`
//! tables of a service's configuration, looked up by name from every door, replaced while calls
//! run ([`Registry::reload`]), and the AWS SDKs' retry settings ([`aws`]).
//!
//! A crate of its own, beside `retry-runtime`: the registry, the reload and the file formats
//! (TOML, JSON) live here, so that a service that writes its policies in code
//! (`#[retry(max = 3, base = "1s")]`, `Policy::new()`) never compiles them. The runtime keeps
//! what must live beside its types: the `Deserialize`/`Serialize` impls of the settings
//! (its `serde` feature, the attribute's grammar), the seam every door looks names up through
//! ([`retry_runtime::named`]) and the events ([`Event::PolicyChanged`] and its kin).
//!
//! ```
//! use retry_config::{Config, Registry};
//! use retry_runtime::named;
//! use std::io;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! // The service's configuration file, shipped beside it.
//! let registry = Arc::new(Registry::new(Config::from_toml(r#"
//! [server]
//! port = 8080            # the application's own: not read here
//!
//! [retry.contract-service]
//! max = 3
//! base = "100ms"
//! jitter = "none"
//! breaker = { consecutive_failures = 5, open_for = "30s" }
//! budget = { ratio = 0.2 }
//! "#)?));
//! // `#[retry(policy = "contract-service")]` and every door that resolves names find it now.
//! registry.install();
//! assert!(named::resolve("contract-service").is_some());
//!
//! // A call holds the policy it started with for all its attempts.
//! let contract = registry.get("contract-service").expect("configured");
//! let mut answers = vec![Ok("signed"), Err(io::Error::from(io::ErrorKind::TimedOut))];
//! let (signed, pauses) = retry_runtime::testing::record(|| {
//!     retry_config::retrier::<_, io::Error>(&contract).run(|| answers.pop().expect("two"))
//! });
//! assert_eq!(signed?, "signed");
//! assert_eq!(pauses, [Duration::from_millis(100)]);
//!
//! // An operator changes the policy without a rebuild; the breaker's settings did not change,
//! // so it is the same breaker, state and all.
//! let reloaded = registry.reload_toml(r#"
//! [retry.contract-service]
//! max = 5
//! base = "250ms"
//! breaker = { consecutive_failures = 5, open_for = "30s" }
//! budget = { ratio = 0.2 }
//! "#)?;
//! assert_eq!(reloaded.changed(), ["contract-service"]);
//! let next = registry.get("contract-service").expect("configured");
//! assert_eq!(next.policy().get_max(), 5);
//! assert!(std::ptr::eq(next.get_breaker().unwrap(), contract.get_breaker().unwrap()));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The doors
//!
//! Each door looks a name up once per call and holds the [`Named`](retry_runtime::named::Named)
//! it got until the call ends:
//!
//! - `#[retry(policy = "contract-service")]` and `retry_block!(policy = "...")`: through the
//!   process's resolver, [`Registry::install`].
//! - The `Retrier`: [`retrier`] (policy, name, budget) and [`retrier_with_breaker`].
//! - The HTTP doors (`retry-http`): `HttpRetry::route`, a policy per host or per route chosen
//!   per request, `.route(move |route| registry.get(name_for(route)))`.
//! - The gRPC door (`retry-grpc`): `GrpcRetryLayer::named`, a name beside the service config
//!   (its budget and breaker), `.named(move || registry.get("contract-service"))`.
//!
//! The budget and the breaker of a name are one object each, shared by every door that uses
//! the name. What a reload keeps of them, and when it replaces them, is in
//! [Reloads and state](Registry#reloads-and-state).
//!
//! [`Event::PolicyChanged`]: retry_runtime::engine::Event::PolicyChanged

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod aws;
mod config;
mod error;
mod registry;
mod retrier;

pub use config::{Config, Entry, TABLE};
pub use error::ConfigError;
pub use registry::{Registry, Reloaded};
pub use retrier::{retrier, retrier_with_breaker};
