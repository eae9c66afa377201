//! What the behaviour tests share: a transient error that carries the call number, a body that
//! fails until a given call, the time units the assertions are written in, the rule for a test
//! that cannot run here, and the databases of the store tests.

pub mod callsites;
pub mod databases;
pub mod named;
mod skip;

pub use skip::{skip_or_fail, under_ci};

use retry_runtime::Transient;
use std::cell::Cell;
use std::time::Duration;

/// One second; pauses and virtual times are written as multiples (`3 * S`).
pub const S: Duration = Duration::from_secs(1);
/// One millisecond.
pub const MS: Duration = Duration::from_millis(1);
/// One hour: a pause no test may really sleep.
pub const HOUR: Duration = Duration::from_secs(3600);

/// A transient failure of call number `.0` (counted from 1), so an assertion on the error says
/// which call produced it: `Err(Busy(4))` is the fourth call's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy(pub u32);

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

/// For `step`: a body that never succeeds.
pub const NEVER: u32 = u32::MAX;

/// Counts the call and fails with `Busy(call)` until call number `ok_on`, which returns
/// `Ok(call)`.
pub fn step(calls: &Cell<u32>, ok_on: u32) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() >= ok_on {
        Ok(calls.get())
    } else {
        Err(Busy(calls.get()))
    }
}

/// Counts the call and fails with `Busy(call)`: `step(calls, NEVER)`.
pub fn fail(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn a_skip_fails_under_ci_and_passes_elsewhere() {
    let outcome = std::panic::catch_unwind(|| {
        skip_or_fail("nothing is missing; this line is the rule's own test")
    });
    assert_eq!(outcome.is_err(), under_ci());
}
