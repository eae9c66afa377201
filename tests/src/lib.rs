//! Integration tests of `#[retry]` live in `tests/`; this crate has no library code.
