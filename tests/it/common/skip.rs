//! The rule for a test that needs something this machine may not have (a tool such as
//! `cargo expand`, a database server): under CI it fails, so that CI cannot pass by not running
//! it; on a developer's machine it says in one line how to run it, and passes.
//!
//! Shared by the behaviour tests (`tests/it/common`), the compile-time tests (`tests-build`)
//! and the examples' tests (`examples/tests/common`), the last two through `#[path]`, so that
//! there is one rule.

use std::fmt::Display;
use std::io::Write;

/// Skips the calling test, or fails it under CI (see [`under_ci`]). `reason` says what is
/// missing and how to get it. Return right after it:
///
/// ```ignore
/// let Ok(url) = std::env::var("DATABASE_URL") else {
///     return common::skip_or_fail("DATABASE_URL is not set; start PostgreSQL and set it");
/// };
/// ```
#[track_caller]
pub fn skip_or_fail(reason: impl Display) {
    if under_ci() {
        panic!("CI is set, so a skip is a failure: {reason}");
    }
    let test = std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .map_or_else(String::new, |name| format!(" {name}"));
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests,
    // so the line would never be seen.
    let _ = writeln!(std::io::stderr(), "skipped{test}: {reason}");
}

/// Whether the `CI` environment variable is set to anything but empty, `0` or `false`, as CI
/// services set it (`CI=true`) and `.ci/run` does.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.trim(), "" | "0" | "false"))
}
