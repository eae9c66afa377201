//! The service config's rules and the door's answer to a malformed one: one test binary, one
//! module per subject.

mod config;
mod config_fuzz;
mod door_errors;
