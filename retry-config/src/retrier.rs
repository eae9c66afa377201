//! A [`Retrier`] built from a [`Named`]: the door for a closure.

use retry_runtime::named::Named;
use retry_runtime::{CircuitOpen, Retrier};

/// A [`Retrier`] with `named`'s policy, name (the events' `function`) and budget: every call
/// under the name draws from the one budget, whichever door makes it.
///
/// Borrowing `named` keeps the call on the policy it started with: hold the `Arc<Named>` that
/// [`Registry::get`](crate::Registry::get) gave for the call, and a reload in the meantime
/// changes nothing for it. The name's breaker needs the error type to take its refusal
/// ([`retrier_with_breaker`]); its timeout is the caller's to add, since it changes what the
/// retrier can run (`.timeout(limit)`, [`Named::get_timeout`]).
///
/// ```
/// use retry_config::{Config, Registry, retrier};
/// use std::io;
///
/// let registry = Registry::new(Config::from_toml("[retry.quotes]\nmax = 2\nbase = \"10ms\"\njitter = \"none\"")?);
/// let named = registry.get("quotes").expect("configured");
/// let mut failures = 2;
/// let answer = retrier::<_, io::Error>(&named).run(|| {
///     if failures > 0 {
///         failures -= 1;
///         return Err(io::Error::from(io::ErrorKind::TimedOut));
///     }
///     Ok("quotes")
/// });
/// assert_eq!(answer.unwrap(), "quotes");
/// # Ok::<(), retry_config::ConfigError>(())
/// ```
pub fn retrier<T, E>(named: &Named) -> Retrier<'_, T, E> {
    let retrier = Retrier::new(named.policy()).name(named.name());
    match named.get_budget() {
        Some(budget) => retrier.budget(budget),
        None => retrier,
    }
}

/// [`retrier`] with `named`'s breaker too, if it has one: while it is open, the call returns
/// `E::from(CircuitOpen)` at once, and every attempt feeds it, as every other door under the
/// name does.
pub fn retrier_with_breaker<T, E: From<CircuitOpen>>(named: &Named) -> Retrier<'_, T, E> {
    let retrier = retrier(named);
    match named.get_breaker() {
        Some(breaker) => retrier.breaker(breaker),
        None => retrier,
    }
}
