//! The gRPC interop harness of `retry-grpc`: the scripted tonic server ([`server`]), the Python
//! drivers of `grpcio` (`python/`), and the plumbing that runs them as processes and reads
//! what they report ([`harness`]).
//!
//! `cargo test -p retry-grpc-interop` runs `grpcio`'s client (C-core) against the scripted
//! server and checks gRFC A6's normative behaviour; `cargo build -p retry-grpc-interop --bins
//! && cargo run -p retry-grpc-interop --bin evidence` prints the table of `bench/RESULTS.md`
//! §10. Both need Python with `grpcio` 1.85.x and `grpcio-tools` ([`harness::python`] says
//! which Python they use; `.ci/grpcio.sh install` makes a virtual environment under `target/`
//! with the pinned versions); without it the tests skip, saying how to get it.

/// The messages, client and server of `proto/interop.proto`.
#[allow(missing_docs, unused_qualifications, clippy::all)]
pub mod proto {
    tonic::include_proto!("retry.interop");
}

pub mod harness;
pub mod server;
