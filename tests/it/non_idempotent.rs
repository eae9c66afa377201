//! `#[non_idempotent]` with `#[retry]`, in either order: the function takes an idempotency key,
//! and every attempt sends the same one, so the receiver can recognise a repeat.

use retry_runtime::{IdempotencyKey, Transient, non_idempotent, retry};
use std::cell::RefCell;
use std::collections::HashSet;

#[derive(Debug, PartialEq)]
enum PayError {
    /// The payout may have happened; the response was lost.
    ResponseLost,
    Declined,
}

impl Transient for PayError {
    fn is_transient(&self) -> bool {
        *self == PayError::ResponseLost
    }
}

/// The payment service: executes a payout once per key, answers a repeat with the stored
/// receipt, and loses the first `lose` responses.
#[derive(Default)]
struct PayService {
    keys_seen: RefCell<Vec<String>>,
    executed: RefCell<Vec<(String, u64)>>,
    lose: RefCell<u32>,
}

impl PayService {
    fn losing(lose: u32) -> Self {
        PayService {
            lose: RefCell::new(lose),
            ..Default::default()
        }
    }

    fn pay(&self, key: &str, cents: u64) -> Result<String, PayError> {
        self.keys_seen.borrow_mut().push(key.to_owned());
        let repeat = self.executed.borrow().iter().any(|(k, _)| k == key);
        if !repeat {
            self.executed.borrow_mut().push((key.to_owned(), cents));
        }
        let mut lose = self.lose.borrow_mut();
        if *lose > 0 {
            *lose -= 1;
            return Err(PayError::ResponseLost);
        }
        Ok(format!("receipt for {key}"))
    }

    /// Asserts that every attempt carried `key` and the payout was executed once.
    fn assert_once(&self, key: &str, attempts: usize) {
        let seen = self.keys_seen.borrow();
        assert_eq!(seen.len(), attempts);
        assert!(seen.iter().all(|k| k == key), "keys differ: {seen:?}");
        assert_eq!(*self.executed.borrow(), [(key.to_owned(), 100)]);
    }
}

#[non_idempotent]
#[retry(max = 3, base = "1ms", jitter = none)]
fn pay_mark_first(
    service: &PayService,
    cents: u64,
    key: &IdempotencyKey,
) -> Result<String, PayError> {
    service.pay(key.as_str(), cents)
}

#[retry(max = 3, base = "1ms", jitter = none)]
#[non_idempotent]
fn pay_mark_second(
    service: &PayService,
    cents: u64,
    key: &IdempotencyKey,
) -> Result<String, PayError> {
    service.pay(key.as_str(), cents)
}

#[test]
fn every_attempt_carries_the_same_key_in_either_order() {
    for pay in [pay_mark_first, pay_mark_second] {
        let service = PayService::losing(2);
        let key = IdempotencyKey::new();
        let receipt = pay(&service, 100, &key);
        assert_eq!(receipt, Ok(format!("receipt for {key}")));
        service.assert_once(key.as_str(), 3);
    }
}

#[test]
fn a_declined_payout_is_not_retried() {
    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn pay(service: &PayService, key: &IdempotencyKey) -> Result<String, PayError> {
        service.pay(key.as_str(), 100)?;
        Err(PayError::Declined)
    }

    let service = PayService::default();
    let key = IdempotencyKey::from("claim-4711-payout-1");
    assert_eq!(pay(&service, &key), Err(PayError::Declined));
    service.assert_once("claim-4711-payout-1", 1);
}

mod by_value {
    use super::{PayError, PayService};

    /// By value, with the type and both attributes named through their full paths.
    #[retry_runtime::non_idempotent]
    #[retry_runtime::retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn pay_owned_key(
        service: &PayService,
        key: retry_runtime::IdempotencyKey,
    ) -> Result<String, PayError> {
        service.pay(key.as_str(), 100)
    }
}

#[test]
fn a_key_taken_by_value() {
    let service = PayService::losing(3);
    let key = IdempotencyKey::from("claim-4711-payout-1");
    assert!(by_value::pay_owned_key(&service, key).is_ok());
    service.assert_once("claim-4711-payout-1", 4);
}

/// A key of the caller's own type, marked as the key.
#[non_idempotent]
#[retry(max = 3, base = "1ms", jitter = none)]
fn pay_marked(
    service: &PayService,
    #[idempotency_key] request_id: &str,
    cents: u64,
) -> Result<String, PayError> {
    service.pay(request_id, cents)
}

#[test]
fn a_parameter_marked_idempotency_key() {
    let service = PayService::losing(1);
    assert_eq!(
        pay_marked(&service, "req-17", 100),
        Ok("receipt for req-17".to_owned())
    );
    service.assert_once("req-17", 2);
}

/// `#[idempotency_key]` without `#[non_idempotent]` is accepted, and removed before rustc sees it.
#[retry(max = 3, base = "1ms", jitter = none)]
fn marked_without_non_idempotent(
    service: &PayService,
    #[idempotency_key] request_id: &str,
) -> Result<String, PayError> {
    service.pay(request_id, 100)
}

#[test]
fn a_marked_parameter_without_non_idempotent() {
    let service = PayService::losing(1);
    assert!(marked_without_non_idempotent(&service, "req-18").is_ok());
    service.assert_once("req-18", 2);
}

/// On its own, `#[non_idempotent]` only documents: no retry loop.
#[non_idempotent]
fn pay_once(service: &PayService, key: &str) -> Result<String, PayError> {
    service.pay(key, 100)
}

#[test]
fn non_idempotent_alone_does_not_retry() {
    let service = PayService::losing(1);
    assert_eq!(pay_once(&service, "req-19"), Err(PayError::ResponseLost));
    service.assert_once("req-19", 1);
}

#[non_idempotent]
#[retry(max = 2, base = "500ms", jitter = full)]
async fn pay_async(service: &PayService, key: &IdempotencyKey) -> Result<String, PayError> {
    tokio::task::yield_now().await;
    service.pay(key.as_str(), 100)
}

#[retry(max = 2, base = "500ms", jitter = full)]
#[non_idempotent]
async fn pay_async_mark_second(
    service: &PayService,
    key: &IdempotencyKey,
) -> Result<String, PayError> {
    tokio::task::yield_now().await;
    service.pay(key.as_str(), 100)
}

#[tokio::test(start_paused = true)]
async fn async_attempts_carry_the_same_key() {
    let service = PayService::losing(2);
    let key = IdempotencyKey::new();
    assert!(pay_async(&service, &key).await.is_ok());
    service.assert_once(key.as_str(), 3);

    let service = PayService::losing(5);
    let key = IdempotencyKey::new();
    assert_eq!(
        pay_async_mark_second(&service, &key).await,
        Err(PayError::ResponseLost)
    );
    service.assert_once(key.as_str(), 3);
}

#[test]
fn separate_operations_get_separate_keys() {
    let keys: HashSet<String> = (0..100)
        .map(|_| IdempotencyKey::new().to_string())
        .collect();
    assert_eq!(keys.len(), 100);

    // Two payouts, each with a fresh key, are two payouts at the service.
    let service = PayService::default();
    assert!(pay_mark_first(&service, 100, &IdempotencyKey::new()).is_ok());
    assert!(pay_mark_first(&service, 100, &IdempotencyKey::new()).is_ok());
    let executed = service.executed.borrow();
    assert_eq!(executed.len(), 2);
    assert_ne!(executed[0].0, executed[1].0);
}
