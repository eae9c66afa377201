use retry_runtime::non_idempotent;

// Without `#[retry]`, the mark only documents the function.
#[non_idempotent]
fn pay_out(claim: u32) -> u32 {
    claim
}

fn main() {
    assert_eq!(pay_out(4711), 4711);
}
