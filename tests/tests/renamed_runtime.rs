//! `#[retry(crate = path)]`: a crate that depends on the runtime under another name (`rt = {
//! package = "retry-runtime", ... }`) or through a crate that re-exports it. The fixture
//! (`tests/fixtures/renamed`) has no dependency called `retry_runtime` at all, so it compiles only
//! if every generated path goes through the one given, and its `main` asserts the call counts.

use std::path::Path;
use std::process::Command;

#[test]
fn a_renamed_and_a_re_exported_runtime_work_through_crate_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(root.join("fixtures/renamed/Cargo.toml"))
        // Shared with the other fixtures, which build the runtime with the same features.
        .env("CARGO_TARGET_DIR", root.join("../target/fixtures"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "every call went through the renamed and the re-exported runtime"
    );
}
