//! retry-chaos through every door, on tokio's paused clock where time matters. Each test has
//! sites of its own names: the sites are one registry per process, and the tests run at once.

mod attribute;
mod common;
mod grpc;
mod http;
mod metrics;
mod retrier;
