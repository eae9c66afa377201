//! Compile errors of `#[retry]` and `#[non_idempotent]`: one case per rule in `ui/`, each with
//! the `.stderr` a user sees. Regenerate with `TRYBUILD=overwrite`, then read every changed file.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
