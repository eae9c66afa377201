//! Without the `tokio` feature and without `sleep = ...`, an async `#[retry]` function is a
//! compile error that says which to add; with `sleep = ...` it compiles. Checked on a fixture
//! crate (`tests/fixtures/no-tokio`), since features cannot be turned off inside this package.

use std::path::Path;
use std::process::{Command, Output};

fn check(bin: &str) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // Shared with the other fixtures, which build the runtime with the same features.
    let target = root.join("../target/fixtures");
    Command::new(env!("CARGO"))
        .args([
            "check",
            "--quiet",
            "--offline",
            "--bin",
            bin,
            "--manifest-path",
        ])
        .arg(root.join("fixtures/no-tokio/Cargo.toml"))
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("cargo runs")
}

#[test]
fn an_async_fn_without_a_timer_is_a_compile_error_that_names_both_fixes() {
    let output = check("without_sleep");
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

#[test]
fn an_async_fn_with_its_own_sleep_compiles_without_tokio() {
    let output = check("with_sleep");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
}
