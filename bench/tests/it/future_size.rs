//! What an annotated async function's future holds on top of its body's: the loop state and
//! the attempt's frame, and no more. Every byte is moved with the future, and on the happy path
//! the move is most of what the attribute costs (`bench/RESULTS.md` §3): at 160 bytes the
//! compiler moved it with a call to `memmove`, which took more than half the time of a call.

use retry_runtime::{
    CircuitBreaker, CircuitOpen, IdempotencyKey, Transient, non_idempotent, retry,
};

#[derive(Debug)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<CircuitOpen> for Busy {
    fn from(_: CircuitOpen) -> Self {
        Busy
    }
}

static BREAKER: CircuitBreaker = CircuitBreaker::new();

async fn plain(x: u64) -> Result<u64, Busy> {
    Ok(x * 3)
}

#[retry(max = 3, base = "1s")]
async fn annotated(x: u64) -> Result<u64, Busy> {
    Ok(x * 3)
}

#[retry(max = 3, base = "1s", jitter = none, on = |_: &Busy| true)]
async fn with_classifier(x: u64) -> Result<u64, Busy> {
    Ok(x * 3)
}

#[non_idempotent]
#[retry(max = 3, base = "1s", breaker = BREAKER)]
async fn with_key_and_breaker(x: u64, _key: &IdempotencyKey) -> Result<u64, Busy> {
    Ok(x * 3)
}

/// Over a plain function's future: the policy, the name, the clock, the classifier's caller and
/// the progress (72 bytes), the attempt's frame (8) and the state of the outer future.
const OVERHEAD: usize = 104;

/// With retry-runtime's `faults` compiled in (a staging build with `retry-chaos`; `cargo test
/// --workspace` builds it so, because `retry-chaos` is a member), each attempt's future also has
/// room for an injected latency and an injected error's maker.
const FAULTS_ROOM: usize = 24;

#[test]
fn a_function_without_options_adds_only_the_loop_state() {
    let plain = size_of_val(&plain(1));
    let annotated = size_of_val(&annotated(1));
    if retry_runtime::faults::COMPILED_IN {
        // The staging build: `.ci/run` checks the production bounds below with
        // `cargo test -p retry-bench-tests --test it future_size`, where `faults` is off.
        assert!(
            annotated <= plain + OVERHEAD + FAULTS_ROOM,
            "{annotated} bytes against {plain} for the plain function, with `faults`"
        );
    } else {
        assert!(
            annotated <= plain + OVERHEAD,
            "{annotated} bytes against {plain} for the plain function"
        );
        assert!(
            annotated <= 128,
            "{annotated} bytes: moving it calls memmove"
        );
    }
    assert_eq!(size_of_val(&with_classifier(1)), annotated);
}

#[test]
fn options_pay_for_what_they_use() {
    let key = IdempotencyKey::from("k");
    let annotated = size_of_val(&annotated(1));
    let extended = size_of_val(&with_key_and_breaker(1, &key));
    // The key, the breaker and its admission are carried only by the function that uses them.
    assert!(extended > annotated, "{extended} against {annotated}");
}

#[retry(max = 3, base = "1s")]
async fn by_reference(x: u64, reference: &str) -> Result<u64, Busy> {
    Ok(x * reference.len() as u64)
}

#[retry(max = 3, base = "1s")]
async fn keyed_by_reference(x: u64, #[idempotency_key] reference: &str) -> Result<u64, Busy> {
    Ok(x * reference.len() as u64)
}

#[retry(max = 3, base = "1s")]
async fn by_number(x: u64, order: u64) -> Result<u64, Busy> {
    Ok(x * order)
}

#[retry(max = 3, base = "1s")]
async fn keyed_by_number(x: u64, #[idempotency_key] order: u64) -> Result<u64, Busy> {
    Ok(x * order)
}

#[test]
fn an_idempotency_key_costs_one_reference() {
    // The attempt borrows the key for `attempt().key()`: one reference in its future, and no
    // copy of the key. The reference goes to the key's own type, past the parameter's
    // references, so a `&str` key is lent as the `str` itself: a reference with its length.
    let pointer = size_of::<usize>();
    let (plain, keyed) = (
        size_of_val(&by_reference(1, "k")),
        size_of_val(&keyed_by_reference(1, "k")),
    );
    assert_eq!(
        keyed,
        plain + size_of::<&str>(),
        "a `&str` key: {keyed} against {plain}"
    );
    let (plain, keyed) = (
        size_of_val(&by_number(1, 2)),
        size_of_val(&keyed_by_number(1, 2)),
    );
    assert_eq!(
        keyed,
        plain + pointer,
        "a `u64` key: {keyed} against {plain}"
    );
}
