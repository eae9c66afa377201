//! Policies chosen by name at run time: the seam between a registry built from configuration
//! (the crate `retry-config`) and every door that names a policy (`#[retry(policy = "name")]`,
//! `retry_block!(policy = "name", ...)`, a [`Retrier`](crate::Retrier) built from a [`Named`]).
//!
//! A registry implements [`Resolve`] and is [`install`]ed once per process; a door asks
//! [`resolve`] once per call and holds the [`Arc<Named>`] it got for all the call's attempts, so
//! that a reload (a new `Named` under the same name) never mixes old and new within one call.
//! The budget and the breaker of a `Named` are `Arc`s: every door that resolves the name shares
//! them, and a registry that keeps them across a reload keeps their state.
//!
//! ```
//! use retry_runtime::named::{self, Named, Resolve};
//! use retry_runtime::{Policy, RetryBudget};
//! use std::sync::Arc;
//!
//! /// One policy, under one name.
//! struct One(Arc<Named>);
//!
//! impl Resolve for One {
//!     fn resolve(&self, name: &str) -> Option<Arc<Named>> {
//!         (name == self.0.name()).then(|| self.0.clone())
//!     }
//! }
//!
//! // No resolver yet: no name is known, and a door falls back to the policy written in code.
//! assert!(named::resolve("contract-service").is_none());
//!
//! let budget = Arc::new(RetryBudget::new().ratio(0.2));
//! let contract = Named::new("contract-service", Policy::new().max(2)).budget(budget.clone());
//! named::install(Arc::new(One(Arc::new(contract))));
//!
//! let found = named::resolve("contract-service").expect("installed");
//! assert_eq!(found.policy().get_max(), 2);
//! assert!(std::ptr::eq(found.get_budget().unwrap(), &*budget)); // shared, not copied
//! assert!(named::resolve("billing").is_none());
//! ```

use crate::{CircuitBreaker, Policy, RetryBudget};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

/// A policy chosen by name at run time: the timings, and the budget and breaker that every door
/// using the name shares.
///
/// Built by a registry ([`Resolve`]); a call holds an `Arc<Named>` for its whole run, so a
/// reload never mixes old and new within one call.
///
/// ```
/// use retry_runtime::named::Named;
/// use retry_runtime::{CircuitBreaker, Policy};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let breaker = Arc::new(CircuitBreaker::new().consecutive_failures(3));
/// let named = Named::new("contract-service", "max = 3, base = 1s".parse::<Policy>().unwrap())
///     .breaker(breaker)
///     .timeout(Duration::from_secs(2));
/// assert_eq!(named.name(), "contract-service");
/// assert_eq!(named.policy().get_base(), Duration::from_secs(1));
/// assert!(named.get_budget().is_none());
/// assert!(named.get_breaker().is_some());
/// assert_eq!(named.get_timeout(), Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Debug)]
pub struct Named {
    name: &'static str,
    policy: Policy,
    budget: Option<Arc<RetryBudget>>,
    breaker: Option<Arc<CircuitBreaker>>,
    timeout: Option<Duration>,
}

impl Named {
    /// The policy `policy` under `name`, without a budget, a breaker or a timeout. A name read
    /// from configuration is made `&'static str` once with
    /// [`engine::interned`](crate::engine::interned).
    pub fn new(name: &'static str, policy: Policy) -> Self {
        Named {
            name,
            policy,
            budget: None,
            breaker: None,
            timeout: None,
        }
    }

    /// The budget every call under this name draws its retries from.
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The breaker every call under this name feeds and asks.
    pub fn breaker(mut self, breaker: Arc<CircuitBreaker>) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// A limit on each attempt, for the doors that can cut an attempt off at run time (an
    /// HTTP or gRPC door, a [`Retrier`](crate::Retrier) with
    /// [`timeout`](crate::Retrier::timeout)). `#[retry]` and `retry_block!` do not read it:
    /// their `timeout = "..."` is written in code, where the error type's `From<Elapsed>` is
    /// checked.
    pub fn timeout(mut self, per_attempt: Duration) -> Self {
        self.timeout = Some(per_attempt);
        self
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The timings.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The shared budget, if the name has one.
    pub fn get_budget(&self) -> Option<&RetryBudget> {
        self.budget.as_deref()
    }

    /// The shared breaker, if the name has one.
    pub fn get_breaker(&self) -> Option<&CircuitBreaker> {
        self.breaker.as_deref()
    }

    /// The limit on each attempt, if the name has one.
    pub fn get_timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// Where names are looked up: a registry implements it and is [`install`]ed once per process
/// (or replaced, e.g. by tests, or by a registry that reloads by installing itself anew).
///
/// `resolve` runs once per call of every door that names a policy: keep it to a map lookup and
/// an `Arc` clone (no I/O, no parsing).
pub trait Resolve: Send + Sync + 'static {
    /// The entry for `name`, or `None` when this resolver does not know it (the door then uses
    /// the policy written in code).
    fn resolve(&self, name: &str) -> Option<Arc<Named>>;
}

/// The process's resolver.
static RESOLVER: RwLock<Option<Arc<dyn Resolve>>> = RwLock::new(None);

/// Installs the process's resolver, replacing any previous one. Calls that already hold a
/// [`Named`] keep it; the next [`resolve`] asks `resolver`.
pub fn install(resolver: Arc<dyn Resolve>) {
    // A panic while the lock was held cannot leave the slot half-written (a store is one step),
    // so a poisoned lock is taken as it is.
    *RESOLVER.write().unwrap_or_else(PoisonError::into_inner) = Some(resolver);
}

/// The named entry, if a resolver is installed and knows the name.
pub fn resolve(name: &str) -> Option<Arc<Named>> {
    // The resolver is cloned out of the lock, so that its `resolve` (which may take locks of its
    // own) never runs while `install` waits.
    let resolver = RESOLVER
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()?;
    resolver.resolve(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A resolver whose answers a test changes.
    struct Table(Mutex<Vec<Arc<Named>>>);

    impl Resolve for Table {
        fn resolve(&self, name: &str) -> Option<Arc<Named>> {
            let table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            table.iter().find(|n| n.name() == name).cloned()
        }
    }

    /// One test, because the resolver is the process's: the steps run in order.
    #[test]
    fn install_resolve_replace() {
        assert!(resolve("a").is_none(), "nothing installed yet");

        let budget = Arc::new(RetryBudget::new());
        let a = Arc::new(Named::new("a", Policy::new().max(1)).budget(budget.clone()));
        let table = Arc::new(Table(Mutex::new(vec![a.clone()])));
        install(table.clone());
        let held = resolve("a").expect("known");
        assert!(Arc::ptr_eq(&held, &a));
        assert!(std::ptr::eq(held.get_budget().expect("budget"), &*budget));
        assert!(held.get_breaker().is_none());
        assert!(resolve("b").is_none(), "unknown name");

        // The resolver's answer changes: what a call already holds does not.
        let a2 = Arc::new(Named::new("a", Policy::new().max(5)));
        *table.0.lock().expect("lock") = vec![a2];
        assert_eq!(held.policy().get_max(), 1);
        assert_eq!(resolve("a").expect("known").policy().get_max(), 5);

        // A new resolver replaces the old one.
        let b = Arc::new(Named::new("b", Policy::new()));
        install(Arc::new(Table(Mutex::new(vec![b]))));
        assert!(resolve("a").is_none());
        assert_eq!(resolve("b").expect("known").name(), "b");
    }
}
