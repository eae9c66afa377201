//! The expansion is part of the product: a change to the generated code shows up here as a
//! diff of `tests/expand/*.expanded.rs` to review. Refresh with
//! `MACROTEST=overwrite cargo test -p retry-tests --test expansion`.

use std::process::Command;

#[test]
fn expansions_match_their_snapshots() {
    let installed = Command::new("cargo")
        .args(["expand", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        eprintln!(
            "skipped: `cargo expand` is not installed, so the expansion snapshots in tests/expand \
             were not compared; install it with `cargo install cargo-expand`"
        );
        return;
    }
    if std::env::var_os("MACROTEST").is_some_and(|v| v == "overwrite") {
        macrotest::expand("tests/expand/*.rs");
        return;
    }
    // The paths are relative to the `tests` package. Guard against a glob that matches nothing,
    // which macrotest would pass silently.
    let cases = std::fs::read_dir("tests/expand")
        .map(|dir| dir.filter_map(Result::ok).count())
        .unwrap_or(0);
    assert!(
        cases >= 10,
        "expected 5 cases and their snapshots in tests/expand, found {cases} files"
    );
    macrotest::expand_without_refresh("tests/expand/*.rs");
}
