//! The interop tests: one test binary, one module per direction, so that they link once and
//! their tests, which mostly wait on servers and clients in other processes, run in parallel.
//! `common` holds what the modules share.

mod common;

mod door;
mod door_events;
mod door_named;
mod door_races;
mod door_servers;
mod door_throttle;
mod grpcio_client;
mod grpcio_server;
