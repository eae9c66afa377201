//! Which errors are retried: `on = path`, `on = closure`, the error type's `Transient` impl, the
//! impls for `std::io::Error` and tokio's `Elapsed`. Everything else, and every `Ok`, is returned
//! after the call that produced it, unchanged. `?` and `return` end the attempt, not the call.

use retry_runtime::{Transient, retry};
use std::cell::{Cell, RefCell};
use std::io;
use std::time::Duration;

/// The contract service's errors; the number is the call that produced it, so a test can tell
/// which error came back.
#[derive(Debug, PartialEq)]
enum ContractError {
    Overloaded(u32),
    InvalidClaim(u32),
}

impl ContractError {
    fn is_overloaded(&self) -> bool {
        matches!(self, ContractError::Overloaded(_))
    }
}

fn overloaded(error: &ContractError) -> bool {
    error.is_overloaded()
}

mod classify {
    pub(crate) fn overloaded(error: &super::ContractError) -> bool {
        error.is_overloaded()
    }
}

/// A business answer: lives in `Ok`, never retried.
#[derive(Debug, PartialEq)]
enum Coverage {
    Covered,
    NotCovered,
}

/// Plays back `script`, one entry per call; when it runs out, the service stays overloaded.
struct Service {
    calls: Cell<u32>,
    script: RefCell<Vec<Answer>>,
}

#[derive(Clone, Copy)]
enum Answer {
    Overloaded,
    Invalid,
    Covered,
    NotCovered,
}

impl Service {
    fn new(script: &[Answer]) -> Self {
        let mut script = script.to_vec();
        script.reverse();
        Service {
            calls: Cell::new(0),
            script: RefCell::new(script),
        }
    }

    fn coverage(&self) -> Result<Coverage, ContractError> {
        let call = self.calls.get() + 1;
        self.calls.set(call);
        match self.script.borrow_mut().pop().unwrap_or(Overloaded) {
            Overloaded => Err(ContractError::Overloaded(call)),
            Invalid => Err(ContractError::InvalidClaim(call)),
            Covered => Ok(Coverage::Covered),
            NotCovered => Ok(Coverage::NotCovered),
        }
    }

    fn calls(&self) -> u32 {
        self.calls.get()
    }
}

use Answer::*;

// ---- `on = path` ---------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none, on = overloaded)]
fn by_fn(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[test]
fn on_a_fn_retries_what_it_accepts() {
    let service = Service::new(&[Overloaded, Overloaded, Covered]);
    assert_eq!(by_fn(&service), Ok(Coverage::Covered));
    assert_eq!(service.calls(), 3);
}

#[test]
fn on_a_fn_returns_what_it_rejects_at_once() {
    let service = Service::new(&[Invalid, Covered]);
    assert_eq!(by_fn(&service), Err(ContractError::InvalidClaim(1)));
    assert_eq!(service.calls(), 1);
}

#[test]
fn a_rejected_error_after_retries_stops_the_loop() {
    let service = Service::new(&[Overloaded, Overloaded, Invalid, Covered]);
    assert_eq!(by_fn(&service), Err(ContractError::InvalidClaim(3)));
    assert_eq!(service.calls(), 3);
}

#[test]
fn the_last_error_is_returned_unchanged_when_retries_run_out() {
    let service = Service::new(&[]);
    assert_eq!(by_fn(&service), Err(ContractError::Overloaded(4)));
    assert_eq!(service.calls(), 4);
}

#[test]
fn a_business_answer_is_returned_after_one_call() {
    let service = Service::new(&[NotCovered, Covered]);
    assert_eq!(by_fn(&service), Ok(Coverage::NotCovered));
    assert_eq!(service.calls(), 1);
}

#[retry(max = 3, base = "1ms", jitter = none, on = classify::overloaded)]
fn by_module_path(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[retry(max = 3, base = "1ms", jitter = none, on = ContractError::is_overloaded)]
fn by_method_path(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[test]
fn on_a_module_or_method_path() {
    let service = Service::new(&[Overloaded, Covered]);
    assert_eq!(by_module_path(&service), Ok(Coverage::Covered));
    assert_eq!(service.calls(), 2);
    let service = Service::new(&[Invalid, Covered]);
    assert_eq!(
        by_module_path(&service),
        Err(ContractError::InvalidClaim(1))
    );

    let service = Service::new(&[Overloaded, Covered]);
    assert_eq!(by_method_path(&service), Ok(Coverage::Covered));
    assert_eq!(service.calls(), 2);
    let service = Service::new(&[Invalid, Covered]);
    assert_eq!(
        by_method_path(&service),
        Err(ContractError::InvalidClaim(1))
    );
}

// ---- `on = closure` ------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none, on = |e| matches!(e, ContractError::Overloaded(_)))]
fn by_closure(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[retry(max = 3, base = "1ms", jitter = none, on = |e: &ContractError| e.is_overloaded())]
fn by_typed_closure(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

/// A closure can read the parameters: it is evaluated inside the function.
#[retry(max = 3, base = "1ms", jitter = none, on = |e| e.is_overloaded() && *retry_overload)]
fn by_capturing_closure(
    service: &Service,
    retry_overload: &bool,
) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[test]
fn on_a_closure() {
    for f in [by_closure, by_typed_closure] {
        let service = Service::new(&[Overloaded, Overloaded, Covered]);
        assert_eq!(f(&service), Ok(Coverage::Covered));
        assert_eq!(service.calls(), 3);
        let service = Service::new(&[Invalid, Covered]);
        assert_eq!(f(&service), Err(ContractError::InvalidClaim(1)));
        assert_eq!(service.calls(), 1);
    }
    let service = Service::new(&[Overloaded, Covered]);
    assert_eq!(by_capturing_closure(&service, &true), Ok(Coverage::Covered));
    let service = Service::new(&[Overloaded, Covered]);
    assert_eq!(
        by_capturing_closure(&service, &false),
        Err(ContractError::Overloaded(1))
    );
}

#[retry(max = 3, base = "1s", jitter = none, on = |e| matches!(e, ContractError::Overloaded(_)))]
async fn async_by_closure(service: &Service) -> Result<Coverage, ContractError> {
    tokio::task::yield_now().await;
    service.coverage()
}

#[retry(max = 3, base = "1s", jitter = none, on = overloaded)]
async fn async_by_fn(service: &Service) -> Result<Coverage, ContractError> {
    service.coverage()
}

#[tokio::test(start_paused = true)]
async fn async_on_a_closure_or_fn() {
    let t0 = tokio::time::Instant::now();
    let service = Service::new(&[Overloaded, Overloaded, Covered]);
    assert_eq!(async_by_closure(&service).await, Ok(Coverage::Covered));
    assert_eq!(service.calls(), 3);
    assert_eq!(t0.elapsed(), Duration::from_secs(3));

    let service = Service::new(&[Overloaded, Invalid]);
    assert_eq!(
        async_by_fn(&service).await,
        Err(ContractError::InvalidClaim(2))
    );
    let service = Service::new(&[NotCovered]);
    assert_eq!(async_by_fn(&service).await, Ok(Coverage::NotCovered));
    assert_eq!(service.calls(), 1);
}

// ---- the `Transient` impl of the error type ------------------------------------------------

#[derive(Debug, PartialEq)]
enum PayError {
    Timeout(u32),
    Declined(u32),
}

impl Transient for PayError {
    fn is_transient(&self) -> bool {
        matches!(self, PayError::Timeout(_))
    }
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn by_trait(calls: &Cell<u32>, declined_on: u32) -> Result<(), PayError> {
    calls.set(calls.get() + 1);
    if calls.get() == declined_on {
        Err(PayError::Declined(calls.get()))
    } else {
        Err(PayError::Timeout(calls.get()))
    }
}

#[test]
fn without_on_the_transient_impl_decides() {
    let calls = Cell::new(0);
    assert_eq!(by_trait(&calls, 0), Err(PayError::Timeout(3)));
    assert_eq!(calls.get(), 3);

    let calls = Cell::new(0);
    assert_eq!(by_trait(&calls, 2), Err(PayError::Declined(2)));
    assert_eq!(calls.get(), 2);
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn boxed(calls: &Cell<u32>) -> Result<(), Box<PayError>> {
    calls.set(calls.get() + 1);
    Err(Box::new(PayError::Timeout(calls.get())))
}

#[test]
fn a_boxed_error_delegates_to_its_content() {
    let calls = Cell::new(0);
    assert_eq!(boxed(&calls), Err(Box::new(PayError::Timeout(3))));
}

#[retry(max = 2, base = "1s", jitter = none)]
async fn async_by_trait(calls: &Cell<u32>) -> Result<(), PayError> {
    calls.set(calls.get() + 1);
    Err(PayError::Timeout(calls.get()))
}

#[tokio::test(start_paused = true)]
async fn async_without_on_the_transient_impl_decides() {
    let calls = Cell::new(0);
    assert_eq!(async_by_trait(&calls).await, Err(PayError::Timeout(3)));
}

/// `on` overrides the error type's own impl.
#[retry(max = 2, base = "1ms", jitter = none, on = |_| false)]
fn on_overrides_transient(calls: &Cell<u32>) -> Result<(), PayError> {
    calls.set(calls.get() + 1);
    Err(PayError::Timeout(calls.get()))
}

#[test]
fn on_takes_precedence_over_the_transient_impl() {
    let calls = Cell::new(0);
    assert_eq!(on_overrides_transient(&calls), Err(PayError::Timeout(1)));
    assert_eq!(calls.get(), 1);
}

// ---- std::io::Error ------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn read(calls: &Cell<u32>, kinds: &[io::ErrorKind]) -> io::Result<String> {
    let call = calls.get() + 1;
    calls.set(call);
    match kinds.get(call as usize - 1) {
        Some(kind) => Err(io::Error::new(*kind, format!("call {call}"))),
        None => Ok(format!("read on call {call}")),
    }
}

#[test]
fn io_connection_reset_is_retried() {
    let calls = Cell::new(0);
    let kinds = [io::ErrorKind::ConnectionReset, io::ErrorKind::TimedOut];
    assert_eq!(read(&calls, &kinds).unwrap(), "read on call 3");
    assert_eq!(calls.get(), 3);
}

#[test]
fn io_not_found_is_returned_after_one_call() {
    let calls = Cell::new(0);
    let error = read(&calls, &[io::ErrorKind::NotFound]).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert_eq!(error.to_string(), "call 1");
    assert_eq!(calls.get(), 1);
}

#[test]
fn io_the_last_error_comes_back_as_it_was_raised() {
    let calls = Cell::new(0);
    let error = read(&calls, &[io::ErrorKind::ConnectionReset; 10]).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(error.to_string(), "call 4");
    assert_eq!(calls.get(), 4);
}

// ---- tokio's `Elapsed` ---------------------------------------------------------------------

/// Each attempt gives the service 100 ms; the first call takes a second, the next 10 ms.
#[retry(max = 2, base = "1s", jitter = none)]
async fn with_timeout(calls: &Cell<u32>) -> Result<u32, tokio::time::error::Elapsed> {
    calls.set(calls.get() + 1);
    let work = if calls.get() == 1 { 1000 } else { 10 };
    tokio::time::timeout(Duration::from_millis(100), async {
        tokio::time::sleep(Duration::from_millis(work)).await;
        calls.get()
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_tokio_timeout_is_retried() {
    let (t0, calls) = (tokio::time::Instant::now(), Cell::new(0));
    assert_eq!(with_timeout(&calls).await, Ok(2));
    // 100 ms timed out, 1 s pause, 10 ms of work.
    assert_eq!(t0.elapsed(), Duration::from_millis(1110));
}

// ---- `?` and `return` end the attempt ------------------------------------------------------

/// An inner error type that `?` converts.
#[derive(Debug)]
struct Dropped;

impl From<Dropped> for ContractError {
    fn from(Dropped: Dropped) -> Self {
        ContractError::Overloaded(0)
    }
}

fn connect(calls: &Cell<u32>, ok_on: u32) -> Result<u32, Dropped> {
    calls.set(calls.get() + 1);
    if calls.get() >= ok_on {
        Ok(calls.get())
    } else {
        Err(Dropped)
    }
}

#[retry(max = 3, base = "1ms", jitter = none, on = overloaded)]
fn question_mark(calls: &Cell<u32>, ok_on: u32) -> Result<u32, ContractError> {
    let connection = connect(calls, ok_on)?;
    Ok(connection * 10)
}

#[test]
fn question_mark_is_retried_like_any_error() {
    let calls = Cell::new(0);
    assert_eq!(question_mark(&calls, 3), Ok(30));
    assert_eq!(calls.get(), 3);

    let calls = Cell::new(0);
    assert_eq!(question_mark(&calls, 99), Err(ContractError::Overloaded(0)));
    assert_eq!(calls.get(), 4);
}

#[retry(max = 3, base = "1s", jitter = none, on = overloaded)]
async fn async_question_mark(calls: &Cell<u32>, ok_on: u32) -> Result<u32, ContractError> {
    tokio::task::yield_now().await;
    let connection = connect(calls, ok_on)?;
    Ok(connection * 10)
}

#[tokio::test(start_paused = true)]
async fn async_question_mark_is_retried_like_any_error() {
    let (t0, calls) = (tokio::time::Instant::now(), Cell::new(0));
    assert_eq!(async_question_mark(&calls, 3).await, Ok(30));
    assert_eq!(calls.get(), 3);
    assert_eq!(t0.elapsed(), Duration::from_secs(3));
}

#[retry(max = 3, base = "1ms", jitter = none, on = overloaded)]
fn early_returns(calls: &Cell<u32>, ok_on: u32) -> Result<&'static str, ContractError> {
    calls.set(calls.get() + 1);
    if calls.get() < ok_on {
        return Err(ContractError::Overloaded(calls.get()));
    }
    if calls.get() == ok_on {
        return Ok("early");
    }
    Ok("late")
}

#[test]
fn return_err_is_retried_and_return_ok_is_returned() {
    let calls = Cell::new(0);
    assert_eq!(early_returns(&calls, 3), Ok("early"));
    assert_eq!(calls.get(), 3);

    let calls = Cell::new(0);
    assert_eq!(early_returns(&calls, 1), Ok("early"));
    assert_eq!(calls.get(), 1);

    let calls = Cell::new(0);
    assert_eq!(early_returns(&calls, 9), Err(ContractError::Overloaded(4)));
}

#[retry(max = 3, base = "1s", jitter = none, on = overloaded)]
async fn async_early_returns(calls: &Cell<u32>, ok_on: u32) -> Result<&'static str, ContractError> {
    calls.set(calls.get() + 1);
    if calls.get() < ok_on {
        return Err(ContractError::Overloaded(calls.get()));
    }
    tokio::task::yield_now().await;
    if calls.get() == ok_on {
        return Ok("early");
    }
    Ok("late")
}

#[tokio::test(start_paused = true)]
async fn async_return_err_is_retried_and_return_ok_is_returned() {
    let (t0, calls) = (tokio::time::Instant::now(), Cell::new(0));
    assert_eq!(async_early_returns(&calls, 2).await, Ok("early"));
    assert_eq!(calls.get(), 2);
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
}
