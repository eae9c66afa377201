//! The behaviour of `#[retry]` and `#[non_idempotent]`: one test binary, one module per
//! capability, each asserting what a caller sees (call counts, exact virtual times on tokio's
//! paused clock, pause bounds over many samples, the events logged). What the compiler says
//! about the attribute, and what it expands to, is in `tests-build/`.
//!
//! One binary links once, where a file per capability linked the runtime and its integrations
//! two dozen times. `common` holds what the modules share.

mod common;

mod admission_gate;
mod async_hooks;
mod attempt_context;
mod aws2026;
mod block_form;
mod breaker;
mod budget;
mod builder;
mod cancellation;
mod classification;
mod configuration;
mod custom_sleep;
mod database_errors;
mod deadline;
mod engine_decider;
mod engine_door;
mod fallback;
mod gate_in_the_loop;
mod hedge;
mod hooks;
mod http2;
mod hygiene;
mod idempotency_http;
mod idempotency_stores;
mod integrations;
mod jitter;
mod layout;
mod metrics;
mod named_policy;
mod nested;
mod non_idempotent;
mod on_result;
mod policy;
mod reqwest_middleware;
mod send;
mod shapes;
mod testing_recorder;
mod timeout;
mod timing;
mod tower_layer;
mod tracing_events;
mod transactional_stores;
mod verdict;
