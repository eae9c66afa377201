//! Every function shape the attribute goes on, sync and async where both apply. Each test counts
//! calls, so it proves the body was retried, not just that the function compiled.
#![deny(dead_code, unused_must_use)]

use crate::common::{Busy, step};
use retry_runtime::{Transient, retry};
use std::cell::Cell;
use std::fmt::Display;
use std::time::Duration;

// ---- free functions ------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn free(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 3)
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn free_async(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 3)
}

#[test]
fn free_fn() {
    let calls = Cell::new(0);
    assert_eq!(free(&calls), Ok(3));
}

#[tokio::test(start_paused = true)]
async fn free_async_fn() {
    let calls = Cell::new(0);
    assert_eq!(free_async(&calls).await, Ok(3));
}

// ---- methods: &self, &mut self, self ---------------------------------------------------------

struct Client {
    calls: Cell<u32>,
    /// Mutated by `&mut self` attempts; every attempt sees what the previous one left.
    log: Vec<u32>,
}

impl Client {
    fn new() -> Self {
        Client {
            calls: Cell::new(0),
            log: Vec::new(),
        }
    }

    #[retry(max = 3, base = "1ms", jitter = none)]
    fn by_ref(&self) -> Result<u32, Busy> {
        step(&self.calls, 2)
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn by_ref_async(&self) -> Result<u32, Busy> {
        step(&self.calls, 2)
    }

    #[retry(max = 3, base = "1ms", jitter = none)]
    fn by_mut(&mut self) -> Result<usize, Busy> {
        self.log.push(self.log.len() as u32);
        if self.log.len() < 3 {
            Err(Busy(self.log.len() as u32))
        } else {
            Ok(self.log.len())
        }
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn by_mut_async(&mut self) -> Result<usize, Busy> {
        tokio::task::yield_now().await;
        self.log.push(self.log.len() as u32);
        if self.log.len() < 3 {
            Err(Busy(self.log.len() as u32))
        } else {
            Ok(self.log.len())
        }
    }

    /// `Self` in the return type.
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn connect(calls: &Cell<u32>) -> Result<Self, Busy> {
        step(calls, 2)?;
        Ok(Self::new())
    }
}

#[test]
fn method_ref_self() {
    let client = Client::new();
    assert_eq!(client.by_ref(), Ok(2));
    assert_eq!(client.calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn method_ref_self_async() {
    let client = Client::new();
    assert_eq!(client.by_ref_async().await, Ok(2));
    assert_eq!(client.calls.get(), 2);
}

#[test]
fn method_mut_self_keeps_state_across_attempts() {
    let mut client = Client::new();
    assert_eq!(client.by_mut(), Ok(3));
    assert_eq!(client.log, [0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn method_mut_self_async_keeps_state_across_attempts() {
    let mut client = Client::new();
    assert_eq!(client.by_mut_async().await, Ok(3));
    assert_eq!(client.log, [0, 1, 2]);
}

#[test]
fn associated_fn_returning_self() {
    let calls = Cell::new(0);
    assert!(Client::connect(&calls).is_ok());
    assert_eq!(calls.get(), 2);
}

#[derive(Clone, Copy)]
struct Port(u16);

impl Port {
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn by_value(self, calls: &Cell<u32>) -> Result<u16, Busy> {
        step(calls, 2)?;
        Ok(self.0)
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn by_value_async(self, calls: &Cell<u32>) -> Result<u16, Busy> {
        step(calls, 2)?;
        Ok(self.0)
    }
}

/// Not `Copy`: the body only borrows its fields.
struct Endpoint {
    host: String,
}

impl Endpoint {
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn into_url(self, calls: &Cell<u32>) -> Result<String, Busy> {
        step(calls, 2)?;
        Ok(format!("https://{}/", self.host))
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn into_url_async(self, calls: &Cell<u32>) -> Result<String, Busy> {
        step(calls, 2)?;
        Ok(format!("https://{}/", self.host))
    }
}

#[test]
fn method_self_by_value() {
    let calls = Cell::new(0);
    assert_eq!(Port(8080).by_value(&calls), Ok(8080));
    assert_eq!(calls.get(), 2);

    let calls = Cell::new(0);
    let endpoint = Endpoint {
        host: "contracts".into(),
    };
    assert_eq!(
        endpoint.into_url(&calls).as_deref(),
        Ok("https://contracts/")
    );
    assert_eq!(calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn method_self_by_value_async() {
    let calls = Cell::new(0);
    assert_eq!(Port(8080).by_value_async(&calls).await, Ok(8080));
    assert_eq!(calls.get(), 2);

    let calls = Cell::new(0);
    let endpoint = Endpoint {
        host: "contracts".into(),
    };
    assert_eq!(
        endpoint.into_url_async(&calls).await.as_deref(),
        Ok("https://contracts/")
    );
    assert_eq!(calls.get(), 2);
}

// ---- owned parameters that the body mutates ------------------------------------------------

#[retry(max = 5, base = "1ms", jitter = none)]
fn owned_mut(mut budget: u32, calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    budget -= 1;
    if budget > 0 {
        Err(Busy(budget))
    } else {
        Ok(calls.get())
    }
}

#[test]
fn an_owned_mut_parameter_is_shared_by_the_attempts() {
    let calls = Cell::new(0);
    assert_eq!(owned_mut(3, &calls), Ok(3));
}

// ---- generics ------------------------------------------------------------------------------

trait Source {
    type Item;
    type Error;
    fn fetch(&self) -> Result<Self::Item, Self::Error>;
}

struct Flaky {
    calls: Cell<u32>,
}

impl Source for Flaky {
    type Item = u32;
    type Error = Busy;
    fn fetch(&self) -> Result<u32, Busy> {
        step(&self.calls, 3)
    }
}

/// The default classifier needs `S::Error: Transient`, and the `tracing` feature's log needs
/// `S::Error: Debug`, both stated in the where-clause.
#[retry(max = 3, base = "1ms", jitter = none)]
fn generic<S>(source: &S) -> Result<S::Item, S::Error>
where
    S: Source,
    S::Error: Transient + std::fmt::Debug,
{
    source.fetch()
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn generic_async<S>(source: &S) -> Result<S::Item, S::Error>
where
    S: Source + ?Sized,
    S::Error: Transient + std::fmt::Debug,
{
    source.fetch()
}

#[retry(max = 3, base = "1ms", jitter = none, on = |_| true)]
fn generic_const<T: Copy + Default, const N: usize>(calls: &Cell<u32>) -> Result<[T; N], Busy> {
    step(calls, 2)?;
    Ok([T::default(); N])
}

#[test]
fn generic_fn_with_where_clause() {
    let source = Flaky {
        calls: Cell::new(0),
    };
    assert_eq!(generic(&source), Ok(3));

    let calls = Cell::new(0);
    assert_eq!(generic_const::<u8, 3>(&calls), Ok([0, 0, 0]));
    assert_eq!(calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn generic_async_fn_with_where_clause() {
    let source = Flaky {
        calls: Cell::new(0),
    };
    assert_eq!(generic_async(&source).await, Ok(3));
}

// ---- lifetimes -----------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn first_word<'a>(text: &'a str, calls: &Cell<u32>) -> Result<&'a str, Busy> {
    step(calls, 2)?;
    Ok(text.split(' ').next().unwrap_or(text))
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn first_word_async<'a, 'b>(text: &'a str, calls: &'b Cell<u32>) -> Result<&'a str, Busy>
where
    'a: 'b,
{
    step(calls, 2)?;
    Ok(text.split(' ').next().unwrap_or(text))
}

struct Named {
    name: String,
    calls: Cell<u32>,
}

impl Named {
    /// An elided lifetime in the output, tied to `&self`.
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn name(&self) -> Result<&str, Busy> {
        step(&self.calls, 2)?;
        Ok(&self.name)
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn name_async(&self) -> Result<&str, Busy> {
        step(&self.calls, 2)?;
        Ok(&self.name)
    }

    /// `&mut self`, returning a shared borrow of a field the attempts do not mutate.
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn count_and_name(&mut self) -> Result<&str, Busy> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() < 2 {
            return Err(Busy(1));
        }
        Ok(&self.name)
    }
}

#[test]
fn explicit_lifetimes() {
    let mut named = Named {
        name: "contracts".into(),
        calls: Cell::new(0),
    };
    assert_eq!(named.name(), Ok("contracts"));
    assert_eq!(named.calls.get(), 2);
    named.calls.set(0);
    assert_eq!(named.count_and_name(), Ok("contracts"));
    assert_eq!(named.calls.get(), 2);

    let calls = Cell::new(0);
    let text = String::from("storm claim");
    assert_eq!(first_word(&text, &calls), Ok("storm"));
    assert_eq!(calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn explicit_lifetimes_async() {
    let named = Named {
        name: "contracts".into(),
        calls: Cell::new(0),
    };
    assert_eq!(named.name_async().await, Ok("contracts"));
    assert_eq!(named.calls.get(), 2);

    let calls = Cell::new(0);
    let text = String::from("storm claim");
    assert_eq!(first_word_async(&text, &calls).await, Ok("storm"));
    assert_eq!(calls.get(), 2);
}

// ---- impl Trait ----------------------------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none)]
fn impl_param(source: impl Fn() -> Result<u32, Busy>) -> Result<u32, Busy> {
    source()
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn impl_param_async(source: impl Fn() -> Result<u32, Busy>) -> Result<u32, Busy> {
    source()
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn impl_output(calls: &Cell<u32>) -> Result<impl Display, Busy> {
    let n = step(calls, 2)?;
    Ok(format!("call {n}"))
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn impl_output_async(calls: &Cell<u32>) -> Result<Vec<impl Display>, Busy> {
    let n = step(calls, 2)?;
    Ok(vec![n])
}

#[test]
fn impl_trait_parameter_and_output() {
    let calls = Cell::new(0);
    assert_eq!(impl_param(|| step(&calls, 3)), Ok(3));
    assert_eq!(calls.get(), 3);

    let calls = Cell::new(0);
    assert_eq!(
        impl_output(&calls).map(|d| d.to_string()).ok().as_deref(),
        Some("call 2")
    );
}

#[tokio::test(start_paused = true)]
async fn impl_trait_parameter_and_output_async() {
    let calls = Cell::new(0);
    assert_eq!(impl_param_async(|| step(&calls, 3)).await, Ok(3));
    assert_eq!(calls.get(), 3);

    let calls = Cell::new(0);
    let shown: Vec<String> = impl_output_async(&calls)
        .await
        .map(|v| v.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    assert_eq!(shown, ["2"]);
}

// ---- destructured parameters ---------------------------------------------------------------

struct Pair {
    left: u32,
    right: u32,
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn destructured(
    (a, b): (u32, u32),
    Pair { left, right }: Pair,
    calls: &Cell<u32>,
) -> Result<u32, Busy> {
    step(calls, 2)?;
    Ok(a + b + left + right)
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn destructured_async(
    (a, b): (u32, u32),
    [c, _]: [u32; 2],
    calls: &Cell<u32>,
) -> Result<u32, Busy> {
    step(calls, 2)?;
    Ok(a + b + c)
}

#[test]
fn destructured_parameters() {
    let calls = Cell::new(0);
    let pair = Pair { left: 3, right: 4 };
    assert_eq!(destructured((1, 2), pair, &calls), Ok(10));
    assert_eq!(calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn destructured_parameters_async() {
    let calls = Cell::new(0);
    assert_eq!(destructured_async((1, 2), [3, 9], &calls).await, Ok(6));
    assert_eq!(calls.get(), 2);
}

// ---- trait impls ---------------------------------------------------------------------------

trait Contracts {
    fn coverage(&self, claim: u32) -> Result<u32, Busy>;
    async fn coverage_async(&self, claim: u32) -> Result<u32, Busy>;

    /// A default method with a body can carry the attribute too.
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn coverage_default(&self, claim: u32) -> Result<u32, Busy> {
        self.coverage(claim)
    }
}

struct ContractService {
    calls: Cell<u32>,
}

impl Contracts for ContractService {
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn coverage(&self, claim: u32) -> Result<u32, Busy> {
        step(&self.calls, 2).map(|_| claim)
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    async fn coverage_async(&self, claim: u32) -> Result<u32, Busy> {
        tokio::task::yield_now().await;
        step(&self.calls, 2).map(|_| claim)
    }
}

fn contract_service() -> ContractService {
    ContractService {
        calls: Cell::new(0),
    }
}

/// A trait whose callers need a `Send` future: the annotated `async fn` must provide one.
trait SendContracts {
    fn coverage_send(&self, claim: u32) -> impl Future<Output = Result<u32, Busy>> + Send;
}

struct SharedService {
    calls: std::sync::atomic::AtomicU32,
}

impl SendContracts for SharedService {
    #[retry(max = 3, base = "1s", jitter = none)]
    async fn coverage_send(&self, claim: u32) -> Result<u32, Busy> {
        use std::sync::atomic::Ordering::Relaxed;
        tokio::task::yield_now().await;
        if self.calls.fetch_add(1, Relaxed) + 1 < 2 {
            Err(Busy(1))
        } else {
            Ok(claim)
        }
    }
}

#[test]
fn trait_impl_method() {
    let service = contract_service();
    assert_eq!(service.coverage(4711), Ok(4711));
    assert_eq!(service.calls.get(), 2);

    // The default method's body calls `coverage`, which retries on its own.
    let service = contract_service();
    assert_eq!(service.coverage_default(4711), Ok(4711));
    assert_eq!(service.calls.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn async_fn_in_trait_impl() {
    let t0 = tokio::time::Instant::now();
    let service = contract_service();
    assert_eq!(service.coverage_async(4711).await, Ok(4711));
    assert_eq!(service.calls.get(), 2);
    assert_eq!(t0.elapsed(), Duration::from_secs(1));

    let service = SharedService {
        calls: Default::default(),
    };
    assert_eq!(service.coverage_send(4711).await, Ok(4711));
    assert_eq!(service.calls.into_inner(), 2);
}

// ---- visibility ----------------------------------------------------------------------------

mod api {
    use super::{Busy, step};
    use retry_runtime::retry;
    use std::cell::Cell;

    #[retry(max = 3, base = "1ms", jitter = none)]
    pub fn public(calls: &Cell<u32>) -> Result<u32, Busy> {
        step(calls, 2)
    }

    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(crate) fn crate_visible(calls: &Cell<u32>) -> Result<u32, Busy> {
        step(calls, 2)
    }

    #[retry(max = 3, base = "1s", jitter = none)]
    pub(super) async fn parent_visible(calls: &Cell<u32>) -> Result<u32, Busy> {
        step(calls, 2)
    }
}

#[test]
fn visibility_is_kept() {
    let calls = Cell::new(0);
    assert_eq!(api::public(&calls), Ok(2));
    let calls = Cell::new(0);
    assert_eq!(api::crate_visible(&calls), Ok(2));
}

#[tokio::test(start_paused = true)]
async fn visibility_is_kept_async() {
    let calls = Cell::new(0);
    assert_eq!(api::parent_visible(&calls).await, Ok(2));
}

// ---- unsafe fn -----------------------------------------------------------------------------
//
// The workspace forbids unsafe code, which includes declaring an `unsafe fn`; the shape is
// compiled and run by `unsafe_fn.rs` through trybuild, outside the workspace's lints.

// ---- Result aliases ------------------------------------------------------------------------

type MyResult<T> = Result<T, Busy>;

#[retry(max = 3, base = "1ms", jitter = none)]
fn local_alias(calls: &Cell<u32>) -> MyResult<u32> {
    step(calls, 2)
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn local_alias_async(calls: &Cell<u32>) -> MyResult<u32> {
    step(calls, 2)
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn io_result(calls: &Cell<u32>) -> std::io::Result<u32> {
    step(calls, 2).map_err(|_| std::io::ErrorKind::ConnectionReset.into())
}

#[retry(max = 3, base = "1s", jitter = none)]
async fn io_result_async(calls: &Cell<u32>) -> std::io::Result<u32> {
    step(calls, 2).map_err(|_| std::io::ErrorKind::ConnectionReset.into())
}

mod shadowed {
    use super::Busy;
    use std::cell::Cell;

    /// A module that shadows the prelude's `Result` with its own alias.
    type Result<T> = std::result::Result<T, Busy>;

    #[retry_runtime::retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn shadowing_alias(calls: &Cell<u32>) -> Result<u32> {
        super::step(calls, 2)
    }
}

#[test]
fn result_aliases() {
    let calls = Cell::new(0);
    assert_eq!(local_alias(&calls), Ok(2));
    let calls = Cell::new(0);
    assert_eq!(io_result(&calls).ok(), Some(2));
    let calls = Cell::new(0);
    assert_eq!(shadowed::shadowing_alias(&calls), Ok(2));
}

#[tokio::test(start_paused = true)]
async fn result_aliases_async() {
    let calls = Cell::new(0);
    assert_eq!(local_alias_async(&calls).await, Ok(2));
    let calls = Cell::new(0);
    assert_eq!(io_result_async(&calls).await.ok(), Some(2));
}

// ---- attributes on the function ------------------------------------------------------------

/// A doc comment, `#[must_use]` and `#[inline]` before the attribute.
#[must_use = "the coverage answer matters"]
#[inline]
#[retry(max = 3, base = "1ms", jitter = none)]
fn documented(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 2)
}

/// Attributes after `#[retry]` reach the function too.
#[retry(max = 3, base = "1s", jitter = none)]
#[must_use = "the coverage answer matters"]
#[inline(never)]
async fn documented_async(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 2)
}

// `#![deny(dead_code)]` above: were this `#[allow]` dropped, the unused function would fail the
// build.
#[retry(max = 3, base = "1ms", jitter = none)]
#[allow(dead_code)]
fn never_called() -> Result<(), Busy> {
    Ok(())
}

// Were this `#[cfg]` dropped, the function would be defined twice.
#[retry(max = 3, base = "1ms", jitter = none)]
#[cfg(any())]
fn configured_out() -> Result<(), Busy> {
    Ok(())
}

#[allow(dead_code)]
fn configured_out() {}

#[test]
fn attributes_are_kept() {
    let calls = Cell::new(0);
    assert_eq!(documented(&calls), Ok(2));
}

#[tokio::test(start_paused = true)]
async fn attributes_are_kept_async() {
    let calls = Cell::new(0);
    assert_eq!(documented_async(&calls).await, Ok(2));
}
