//! What the compiler says about `#[retry]` and `#[non_idempotent]`, and what the attribute
//! writes: the compile errors of `ui/` and `item_lints/` through trybuild, the expansion
//! snapshots of `expand/` through macrotest, a crate without the `tokio` feature, and one that
//! reaches the runtime under other names. All of it builds projects of its own in `target/`, so
//! this package depends on nothing heavier than the runtime (see its `Cargo.toml`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};

#[path = "../../tests/it/common/skip.rs"]
mod skip;

// trybuild checks a set of cases that are all `compile_fail` in one `cargo check --bins
// --keep-going`, whose rustc runs cargo spreads over the cores; a set with a `pass` case among
// them is built case by case, each with a `cargo clean` and a `cargo build` of its own. So `ui`
// holds only the cases that must fail, and `ui_pass` builds those that must compile the same
// way, in a project of its own: the same cases and `.stderr` files, in a fraction of the time,
// the two tests running side by side.

/// One case per rule in `ui/`, each with the `.stderr` a user sees; and the lints about the
/// annotated function itself (`item_lints/`: `dead_code`, `unsafe_code`, `missing_docs`), which
/// see it as the user wrote it, not as macro output (through trybuild, whose projects do not
/// inherit the workspace's lints). Regenerate with `TRYBUILD=overwrite`, then read every changed
/// file.
#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.compile_fail("tests/item_lints/*.rs");
}

/// The cases that must compile and run: `ui/pass/`, and `item_lints/pass/`, where `unsafe fn`
/// works, which this workspace's `forbid(unsafe_code)` keeps out of the other test files.
///
/// What trybuild's `pass` asserts (each case compiles as a binary of a user's crate and runs to
/// success), built the way trybuild builds `compile_fail` cases: every case a binary of one
/// project, one `cargo build --keep-going` that spreads them over the cores, then each run.
/// trybuild builds `pass` cases one at a time, each with a `cargo clean`, a `cargo build` and a
/// `cargo run` of its own, which took most of these tests' time. The project is the one trybuild
/// would write: this package's dependencies less trybuild and macrotest, the workspace's edition
/// and lock file, no workspace lints; in `target/tests/pass/`, with a target directory of its
/// own, and no debug info (it made a warm rebuild of the project, after touching one runtime
/// file, take 7 s instead of about 1: the cases' binaries linked with tokio's debug info).
#[test]
fn ui_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases = Vec::new();
    for dir in ["tests/ui/pass", "tests/item_lints/pass"] {
        let before = cases.len();
        for entry in std::fs::read_dir(root.join(dir)).expect("the pass cases are readable") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "rs") {
                let name = path
                    .file_stem()
                    .expect("a file name")
                    .to_string_lossy()
                    .into_owned();
                cases.push((format!("{dir}/{name}.rs"), name, path));
            }
        }
        assert!(cases.len() > before, "no pass case found in {dir}");
    }
    cases.sort();

    // This package's dependencies as a user's crate would write them: the runtime by its path,
    // tokio with the features the cases use.
    let manifest =
        std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml is readable");
    let dependencies: String = manifest
        .split("\n[dev-dependencies]\n")
        .nth(1)
        .expect("a [dev-dependencies] table")
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter(|line| !line.starts_with('#') && !line.starts_with("trybuild"))
        .map(|line| {
            line.replace("path = \"../", &format!("path = \"{}/../", root.display())) + "\n"
        })
        .collect();
    // The workspace's edition, which this package inherits.
    let workspace =
        std::fs::read_to_string(root.join("../Cargo.toml")).expect("the root manifest is readable");
    let edition = workspace
        .lines()
        .find_map(|line| line.strip_prefix("edition = "))
        .expect("the workspace declares an edition")
        .trim_matches('"');
    let mut project = format!(
        "[package]\nname = \"retry-tests-build-pass\"\nversion = \"0.0.0\"\nedition = \"{}\"\n\
         publish = false\n\n[dependencies]\n{dependencies}\n[workspace]\n\n\
         [profile.dev]\ndebug = false\n",
        edition,
    );
    let mut names = std::collections::BTreeSet::new();
    for (_, name, path) in &cases {
        assert!(
            names.insert(name),
            "two pass cases are called {name}: rename one"
        );
        project += &format!(
            "\n[[bin]]\nname = \"{name}\"\npath = \"{}\"\n",
            path.display()
        );
    }
    let dir = root.join("../target/tests/pass");
    std::fs::create_dir_all(&dir).expect("target/tests/pass can be created");
    std::fs::write(dir.join("Cargo.toml"), project).expect("the project's manifest is written");
    std::fs::copy(root.join("../Cargo.lock"), dir.join("Cargo.lock"))
        .expect("the lock file is copied");

    let build = Command::new(env!("CARGO"))
        .args([
            "build",
            "--bins",
            "--quiet",
            "--color=never",
            "--keep-going",
        ])
        // The artifacts as JSON on stdout (a case compiled if its binary is among them, fresh or
        // not), the errors rendered on stderr.
        .arg("--message-format=json-render-diagnostics")
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&build.stderr);
    let artifacts = String::from_utf8_lossy(&build.stdout);
    let mut failed = Vec::new();
    for (case, name, _) in &cases {
        let binary = dir.join("target/debug").join(name);
        let built = format!("\"executable\":\"{}\"", binary.display());
        let outcome = if !artifacts.lines().any(|line| line.contains(&built)) {
            "did not compile".to_owned()
        } else {
            let run = Command::new(&binary)
                .current_dir(&dir)
                .output()
                .expect("the case runs");
            if run.status.success() {
                String::new()
            } else {
                format!(
                    "ran and failed ({}):\n{}{}",
                    run.status,
                    String::from_utf8_lossy(&run.stdout),
                    String::from_utf8_lossy(&run.stderr)
                )
            }
        };
        // Straight to stdout, as trybuild writes its lines (the harness would hide `println!`),
        // so that the log names each case.
        let verdict = if outcome.is_empty() { "ok" } else { "FAILED" };
        let _ = writeln!(std::io::stdout(), "test {case} [should pass] ... {verdict}");
        if !outcome.is_empty() {
            failed.push(format!("{case} {outcome}"));
        }
    }
    assert!(
        failed.is_empty() && build.status.success(),
        "pass cases failed:\n{}\n\ncargo build said:\n{stderr}",
        failed.join("\n")
    );
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
        cases >= 14,
        "expected 7 cases and their snapshots in tests/expand, found {cases} files"
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

/// Without the `tokio` feature, a `Retrier`'s async run without `sleep` is a compile error that
/// names both fixes, as the attribute's is; with `sleep`, it compiles.
#[test]
fn a_retrier_without_tokio_needs_sleep() {
    let output = check_without_tokio("retrier_without_sleep");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "compiled without a timer:\n{stderr}"
    );
    assert!(
        stderr.contains("this `Retrier` has no timer to pause with"),
        "{stderr}"
    );
    assert!(
        stderr.contains("enable the `tokio` feature of `retry-runtime`"),
        "{stderr}"
    );
    assert!(stderr.contains("`.sleep(my_runtime::sleep)`"), "{stderr}");

    let output = check_without_tokio("retrier_with_sleep");
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
