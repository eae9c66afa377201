//! Compile-time tests of `#[retry]` live in `tests/`; this crate has no library code.
//!
//! It exists as a library because trybuild and macrotest add the package under test as a
//! dependency of the projects they build.
