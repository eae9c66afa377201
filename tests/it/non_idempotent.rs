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

// ---- a key of any type that implements `Display` -------------------------------------------------
//
// Keys are often an order number or a `Uuid`. The parameter marked `#[idempotency_key]` is the
// key, by value or by reference, whatever its type, as long as it can be written as text: the
// body sends it, and `attempt().key()` renders it the same way on every attempt.

mod any_display {
    use super::{PayError, PayService};
    use retry_runtime::{IdempotencyKey, attempt, non_idempotent, retry};
    use std::fmt;
    use uuid::Uuid;

    /// What the body sends: the key as `attempt()` renders it, so the tests see both at once.
    fn sent_key() -> String {
        attempt()
            .key()
            .expect("a key inside a function that has one")
            .to_string()
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_order_number(
        service: &PayService,
        #[idempotency_key] order: u64,
    ) -> Result<String, PayError> {
        assert_eq!(sent_key(), order.to_string());
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_uuid(
        service: &PayService,
        #[idempotency_key] payout: Uuid,
    ) -> Result<String, PayError> {
        assert_eq!(sent_key(), payout.to_string());
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_uuid_ref(
        service: &PayService,
        #[idempotency_key] payout: &Uuid,
    ) -> Result<String, PayError> {
        assert_eq!(sent_key(), payout.to_string());
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_string(
        service: &PayService,
        #[idempotency_key] reference: String,
    ) -> Result<String, PayError> {
        assert_eq!(sent_key(), reference);
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_marked_key(
        service: &PayService,
        #[idempotency_key] key: &IdempotencyKey,
    ) -> Result<String, PayError> {
        assert_eq!(sent_key(), key.as_str());
        service.pay(&sent_key(), 100)
    }

    /// A key type of the caller's own.
    pub(super) struct PayoutId {
        pub claim: u32,
        pub payout: u32,
    }

    impl fmt::Display for PayoutId {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "claim-{}-payout-{}", self.claim, self.payout)
        }
    }

    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_own_type(
        service: &PayService,
        #[idempotency_key] id: &PayoutId,
    ) -> Result<String, PayError> {
        service.pay(&sent_key(), 100)
    }

    /// A generic key: `Display`, and owning its data (`'static`): a sync function needs no more.
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_generic(
        service: &PayService,
        #[idempotency_key] reference: impl fmt::Display + 'static,
    ) -> Result<String, PayError> {
        service.pay(&sent_key(), 100)
    }

    /// A key that is not `Sync`: a sync function asks nothing more of it than `Display`.
    #[non_idempotent]
    #[retry(max = 3, base = "1ms", jitter = none)]
    pub(super) fn by_rc(
        service: &PayService,
        #[idempotency_key] reference: std::rc::Rc<str>,
    ) -> Result<String, PayError> {
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 2, base = "500ms", jitter = full)]
    pub(super) async fn by_order_number_async(
        service: &PayService,
        #[idempotency_key] order: u64,
    ) -> Result<String, PayError> {
        tokio::task::yield_now().await;
        let before = sent_key();
        tokio::task::yield_now().await;
        assert_eq!(sent_key(), before, "the key changed across an .await");
        service.pay(&sent_key(), 100)
    }

    #[non_idempotent]
    #[retry(max = 2, base = "500ms", jitter = full)]
    pub(super) async fn by_uuid_async(
        service: &PayService,
        #[idempotency_key] payout: &Uuid,
    ) -> Result<String, PayError> {
        tokio::task::yield_now().await;
        service.pay(&sent_key(), 100)
    }
}

#[test]
fn an_order_number_is_a_key() {
    let service = PayService::losing(2);
    assert_eq!(
        any_display::by_order_number(&service, 4711),
        Ok("receipt for 4711".to_owned())
    );
    service.assert_once("4711", 3);
}

#[test]
fn a_uuid_is_a_key_by_value_and_by_reference() {
    let payout = uuid::Uuid::from_u128(0x6f1c_2b9e_4711_4a6b_9c3d_0123_4567_89ab);
    let text = "6f1c2b9e-4711-4a6b-9c3d-0123456789ab";
    assert_eq!(payout.to_string(), text);

    let service = PayService::losing(2);
    assert!(any_display::by_uuid(&service, payout).is_ok());
    service.assert_once(text, 3);

    let service = PayService::losing(1);
    assert!(any_display::by_uuid_ref(&service, &payout).is_ok());
    service.assert_once(text, 2);
}

#[test]
fn a_string_and_a_marked_idempotency_key_are_keys() {
    let service = PayService::losing(1);
    assert!(any_display::by_string(&service, "req-20".to_owned()).is_ok());
    service.assert_once("req-20", 2);

    let service = PayService::losing(1);
    let key = IdempotencyKey::from("claim-4711-payout-2");
    assert!(any_display::by_marked_key(&service, &key).is_ok());
    service.assert_once("claim-4711-payout-2", 2);
}

#[test]
fn a_type_of_the_callers_own_is_a_key() {
    let service = PayService::losing(2);
    let id = any_display::PayoutId {
        claim: 4711,
        payout: 3,
    };
    assert!(any_display::by_own_type(&service, &id).is_ok());
    service.assert_once("claim-4711-payout-3", 3);

    let service = PayService::losing(1);
    assert!(any_display::by_generic(&service, 17u8).is_ok());
    service.assert_once("17", 2);

    let service = PayService::losing(1);
    assert!(any_display::by_rc(&service, std::rc::Rc::from("req-22")).is_ok());
    service.assert_once("req-22", 2);
}

#[tokio::test(start_paused = true)]
async fn async_keys_of_any_display_type() {
    let service = PayService::losing(2);
    assert!(
        any_display::by_order_number_async(&service, 4712)
            .await
            .is_ok()
    );
    service.assert_once("4712", 3);

    let payout = uuid::Uuid::from_u128(7);
    let service = PayService::losing(1);
    assert!(any_display::by_uuid_async(&service, &payout).await.is_ok());
    service.assert_once(&payout.to_string(), 2);
}

/// An async function with a key stays `Send` when its key is `Sync`, so it can be spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_async_function_can_be_spawned() {
    static SERVICE: std::sync::LazyLock<std::sync::Mutex<Vec<String>>> =
        std::sync::LazyLock::new(Default::default);

    #[non_idempotent]
    #[retry(max = 2, base = "1ms", jitter = none)]
    async fn record(#[idempotency_key] order: u64) -> Result<u32, PayError> {
        tokio::task::yield_now().await;
        let now = retry_runtime::attempt();
        SERVICE
            .lock()
            .expect("not poisoned")
            .push(now.key().expect("a key").to_string());
        if now.number() < 3 {
            Err(PayError::ResponseLost)
        } else {
            Ok(now.number())
        }
    }

    let task = tokio::spawn(record(99));
    assert_eq!(task.await.expect("no panic"), Ok(3));
    assert_eq!(*SERVICE.lock().unwrap(), ["99", "99", "99"]);
}
