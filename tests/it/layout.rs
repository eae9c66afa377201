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

// ---- what the documentation says about the tree ---------------------------------------------

/// The workspace's root.
fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file of the tree that is ours: no build output (`target/`), no dot-directory but
/// `.ci/`. Paths relative to the root, with `/`.
fn tree() -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "target" || (name.starts_with('.') && name != ".ci") {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if entry.path().is_dir() {
                walk(&entry.path(), &path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root(), "", &mut files);
    files.sort();
    files
}

/// The directory of a file, `""` for the root.
fn parent(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// `base/path`, with `.` and `..` resolved; `None` above the root.
fn join(base: &str, path: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        match part {
            "." => {}
            ".." => {
                parts.pop()?;
            }
            _ => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// What a line of documentation names as a path: the text of a code span (`` `a/b.rs` ``) that
/// is a path and nothing else, and the target of a Markdown link (`[a](a/b.md)`), without an
/// `#anchor`.
fn named_paths(line: &str) -> Vec<&str> {
    let mut found: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(rest.len());
        found.push(&rest[..end]);
    }
    found
        .into_iter()
        .map(|p| p.split('#').next().unwrap_or(p))
        .filter(|p| {
            p.contains('/')
                && !p.starts_with('/')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
        })
        .collect()
}

/// Paths the documentation names on purpose although they are not in the tree.
const NOT_IN_THE_TREE: &[(&str, &str)] = &[
    (
        "tests/tests/",
        "the directory that must stay empty (`no_test_file_is_left_outside_the_binary`)",
    ),
    (
        ".cargo/config.toml",
        "a user's cargo configuration (apalis's evaluation in bench/RESULTS.md)",
    ),
];

/// Each path that a Markdown file or a doc comment names (in a code span or as a link target)
/// exists, relative to the file's directory, its package (or the package's sources), or the root.
/// A moved or deleted file or directory then cannot stay named in the docs. Build output
/// (`target/...`) is not checked, nor a span whose first part is no name in the tree
/// (`d/2`, `happy/sync/retry`), which is not a path.
#[test]
fn every_path_the_docs_name_exists() {
    let files = tree();
    let mut present: std::collections::BTreeSet<String> = files.iter().cloned().collect();
    for file in &files {
        let mut dir = parent(file);
        while !dir.is_empty() {
            present.insert(dir.to_owned());
            dir = parent(dir);
        }
    }
    let names: std::collections::BTreeSet<&str> = present
        .iter()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .collect();
    let packages: Vec<&str> = files
        .iter()
        .filter_map(|f| f.strip_suffix("Cargo.toml"))
        .map(|dir| dir.trim_end_matches('/'))
        .collect();
    let package_of = |file: &str| {
        packages
            .iter()
            .copied()
            .filter(|p| p.is_empty() || file.starts_with(&format!("{p}/")))
            .max_by_key(|p| p.len())
            .unwrap_or("")
    };

    let mut checked = 0;
    let mut missing = Vec::new();
    for file in &files {
        let markdown = file.ends_with(".md");
        let rust = file.ends_with(".rs") && !file.ends_with(".expanded.rs");
        if !(markdown || rust) {
            continue;
        }
        let Ok(text) = fs::read_to_string(root().join(file)) else {
            continue;
        };
        let package = package_of(file);
        let bases = [
            parent(file).to_owned(),
            package.to_owned(),
            join(package, "src").unwrap_or_default(),
            String::new(),
        ];
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let doc_comment = trimmed.starts_with("//!") || trimmed.starts_with("///");
            if !(markdown || doc_comment) {
                continue;
            }
            for path in named_paths(line) {
                let first = path.split('/').next().unwrap_or(path);
                let is_path = matches!(first, "." | "..") || names.contains(first);
                if !is_path
                    || path.starts_with("target/")
                    || NOT_IN_THE_TREE.iter().any(|(p, _)| *p == path)
                {
                    continue;
                }
                checked += 1;
                let wanted = path.trim_end_matches('/');
                if !bases
                    .iter()
                    .filter_map(|base| join(base, wanted))
                    .any(|p| present.contains(&p))
                {
                    missing.push(format!("{file}:{}: `{path}`", number + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the docs name paths that are not in the tree (relative to the file, its package, its \
         package's src/ or the root); correct each, or name it from the root:\n{}",
        missing.join("\n")
    );
    assert!(
        checked >= 100,
        "only {checked} paths were checked: is the walk finding the docs?"
    );
}

/// The `[features]` of a package's manifest: each name, and whether `default` lists it.
fn manifest_features(package: &str) -> Vec<(String, bool)> {
    let manifest = fs::read_to_string(root().join(package).join("Cargo.toml"))
        .expect("the package's Cargo.toml is readable");
    let mut in_features = false;
    let mut features = Vec::new();
    let mut defaults = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features || line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim().to_owned();
        if name == "default" {
            defaults = value
                .trim()
                .trim_matches(|c| c == '[' || c == ']')
                .split(',')
                .map(|f| f.trim().trim_matches('"').to_owned())
                .filter(|f| !f.is_empty())
                .collect();
        } else {
            features.push(name);
        }
    }
    assert!(
        !features.is_empty(),
        "no [features] read from {package}/Cargo.toml"
    );
    features
        .into_iter()
        .map(|f| {
            let on = defaults.contains(&f);
            (f, on)
        })
        .collect()
}

/// Every table of features in a package's docs (a `| feature | default | ... |` header, in a
/// Markdown file or a doc comment) lists exactly the features of the package's `Cargo.toml`,
/// in its order, each `on` or `off` as `default` says: a feature added, renamed or removed, or a
/// default changed, shows here until the tables say so too. What each row says a feature adds
/// is prose, read in review.
#[test]
fn every_feature_table_matches_the_manifest() {
    let files = tree();
    let mut tables = 0;
    for file in &files {
        if !(file.ends_with(".md") || file.ends_with(".rs")) {
            continue;
        }
        let Some(package) = [
            "retry-runtime",
            "retry-durable",
            "retry-macro",
            "retry-grammar",
        ]
        .into_iter()
        .find(|p| file.starts_with(&format!("{p}/"))) else {
            continue;
        };
        let text = fs::read_to_string(root().join(file)).expect("a doc file is readable");
        let lines: Vec<&str> = text
            .lines()
            .map(|l| {
                let l = l.trim_start();
                l.strip_prefix("//!")
                    .or_else(|| l.strip_prefix("///"))
                    .unwrap_or(l)
                    .trim()
            })
            .collect();
        for (at, line) in lines.iter().enumerate() {
            if !line.starts_with("| feature | default |") {
                continue;
            }
            tables += 1;
            let rows: Vec<(String, bool)> = lines[at + 2..]
                .iter()
                .take_while(|l| l.starts_with('|'))
                .map(|row| {
                    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                    let name = cells
                        .get(1)
                        .copied()
                        .unwrap_or("")
                        .trim_matches('`')
                        .to_owned();
                    let default = match cells.get(2).copied() {
                        Some("on") => true,
                        Some("off") => false,
                        other => panic!(
                            "{file}, the row of `{name}`: the default column says {other:?}, \
                             expected `on` or `off`"
                        ),
                    };
                    (name, default)
                })
                .collect();
            let expected = manifest_features(package);
            let show = |features: &[(String, bool)]| {
                features
                    .iter()
                    .map(|(name, on)| format!("{name} ({})", if *on { "on" } else { "off" }))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            assert_eq!(
                show(&rows),
                show(&expected),
                "the feature table in {file} (line {}) differs from {package}/Cargo.toml's \
                 [features]: a row per feature, in the manifest's order, `on` for those in \
                 `default`",
                at + 1
            );
        }
    }
    assert!(
        tables >= 3,
        "found {tables} feature tables; expected retry-runtime's two and retry-durable's"
    );
}

/// The lines of code of a crate's sources: no blank lines, no comments, no unit tests (a
/// `#[cfg(test)]` module inline or in a file of its own), as the structure reviews count them
/// (`python3 ../shared/tools/codelines.py --total DIR`, beside this repository's checkout).
fn lines_of_code(src: &Path) -> usize {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir)
            .expect("the source directory is readable")
            .filter_map(Result::ok)
        {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = fs::read_to_string(&path).expect("a source file is readable");
                files.push((path, text));
            }
        }
    }
    // Files declared as a test module (`#[cfg(test)] mod tests;`) are unit tests, whole.
    let mut test_files = std::collections::HashSet::new();
    for (path, text) in &files {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(name) = declared_module(line) else {
                continue;
            };
            let attributes = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim().starts_with("#["));
            if !attributes.into_iter().any(|a| is_cfg_test(a.trim())) {
                continue;
            }
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let dir = path.parent().unwrap_or(src);
            let base = if ["mod", "lib", "main"].contains(&stem) {
                dir.to_path_buf()
            } else {
                dir.join(stem)
            };
            test_files.insert(base.join(format!("{name}.rs")));
            test_files.insert(base.join(name).join("mod.rs"));
        }
    }
    files
        .iter()
        .filter(|(path, _)| !test_files.contains(path))
        .map(|(_, text)| code_lines(text))
        .sum()
}

/// `name` of a line that declares a module in another file (`mod name;`, `pub(crate) mod name;`).
fn declared_module(line: &str) -> Option<&str> {
    let line = line.trim();
    let line = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let name = line.strip_prefix("mod ")?.trim().strip_suffix(';')?.trim();
    name.chars()
        .all(|c| c.is_alphanumeric() || c == '_')
        .then_some(name)
}

fn is_cfg_test(attribute: &str) -> bool {
    attribute.starts_with("#[cfg(test") || attribute.starts_with("#[cfg(all(test")
}

/// Non-blank lines that are not comments (`//`, doc comments) and not inside a `#[cfg(test)]`
/// module, as `python3 ../shared/tools/codelines.py --total` counts them.
fn code_lines(text: &str) -> usize {
    let (mut code, mut inside, mut pending, mut depth) = (0, false, false, 0i64);
    let braces = |l: &str| l.matches('{').count() as i64 - l.matches('}').count() as i64;
    for line in text.lines() {
        let s = line.trim();
        if inside {
            depth += braces(line);
            inside = depth > 0;
        } else if is_cfg_test(s) {
            pending = true;
        } else if pending {
            let s = s
                .strip_prefix("pub(crate) ")
                .or_else(|| s.strip_prefix("pub "))
                .unwrap_or(s);
            if s.starts_with("mod ") && s.ends_with('{') {
                depth = braces(line);
                inside = depth > 0;
                pending = false;
            } else if !(s.starts_with("#[") || s.is_empty()) {
                pending = false;
            }
        } else if !s.is_empty() && !s.starts_with("//") {
            code += 1;
        }
    }
    code
}

/// The number written just before `words` in `text` (`"about 7,700 lines"`), without its commas.
fn number_before(text: &str, words: &str) -> Option<usize> {
    let at = text.find(words)?;
    let digits: String = text[..at]
        .trim_end()
        .rsplit(' ')
        .next()?
        .chars()
        .filter(|c| *c != ',')
        .collect();
    digits.parse().ok()
}

/// The README says what "small" means for `retry-runtime` in numbers; the two that change with
/// the code are checked: its lines of code (within 5 %, as the README rounds them) and the
/// packages it builds with its default features (`cargo tree`, exactly).
#[test]
fn the_readme_numbers_of_the_runtime_are_true() {
    let readme = fs::read_to_string(root().join("README.md")).expect("README.md is readable");
    let stated = number_before(&readme, "lines of code (")
        .expect("the README says `retry-runtime` is about N lines of code (...)");
    let counted = lines_of_code(&root().join("retry-runtime/src"));
    assert!(
        stated.abs_diff(counted) * 20 <= counted,
        "the README says {stated} lines of code in retry-runtime; counted as `python3 \
         ../shared/tools/codelines.py --total retry-runtime/src` counts them, {counted}: write \
         the new figure"
    );

    let stated = number_before(&readme, "packages beneath it")
        .expect("the README says how many packages `retry-runtime` builds beneath it");
    // `-p`: the runtime alone, so with its default features (the workspace's other members would
    // add the integrations).
    let tree = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "retry-runtime",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(root())
        .output()
        .expect("cargo runs");
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let mut packages: Vec<String> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "retry-runtime")
        .collect();
    packages.sort();
    packages.dedup();
    assert_eq!(
        stated,
        packages.len(),
        "the README says retry-runtime builds {stated} packages beneath it; with its default \
         features it builds {}: {}",
        packages.len(),
        packages.join(", ")
    );
}
