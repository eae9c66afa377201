//! The layout of this test binary holds: a file in `tests/it/` that `main.rs` does not declare
//! would never compile or run, and so would pass by not running.

use std::fs;
use std::path::Path;

#[test]
fn every_file_of_the_binary_is_declared_in_main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("it");
    let main = fs::read_to_string(dir.join("main.rs")).expect("tests/it/main.rs is readable");
    let mut modules = 0;
    for entry in fs::read_dir(&dir).expect("tests/it is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let module = match name.strip_suffix(".rs") {
            Some("main") => continue,
            Some(module) => module,
            None if path.join("mod.rs").is_file() => name,
            None => continue,
        };
        assert!(
            main.lines()
                .any(|line| line.trim() == format!("mod {module};")),
            "tests/it/{name} is not compiled: add `mod {module};` to tests/it/main.rs"
        );
        modules += 1;
    }
    assert!(modules >= 20, "found only {modules} modules in {dir:?}");
}

#[test]
fn no_test_file_is_left_outside_the_binary() {
    // A file in `tests/tests/` (where each capability was a binary of its own before) still
    // builds as one, but without `common`; one carried over by a merge belongs in `tests/it/`.
    let old = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let strays: Vec<_> = fs::read_dir(&old)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        strays.is_empty(),
        "move {strays:?} from tests/tests/ to tests/it/ and declare each as a `mod` in \
         tests/it/main.rs, using `common` for what it shares"
    );
}
