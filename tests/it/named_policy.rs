//! `#[retry(policy = "name")]` and `retry_block!(policy = "name", ...)`: a policy looked up by
//! name at run time (`retry_runtime::named`), once per call, with the timings written beside it
//! as the default; the name's budget and breaker shared with every other door that uses it.
//! Exact pauses on tokio's paused clock, call counts.

// The resolver is the process's: each test holds the guard of `installed()` for its whole run,
// awaits included, so that no other test of this binary installs another meanwhile. Blocking
// the thread of another test's runtime while it waits is what is wanted.
#![allow(clippy::await_holding_lock)]

use crate::common::named::{Table, installed};
use crate::common::{Busy, MS, NEVER, S, fail, step};
use retry_runtime::named::{self, Named};
use retry_runtime::{
    BreakerState, CircuitBreaker, CircuitOpen, Jitter, Policy, Retrier, RetryBudget, Transient,
    retry, retry_block, testing,
};
use std::cell::Cell;
use std::sync::Arc;
use tokio::time::Instant;

/// The entry's timings: 3 retries, 100 ms doubling, no jitter: pauses 100, 200 and 400 ms.
const CONFIGURED: Policy = Policy::new()
    .max(3)
    .base(std::time::Duration::from_millis(100))
    .jitter(Jitter::None);

/// The written default: 1 retry after 1 s.
#[retry(policy = "it.named.attribute", max = 1, base = "1s", jitter = none)]
async fn check(calls: &Cell<u32>, ok_on: u32) -> Result<u32, Busy> {
    tokio::task::yield_now().await;
    step(calls, ok_on)
}

/// Awaits `call`: its result, the calls it counted and the virtual time it took.
async fn timed(
    calls: &Cell<u32>,
    call: impl Future<Output = Result<u32, Busy>>,
) -> (Result<u32, Busy>, u32, std::time::Duration) {
    let t0 = Instant::now();
    let result = call.await;
    (result, calls.get(), t0.elapsed())
}

#[tokio::test(start_paused = true)]
async fn an_attribute_uses_the_named_policy_and_falls_back_to_the_written_one() {
    let (_guard, table) = installed();
    table.set(Named::new("it.named.attribute", CONFIGURED));
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, check(&calls, NEVER)).await,
        (Err(Busy(4)), 4, 700 * MS),
        "the name's 3 retries, 100 + 200 + 400 ms"
    );
    let calls = Cell::new(0);
    assert_eq!(timed(&calls, check(&calls, 3)).await, (Ok(3), 3, 300 * MS));

    // The name is gone: the next call takes the timings written in the attribute.
    table.remove("it.named.attribute");
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, check(&calls, NEVER)).await,
        (Err(Busy(2)), 2, S)
    );
}

/// A block with the written default of `check`.
async fn block(calls: &Cell<u32>) -> Result<u32, Busy> {
    retry_block!(policy = "it.named.block", max = 1, base = "1s", jitter = none => async {
        tokio::task::yield_now().await;
        fail(calls)
    })
    .await
}

/// Written without a deadline.
#[retry(policy = "it.named.deadline", max = 9, base = "100ms", jitter = none)]
async fn within_the_names_deadline(calls: &Cell<u32>) -> Result<u32, Busy> {
    tokio::task::yield_now().await;
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn the_names_deadline_holds_where_none_is_written() {
    let (_guard, table) = installed();
    // Pauses 100 and 200 ms: the second would end at 300 ms, past the name's 250 ms.
    table.set(Named::new(
        "it.named.deadline",
        CONFIGURED.deadline(250 * MS),
    ));
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, within_the_names_deadline(&calls)).await,
        (Err(Busy(2)), 2, 100 * MS)
    );
    table.remove("it.named.deadline");
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, within_the_names_deadline(&calls)).await,
        (
            Err(Busy(10)),
            10,
            (100 + 200 + 400 + 800 + 1600 + 3200 + 6400 + 12800 + 25600) * MS
        ),
        "written: 9 retries, no deadline"
    );
}

#[tokio::test(start_paused = true)]
async fn a_block_uses_the_named_policy_and_falls_back_to_the_written_one() {
    let (_guard, table) = installed();
    table.set(Named::new("it.named.block", CONFIGURED));
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, block(&calls)).await,
        (Err(Busy(4)), 4, 700 * MS)
    );
    table.remove("it.named.block");
    let calls = Cell::new(0);
    assert_eq!(timed(&calls, block(&calls)).await, (Err(Busy(2)), 2, S));

    // A sync block, its pauses recorded.
    table.set(Named::new("it.named.block", CONFIGURED));
    let calls = Cell::new(0);
    let sync_block = || {
        retry_block!(policy = "it.named.block", max = 1, base = "1s", jitter = none => {
            fail(&calls)
        })
    };
    let (result, pauses) = testing::record(sync_block);
    assert_eq!((result, calls.get()), (Err(Busy(4)), 4));
    assert_eq!(pauses, [100 * MS, 200 * MS, 400 * MS]);
}

/// Never in the table: the written timings, and the defaults for what is not written.
#[retry(policy = "it.named.never-configured", max = 2, jitter = none)]
fn never_configured(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[test]
fn an_unknown_name_takes_the_written_timings_and_the_defaults() {
    let (_guard, _table) = installed();
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| never_configured(&calls));
    assert_eq!((result, calls.get()), (Err(Busy(3)), 3));
    assert_eq!(pauses, [S, 2 * S], "`base` not written: its default, 1 s");
}

/// Run in a process of its own by the test below, where no resolver is ever installed.
#[test]
#[ignore = "run by `no_resolver_installed_takes_the_written_timings`, in a process of its own"]
fn without_a_resolver() {
    // Only in the child: run with `--include-ignored`, this process may have a resolver.
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    assert!(named::resolve("it.named.never-configured").is_none());
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| never_configured(&calls));
    assert_eq!((result, calls.get()), (Err(Busy(3)), 3));
    assert_eq!(pauses, [S, 2 * S]);
    let block = retry_block!(policy = "it.named.block", max = 1, base = "1s", jitter = none => {
        fail(&calls)
    });
    assert_eq!(block, Err(Busy(5)), "a block too: two more calls");
    println!("{CHILD}: checked");
}

/// Set for the child process of the test below.
const CHILD: &str = "RETRY_TEST_NAMED_WITHOUT_RESOLVER";

#[test]
fn no_resolver_installed_takes_the_written_timings() {
    // This binary's other tests install one; a child process of the same binary has none.
    let output = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--ignored",
            "--exact",
            "named_policy::without_a_resolver",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(&format!("{CHILD}: checked")),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The entry the next call will get, swapped by the body while a call runs.
#[retry(policy = "it.named.swapped", max = 1, base = "1s", jitter = none)]
async fn swapped(table: &Table, calls: &Cell<u32>) -> Result<u32, Busy> {
    if calls.get() == 0 {
        // Mid-call: a reload gives the name 0 retries. This call keeps the entry it started with.
        table.set(Named::new("it.named.swapped", Policy::new().max(0)));
    }
    tokio::task::yield_now().await;
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_call_holds_the_entry_it_started_with() {
    let (_guard, table) = installed();
    table.set(Named::new("it.named.swapped", CONFIGURED));
    let calls = Cell::new(0);
    assert_eq!(
        timed(&calls, swapped(table, &calls)).await,
        (Err(Busy(4)), 4, 700 * MS),
        "all four attempts and three pauses of the entry it started with"
    );
    let calls = Cell::new(1); // no swap this time
    assert_eq!(
        timed(&calls, swapped(table, &calls)).await,
        (Err(Busy(2)), 2, std::time::Duration::ZERO),
        "the next call sees the new entry: no retry"
    );
}

#[derive(Debug, PartialEq)]
enum ContractError {
    Overloaded,
    Open,
}

impl Transient for ContractError {
    fn is_transient(&self) -> bool {
        *self == ContractError::Overloaded
    }
}

impl From<CircuitOpen> for ContractError {
    fn from(_: CircuitOpen) -> Self {
        ContractError::Open
    }
}

/// The written defaults, which the name's own replace: a budget with plenty of tokens and a
/// breaker that never opens here.
static WRITTEN_BUDGET: RetryBudget = RetryBudget::new().min_per_second(1_000);
static WRITTEN_BREAKER: CircuitBreaker = CircuitBreaker::new().consecutive_failures(1_000);

#[retry(policy = "it.named.shared", max = 9, base = "1ms", jitter = none,
        budget = WRITTEN_BUDGET, breaker = WRITTEN_BREAKER)]
async fn contract(calls: &Cell<u32>) -> Result<(), ContractError> {
    calls.set(calls.get() + 1);
    tokio::task::yield_now().await;
    Err(ContractError::Overloaded)
}

/// The same name without `breaker =`: its error type is not asked to carry `CircuitOpen`, so
/// the name's breaker is not consulted here (its budget is).
#[retry(policy = "it.named.shared", max = 9, base = "1ms", jitter = none)]
async fn contract_without_breaker(calls: &Cell<u32>) -> Result<(), ContractError> {
    calls.set(calls.get() + 1);
    tokio::task::yield_now().await;
    Err(ContractError::Overloaded)
}

#[tokio::test(start_paused = true)]
async fn the_names_budget_and_breaker_are_shared_with_a_retrier() {
    let (_guard, table) = installed();
    // One retry per second from the reserve, no tokens; open after 3 failures in a row, for 30 s.
    let budget = Arc::new(
        RetryBudget::new()
            .ratio(0.0)
            .max_tokens(0)
            .min_per_second(1),
    );
    let breaker = Arc::new(
        CircuitBreaker::new()
            .consecutive_failures(3)
            .open_for(30 * S),
    );
    let entry = table.set(
        Named::new("it.named.shared", CONFIGURED)
            .budget(budget.clone())
            .breaker(breaker.clone()),
    );
    let now = || Instant::now().into_std();

    // The attribute: the name's 3 retries, but its budget allows one this second.
    let calls = Cell::new(0);
    assert_eq!(contract(&calls).await, Err(ContractError::Overloaded));
    assert_eq!(
        calls.get(),
        2,
        "one retry from the name's budget, not `max = 9`"
    );

    // A Retrier built from the same entry draws from the same budget: none left this second.
    let retrier_calls = Cell::new(0);
    let policy = *entry.policy();
    let answer = Retrier::new(&policy)
        .budget(entry.get_budget().expect("a budget"))
        .breaker(entry.get_breaker().expect("a breaker"))
        .run_async(|| async {
            retrier_calls.set(retrier_calls.get() + 1);
            Err::<(), _>(ContractError::Overloaded)
        })
        .await;
    assert_eq!(
        (answer, retrier_calls.get()),
        (Err(ContractError::Overloaded), 1)
    );
    // Three failures in a row across the two doors: the name's breaker is open for both.
    assert!(matches!(breaker.state(now()), BreakerState::Open { .. }));
    assert_eq!(WRITTEN_BREAKER.state(now()), BreakerState::Closed);
    let calls = Cell::new(0);
    assert_eq!(contract(&calls).await, Err(ContractError::Open));
    assert_eq!(
        calls.get(),
        0,
        "refused by the name's breaker without a call"
    );

    // Without `breaker =` the name's breaker is not asked; its budget still is.
    tokio::time::advance(S).await;
    let calls = Cell::new(0);
    assert_eq!(
        contract_without_breaker(&calls).await,
        Err(ContractError::Overloaded)
    );
    assert_eq!(calls.get(), 2);
}
