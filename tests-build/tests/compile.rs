//! What the compiler says about `#[retry]` and `#[non_idempotent]`, and what the attribute
//! writes: the compile errors of `ui/` and `item_lints/` through trybuild, the expansion
//! snapshots of `expand/` through macrotest, a crate without the `tokio` feature, and one that
//! reaches the runtime under other names. All of it builds projects of its own in `target/`, so
//! this package depends on nothing heavier than the runtime (see its `Cargo.toml`).

use std::path::Path;
use std::process::{Command, Output};

#[path = "../../tests/it/common/skip.rs"]
mod skip;

/// One case per rule in `ui/`, each with the `.stderr` a user sees, and the cases in `ui/pass/`
/// that must compile. Regenerate with `TRYBUILD=overwrite`, then read every changed file.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

/// Lints about the annotated function itself (`dead_code`, `unsafe_code`, `missing_docs`) see it
/// as the user wrote it, not as macro output; and `unsafe fn` works, which this workspace's
/// `forbid(unsafe_code)` keeps out of the other test files. Through trybuild, whose projects do
/// not inherit the workspace's lints.
#[test]
fn item_lints() {
    let t = trybuild::TestCases::new();
    t.pass("tests/item_lints/pass/*.rs");
    t.compile_fail("tests/item_lints/*.rs");
}

/// The `cargo-expand` version the snapshots were written with; `.ci/run` installs this one.
const CARGO_EXPAND: &str = include_str!("../../.ci/cargo-expand.version");

/// The expansion is part of the product: a change to the generated code shows up here as a
/// diff of `tests/expand/*.expanded.rs` to review. Refresh with
/// `MACROTEST=overwrite cargo test -p retry-tests-build --test compile expansion`.
#[test]
fn expansions_match_their_snapshots() {
    let pinned = CARGO_EXPAND.trim();
    let installed = Command::new("cargo")
        .args(["expand", "--version"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let Some(installed) = installed else {
        return skip::skip_or_fail(format_args!(
            "`cargo expand` is not installed, so the expansion snapshots in tests-build/tests/expand \
             were not compared; install it with `cargo install --locked cargo-expand --version {pinned}`"
        ));
    };
    if !installed.contains(pinned) {
        eprintln!(
            "note: {installed} is installed; the snapshots were written with cargo-expand {pinned}, \
             so a difference in formatting alone may come from the version"
        );
    }
    if std::env::var_os("MACROTEST").is_some_and(|v| v == "overwrite") {
        macrotest::expand("tests/expand/*.rs");
        return;
    }
    // The paths are relative to this package. Guard against a glob that matches nothing, which
    // macrotest would pass silently.
    let cases = std::fs::read_dir("tests/expand")
        .map(|dir| dir.filter_map(Result::ok).count())
        .unwrap_or(0);
    assert!(
        cases >= 12,
        "expected 6 cases and their snapshots in tests/expand, found {cases} files"
    );
    macrotest::expand_without_refresh("tests/expand/*.rs");
}

/// The fixtures (`fixtures/*`) are crates of their own, as a user's would be, so that they can
/// depend on the runtime without features or under another name, which cannot be done inside
/// this workspace's build. They share one target directory: each builds the runtime without
/// default features.
fn fixture(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = root.join("fixtures").join(name).join("Cargo.toml");
    (manifest, root.join("../target/fixtures"))
}

/// `cargo build` of one binary of the fixture crate `fixtures/no-tokio`, which depends on
/// retry-runtime without its `tokio` feature. A build, not a check, so that it shares the
/// runtime's build with `fixtures/renamed`, which runs.
fn check_without_tokio(bin: &str) -> Output {
    let (manifest, target) = fixture("no-tokio");
    Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--offline",
            "--bin",
            bin,
            "--manifest-path",
        ])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs")
}

/// Without the `tokio` feature and without `sleep = ...`, an async `#[retry]` function is a
/// compile error that says which to add.
#[test]
fn an_async_fn_without_a_timer_is_a_compile_error_that_names_both_fixes() {
    let output = check_without_tokio("without_sleep");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "compiled without a timer:\n{stderr}"
    );
    assert!(
        stderr.contains("this async `#[retry]` function has no timer to pause with"),
        "{stderr}"
    );
    assert!(
        stderr.contains("enable the `tokio` feature of `retry-runtime`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`#[retry(sleep = my_runtime::sleep)]`"),
        "{stderr}"
    );
}

/// With `sleep = ...`, it compiles without tokio.
#[test]
fn an_async_fn_with_its_own_sleep_compiles_without_tokio() {
    let output = check_without_tokio("with_sleep");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
}

/// `#[retry(crate = path)]`: the fixture `fixtures/renamed` depends on the runtime under another
/// name (`rt = { package = "retry-runtime", ... }`) and through a crate that re-exports it, and
/// has no dependency called `retry_runtime` at all, so it compiles only if every generated path
/// goes through the one given; its `main` asserts the call counts.
#[test]
fn a_renamed_and_a_re_exported_runtime_work_through_crate_path() {
    let (manifest, target) = fixture("renamed");
    let output = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "every call went through the renamed and the re-exported runtime"
    );
}
