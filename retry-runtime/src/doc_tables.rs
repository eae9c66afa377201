//! The argument, rule, jitter and backoff tables in the README, the guides (`docs/`) and these
//! docs are rendered from the grammar's key table (`retry_grammar::docs`), so they cannot drift
//! from what the macro accepts. This test fails when a copy differs; to rewrite every copy, run
//!
//! ```text
//! RETRY_DOCS=overwrite cargo test -p retry-runtime --lib doc_tables
//! ```

use retry_grammar::docs::{self, Flavor};
use std::path::Path;

/// The items the crate docs may link to from a table.
const LINKS: &[&str] = &[
    "Jitter",
    "Backoff",
    "Policy",
    "Transient",
    "Verdict",
    "RetryBudget",
    "CircuitBreaker",
    "CircuitOpen",
    "RetryEvent",
    "GiveUp",
    "Sleeper",
    "Elapsed",
];

/// A table and the file it is copied into, each line after `prefix`.
struct Copy {
    file: &'static str,
    prefix: &'static str,
    table: String,
}

fn copies() -> Vec<Copy> {
    let rustdoc = Flavor::Rustdoc { links: LINKS };
    vec![
        Copy {
            file: "../README.md",
            prefix: "",
            table: docs::arguments(Flavor::Readme),
        },
        Copy {
            file: "docs/behaviour.md",
            prefix: "",
            table: docs::rules(Flavor::Readme),
        },
        Copy {
            file: "docs/behaviour.md",
            prefix: "",
            table: docs::jitter(Flavor::Readme),
        },
        Copy {
            file: "src/lib.rs",
            prefix: "/// ",
            table: docs::arguments(rustdoc),
        },
        Copy {
            file: "src/lib.rs",
            prefix: "/// ",
            table: docs::rules(rustdoc),
        },
        Copy {
            file: "src/policy.rs",
            prefix: "/// ",
            table: docs::jitter(rustdoc),
        },
        Copy {
            file: "src/policy.rs",
            prefix: "/// ",
            table: docs::backoff(rustdoc),
        },
    ]
}

/// The file with the copy's table in place of the one under the same header; `None` when the
/// header is missing.
fn with_table(text: &str, copy: &Copy) -> Option<String> {
    let header = copy.table.lines().next()?;
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.trim_end() == format!("{}{header}", copy.prefix).trim_end())?;
    let table_line = |line: &&&str| {
        line.strip_prefix(copy.prefix.trim_end())
            .is_some_and(|rest| rest.trim_start().starts_with('|'))
    };
    let end = start + lines[start..].iter().take_while(table_line).count();
    let mut out: Vec<String> = lines[..start].iter().map(|l| (*l).to_owned()).collect();
    out.extend(
        copy.table
            .lines()
            .map(|line| format!("{}{line}", copy.prefix)),
    );
    out.extend(lines[end..].iter().map(|l| (*l).to_owned()));
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    Some(joined)
}

#[test]
fn doc_tables_match_the_key_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let overwrite = std::env::var_os("RETRY_DOCS").is_some_and(|v| v == "overwrite");
    let mut stale = Vec::new();
    for copy in copies() {
        let path = root.join(copy.file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let header = copy.table.lines().next().unwrap_or_default();
        let Some(updated) = with_table(&text, &copy) else {
            panic!(
                "{} has no table with the header `{}{header}`; add the header line, then run \
                 `RETRY_DOCS=overwrite cargo test -p retry-runtime --lib doc_tables`",
                copy.file, copy.prefix
            );
        };
        if updated != text {
            if overwrite {
                std::fs::write(&path, updated)
                    .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            } else {
                stale.push(format!("{} (`{header}`)", copy.file));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "these tables differ from the key table in retry-grammar: {}; run \
         `RETRY_DOCS=overwrite cargo test -p retry-runtime --lib doc_tables` and review the diff",
        stale.join(", ")
    );
}

#[test]
fn a_table_is_replaced_whole() {
    let copy = Copy {
        file: "",
        prefix: "/// ",
        table: "| a | b |\n|---|---|\n| 1 | 2 |\n".to_owned(),
    };
    let text = "/// intro\n///\n/// | a | b |\n/// |---|---|\n/// | 0 | 0 |\n/// | 9 | 9 |\n///\n/// after\n";
    assert_eq!(
        with_table(text, &copy).as_deref(),
        Some("/// intro\n///\n/// | a | b |\n/// |---|---|\n/// | 1 | 2 |\n///\n/// after\n")
    );
}
