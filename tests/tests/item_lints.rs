//! Lints about the annotated function itself (`dead_code`, `unsafe_code`, `missing_docs`) see it
//! as the user wrote it, not as macro output; and `unsafe fn` works, which this workspace's
//! `forbid(unsafe_code)` keeps out of the other test files. Through trybuild, whose projects do
//! not inherit the workspace's lints.

#[test]
fn item_lints() {
    let t = trybuild::TestCases::new();
    t.pass("tests/item_lints/pass/*.rs");
    t.compile_fail("tests/item_lints/*.rs");
}
