//! What the interop tests share: finding grpcio (or failing under CI), starting the scripted
//! tonic server, and the service configs, built with retry-grpc's builders and handed to
//! grpcio as their JSON (so grpcio also reads what `ServiceConfig::to_json` writes).

#![allow(dead_code)]

#[path = "../../../../../tests/it/common/skip.rs"]
mod skip;

use retry_grpc::{
    HedgingPolicy, MethodConfig, MethodName, RetryPolicy, RetryThrottling, ServiceConfig,
};
use retry_grpc_interop::harness::{self, ServerProcess};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::Code;

pub use skip::skip_or_fail;

/// The service of `proto/interop.proto`.
pub const SERVICE: &str = "retry.interop.Scripted";

/// The Python with grpcio, or `None` after skipping (failing under CI).
pub fn python() -> Option<PathBuf> {
    match harness::python() {
        Ok((python, _version)) => Some(python),
        Err(reason) => {
            skip_or_fail(reason);
            None
        }
    }
}

/// The scripted tonic server, as a child process.
pub fn tonic_server() -> ServerProcess {
    ServerProcess::tonic(Path::new(env!("CARGO_BIN_EXE_scripted-server")))
        .expect("the scripted server starts")
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A retry policy for every method of the service.
pub fn retry(max_attempts: u32, initial: Duration, max: Duration, codes: &[Code]) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .max_attempts_limit(u32::MAX)
        .initial_backoff(initial)
        .max_backoff(max)
        .backoff_multiplier(2.0)
        .retryable_status_codes(codes.iter().copied())
        .build()
        .expect("a valid retry policy")
}

pub fn retry_config(policy: RetryPolicy, throttling: Option<RetryThrottling>) -> Value {
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(policy);
    let mut config = ServiceConfig::builder().method_config(method.build().expect("valid"));
    if let Some(throttling) = throttling {
        config = config.retry_throttling(throttling);
    }
    config.build().expect("a valid config").to_json()
}

pub fn hedging_config(max_attempts: u32, delay: Duration, codes: &[Code]) -> Value {
    let policy = HedgingPolicy::builder()
        .max_attempts(max_attempts)
        .hedging_delay(delay)
        .non_fatal_status_codes(codes.iter().copied())
        .build()
        .expect("valid");
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .hedging_policy(policy);
    ServiceConfig::builder()
        .method_config(method.build().expect("valid"))
        .build()
        .expect("valid")
        .to_json()
}
