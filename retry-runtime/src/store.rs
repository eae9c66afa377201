//! The receiving side of an idempotency key: a service that executes a request once per key
//! and answers a repeat with the stored response (feature `idempotency-store`).
//!
//! A client that retries a payout after its response was lost sends the same key again (the
//! IETF "Idempotency-Key" HTTP header draft). The service must then answer with the first
//! response instead of paying a second time. [`IdempotencyStore::begin`] tells it which case it
//! is in:
//!
//! | request | [`Begin`] | HTTP answer |
//! |---|---|---|
//! | a key not seen before (or whose stored response has expired) | [`Execute`](Begin::Execute) | execute, then [`Guard::complete`] with the response, and send it |
//! | the same key and payload, the first completed | [`Replay`](Begin::Replay) | the stored response, without executing again |
//! | the same key and payload, the first still running | [`InProgress`](Begin::InProgress) | 409 Conflict; the client retries later |
//! | the same key, a different payload (running or completed) | [`Mismatch`](Begin::Mismatch) | 422 Unprocessable Content; not worth a retry |
//! | no key on a route that requires one | — (the service's decision, see [`key_from_header`]) | 400 Bad Request |
//!
//! A [`Guard`] dropped without [`complete`](Guard::complete) (the handler failed, panicked or
//! was cancelled) releases the key, so that a retry executes afresh. Complete the guard with
//! every *final* response, success or a permanent error; drop it after a passing failure (the
//! bank was unreachable) that a retry may get past.
//!
//! ```
//! use retry_runtime::IdempotencyKey;
//! use retry_runtime::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
//! use std::time::Duration;
//!
//! // Stored responses are kept for a day after they were stored.
//! let store = MemoryStore::<String>::new(Duration::from_secs(24 * 60 * 60));
//! let key = IdempotencyKey::from("8e03978e-40d5-43e8-bc93-6894a57f9324");
//! let payload = Fingerprint::of(br#"{"claim":4711,"cents":125000}"#);
//! let mut payouts = 0;
//!
//! // The first request executes and stores its response.
//! let Begin::Execute(guard) = store.begin(&key, payload) else { unreachable!() };
//! payouts += 1;
//! guard.complete("201 receipt R-1".to_owned());
//!
//! // The client did not get it and sends the same request again: the stored response.
//! assert_eq!(store.begin(&key, payload), Begin::Replay("201 receipt R-1".to_owned()));
//!
//! // The same key for another payout is a client error.
//! let other = Fingerprint::of(br#"{"claim":4711,"cents":990000}"#);
//! assert_eq!(store.begin(&key, other), Begin::Mismatch);
//! assert_eq!(store.begin(&key, other).rejection_status(), Some(422));
//! assert_eq!(payouts, 1);
//! ```
//!
//! Keys are compared as they are: a service with many clients should scope them, for example
//! `IdempotencyKey::from(format!("{client_id}/{key}"))`, so that two clients that chose the same
//! key do not see each other's responses.

use crate::IdempotencyKey;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Where a service keeps the responses it gave, by idempotency key.
///
/// `R` is the stored response: whatever the service needs to answer a repeat, such as a status
/// code and a body. [`MemoryStore`] keeps them in this process; a service that runs several
/// instances implements this trait over a shared database.
///
/// Services call [`begin`](IdempotencyStore::begin) and use the [`Guard`] it hands out;
/// [`complete`](IdempotencyStore::complete) and [`release`](IdempotencyStore::release) are
/// what the guard calls, once, for the claim it holds. A claim is a number the store chooses
/// when it hands out the key (a counter, a row version) and checks when the guard comes back,
/// so a guard whose claim has been taken over (a store shared between processes must give up
/// the claims of a process that died) cannot overwrite its successor's.
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
/// use std::time::Duration;
///
/// // Generic over the store, so that tests can pass a `MemoryStore` and production a database.
/// fn pay_out(store: &dyn IdempotencyStore<u32>, key: &IdempotencyKey, cents: u64) -> Result<u32, u16> {
///     match store.begin(key, Fingerprint::of(&cents.to_be_bytes())) {
///         Begin::Execute(guard) => {
///             let receipt = 7; // the real work
///             guard.complete(receipt);
///             Ok(receipt)
///         }
///         Begin::Replay(receipt) => Ok(receipt),
///         rejected => Err(rejected.rejection_status().unwrap_or(500)),
///     }
/// }
///
/// let store = MemoryStore::new(Duration::from_secs(3600));
/// let key = IdempotencyKey::new();
/// assert_eq!(pay_out(&store, &key, 125_000), Ok(7));
/// assert_eq!(pay_out(&store, &key, 125_000), Ok(7)); // replayed
/// assert_eq!(pay_out(&store, &key, 990_000), Err(422));
/// ```
pub trait IdempotencyStore<R>: Send + Sync {
    /// Looks up `key`: claims it for the caller if it is new (or its stored response has
    /// expired), or says why the caller must not execute. See the [module docs](self) for the
    /// cases.
    ///
    /// A different `fingerprint` wins over a running execution: the answer is
    /// [`Mismatch`](Begin::Mismatch), not [`InProgress`](Begin::InProgress), because the
    /// request would be refused however long the client waited.
    fn begin(&self, key: &IdempotencyKey, fingerprint: Fingerprint) -> Begin<'_, R>;

    /// Stores `response` as the answer for `key`, if `claim` still holds it. Called by
    /// [`Guard::complete`].
    fn complete(&self, key: &IdempotencyKey, claim: u64, response: R);

    /// Forgets `key`, if `claim` still holds it and was not completed, so that the next
    /// request with the key executes. Called when a [`Guard`] is dropped without
    /// [`complete`](Guard::complete).
    fn release(&self, key: &IdempotencyKey, claim: u64);
}

/// What a service should do with a request that carries an idempotency key: the answer of
/// [`IdempotencyStore::begin`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a request is executed only on `Begin::Execute`; the other cases are answers to send"]
pub enum Begin<'s, R> {
    /// The key is new: execute, then [`complete`](Guard::complete) the guard with the response.
    Execute(Guard<'s, R>),
    /// The same key and payload were completed before: answer with this stored response,
    /// without executing.
    Replay(R),
    /// The same key and payload are being executed right now: answer 409 Conflict. A client
    /// that retries it as a passing failure gets the stored response once the first completes.
    InProgress,
    /// The key was used for a different payload: answer 422 Unprocessable Content. The request
    /// is wrong, so a retry would get the same answer.
    Mismatch,
}

impl<R> Begin<'_, R> {
    /// The HTTP status of a refusal: 409 for [`InProgress`](Begin::InProgress), 422 for
    /// [`Mismatch`](Begin::Mismatch), `None` when there is a response to send
    /// ([`Execute`](Begin::Execute), [`Replay`](Begin::Replay)).
    ///
    /// ```
    /// use retry_runtime::store::Begin;
    ///
    /// assert_eq!(Begin::<()>::InProgress.rejection_status(), Some(409));
    /// assert_eq!(Begin::<()>::Mismatch.rejection_status(), Some(422));
    /// assert_eq!(Begin::Replay(()).rejection_status(), None);
    /// ```
    pub const fn rejection_status(&self) -> Option<u16> {
        match self {
            Begin::InProgress => Some(409),
            Begin::Mismatch => Some(422),
            Begin::Execute(_) | Begin::Replay(_) => None,
        }
    }
}

/// The claim on a key whose request is being executed.
///
/// [`complete`](Guard::complete) stores the response for repeats. Dropping the guard without
/// completing it releases the key, so that a handler that fails, panics or is cancelled
/// halfway does not leave the key blocked: the client's retry executes afresh.
///
/// That is also what happens when the handler is cancelled *after* its side effect and before
/// `complete`, for instance by a client hanging up during the bank call: the retry would pay
/// again. Where the side effect cannot be undone, run the whole `begin`, execute, `complete`
/// sequence in a task that the connection does not own (`tokio::spawn` with an `Arc` of the
/// store) and await its result in the handler.
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
/// use std::time::Duration;
///
/// let store = MemoryStore::<&str>::new(Duration::from_secs(60));
/// let key = IdempotencyKey::from("payout-4711");
/// let payload = Fingerprint::of(b"125000");
///
/// let Begin::Execute(guard) = store.begin(&key, payload) else { unreachable!() };
/// assert_eq!(store.begin(&key, payload), Begin::InProgress);
/// drop(guard); // the bank was unreachable: nothing to store
/// assert!(matches!(store.begin(&key, payload), Begin::Execute(_))); // the retry executes
/// ```
#[must_use = "dropping the guard releases the key at once; call `complete` with the response"]
pub struct Guard<'s, R> {
    store: &'s (dyn IdempotencyStore<R> + 's),
    key: IdempotencyKey,
    claim: u64,
    completed: bool,
}

impl<'s, R> Guard<'s, R> {
    /// A guard over `key`, which `store` has just handed out under `claim`. For implementors
    /// of [`IdempotencyStore`]; services get their guards from
    /// [`begin`](IdempotencyStore::begin).
    pub fn new(store: &'s (dyn IdempotencyStore<R> + 's), key: IdempotencyKey, claim: u64) -> Self {
        Guard {
            store,
            key,
            claim,
            completed: false,
        }
    }

    /// The key this guard holds.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// Stores `response` as the answer to every repeat of this request, until it expires.
    pub fn complete(mut self, response: R) {
        self.completed = true;
        self.store.complete(&self.key, self.claim, response);
    }
}

impl<R> Drop for Guard<'_, R> {
    fn drop(&mut self) {
        if !self.completed {
            self.store.release(&self.key, self.claim);
        }
    }
}

impl<R> fmt::Debug for Guard<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("key", &self.key)
            .field("claim", &self.claim)
            .finish()
    }
}

/// Two guards are equal when they hold the same claim on the same key.
impl<R> PartialEq for Guard<'_, R> {
    fn eq(&self, other: &Self) -> bool {
        (&self.key, self.claim) == (&other.key, other.claim)
    }
}

impl<R> Eq for Guard<'_, R> {}

/// A short digest of a request's payload, so that a store can tell a repeat from a different
/// request that reuses the key.
///
/// [`Fingerprint::of`] is 64-bit FNV-1a over the bytes: stable across builds and platforms, so
/// fingerprints can be stored in a database, but not cryptographic. It catches a client that
/// reuses a key by mistake; a store that must resist deliberately colliding payloads can bring
/// its own digest with `Fingerprint::from(u64)`.
///
/// Fingerprint what identifies the operation: the raw body, or its meaningful fields when
/// equivalent bodies can differ in bytes (JSON key order, whitespace).
///
/// ```
/// use retry_runtime::store::Fingerprint;
///
/// assert_eq!(Fingerprint::of(b"claim=4711"), Fingerprint::of(b"claim=4711"));
/// assert_ne!(Fingerprint::of(b"claim=4711"), Fingerprint::of(b"claim=4712"));
/// assert_eq!(Fingerprint::from(42).as_u64(), 42);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// The fingerprint of `payload`: 64-bit FNV-1a.
    pub const fn of(payload: &[u8]) -> Self {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut i = 0;
        while i < payload.len() {
            hash ^= payload[i] as u64;
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            i += 1;
        }
        Fingerprint(hash)
    }

    /// The fingerprint as a number, for a database column.
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl From<u64> for Fingerprint {
    fn from(digest: u64) -> Self {
        Fingerprint(digest)
    }
}

/// An [`IdempotencyStore`] in this process's memory: a `HashMap` behind a short
/// [`std::sync::Mutex`], never held across an `.await` or while the request executes.
///
/// A stored response expires `ttl` after it was stored; a repeat after that executes again, so
/// choose a `ttl` longer than any client keeps retrying (a day is common). Expired responses
/// are dropped from memory by the next [`begin`](IdempotencyStore::begin) at most `ttl` later.
/// A key being executed does not expire: its guard is alive in this process, and completing or
/// dropping it ends the execution.
///
/// Share one store between handlers with an `Arc` (it is `Send + Sync` when `R: Send`).
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
///
/// // A clock the example moves by hand.
/// let now = Arc::new(Mutex::new(Instant::now()));
/// let clock = Arc::clone(&now);
/// let store = MemoryStore::new(Duration::from_secs(60))
///     .with_clock(move || *clock.lock().unwrap());
///
/// let key = IdempotencyKey::from("payout-4711");
/// let payload = Fingerprint::of(b"125000");
/// let Begin::Execute(guard) = store.begin(&key, payload) else { unreachable!() };
/// guard.complete("R-1");
///
/// *now.lock().unwrap() += Duration::from_secs(59);
/// assert_eq!(store.begin(&key, payload), Begin::Replay("R-1"));
/// *now.lock().unwrap() += Duration::from_secs(1);
/// assert!(matches!(store.begin(&key, payload), Begin::Execute(_))); // expired: a new request
/// ```
pub struct MemoryStore<R> {
    ttl: Duration,
    clock: Box<dyn Fn() -> Instant + Send + Sync>,
    state: Mutex<State<R>>,
}

struct State<R> {
    entries: HashMap<IdempotencyKey, Entry<R>>,
    /// When expired responses were last swept out of `entries`: at most one sweep per `ttl`
    /// keeps the cost of `begin` independent of the number of keys.
    purged: Option<Instant>,
    /// The claim handed out last; each `Execute` gets the next one.
    last_claim: u64,
}

enum Entry<R> {
    Running {
        fingerprint: Fingerprint,
        claim: u64,
    },
    Completed {
        fingerprint: Fingerprint,
        response: R,
        stored: Instant,
    },
}

impl<R> MemoryStore<R> {
    /// An empty store whose responses expire `ttl` after they were stored, on the
    /// [`Instant::now`] clock.
    pub fn new(ttl: Duration) -> Self {
        MemoryStore {
            ttl,
            clock: Box::new(Instant::now),
            state: Mutex::new(State {
                entries: HashMap::new(),
                purged: None,
                last_claim: 0,
            }),
        }
    }

    /// The same store reading the time from `clock`, for tests that move time by hand (see
    /// the example on [`MemoryStore`]).
    pub fn with_clock(self, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        MemoryStore {
            clock: Box::new(clock),
            ..self
        }
    }

    /// How long a stored response is replayed.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // Nothing below panics halfway through an update, so a poisoned map is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<R: Clone + Send> IdempotencyStore<R> for MemoryStore<R> {
    fn begin(&self, key: &IdempotencyKey, fingerprint: Fingerprint) -> Begin<'_, R> {
        let now = (self.clock)();
        let mut state = self.lock();
        let ttl = self.ttl;
        // Durations since, not `Instant + ttl`, which overflows for a `ttl` of "forever".
        if state
            .purged
            .is_none_or(|at| now.saturating_duration_since(at) >= ttl)
        {
            state.entries.retain(|_, entry| !entry.expired(now, ttl));
            state.purged = Some(now);
        }
        match state
            .entries
            .get(key)
            .filter(|entry| !entry.expired(now, ttl))
        {
            Some(entry) if entry.fingerprint() != fingerprint => Begin::Mismatch,
            Some(Entry::Running { .. }) => Begin::InProgress,
            Some(Entry::Completed { response, .. }) => Begin::Replay(response.clone()),
            None => {
                state.last_claim += 1;
                let claim = state.last_claim;
                let entry = Entry::Running { fingerprint, claim };
                state.entries.insert(key.clone(), entry);
                drop(state);
                Begin::Execute(Guard::new(self, key.clone(), claim))
            }
        }
    }

    fn complete(&self, key: &IdempotencyKey, claim: u64, response: R) {
        let stored = (self.clock)();
        let mut state = self.lock();
        if let Some(entry) = state.entries.get_mut(key) {
            if let Entry::Running {
                fingerprint,
                claim: running,
            } = *entry
            {
                if running == claim {
                    *entry = Entry::Completed {
                        fingerprint,
                        response,
                        stored,
                    };
                }
            }
        }
    }

    fn release(&self, key: &IdempotencyKey, claim: u64) {
        let mut state = self.lock();
        if let Some(Entry::Running { claim: running, .. }) = state.entries.get(key) {
            if *running == claim {
                state.entries.remove(key);
            }
        }
    }
}

impl<R> Entry<R> {
    fn fingerprint(&self) -> Fingerprint {
        match self {
            Entry::Running { fingerprint, .. } | Entry::Completed { fingerprint, .. } => {
                *fingerprint
            }
        }
    }

    fn expired(&self, now: Instant, ttl: Duration) -> bool {
        matches!(self, Entry::Completed { stored, .. } if now.saturating_duration_since(*stored) >= ttl)
    }
}

impl<R> fmt::Debug for MemoryStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        let running = state
            .entries
            .values()
            .filter(|entry| matches!(entry, Entry::Running { .. }))
            .count();
        f.debug_struct("MemoryStore")
            .field("ttl", &self.ttl)
            .field("running", &running)
            .field("stored", &(state.entries.len() - running))
            .finish_non_exhaustive()
    }
}

/// The `Idempotency-Key` header's value, read as the draft writes it (a quoted structured-field
/// string, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`) or bare, as many clients send it.
///
/// Whether a route requires a key is the service's decision; one that does answers
/// [`KeyError::Missing`] and [`KeyError::Invalid`] with 400 Bad Request
/// ([`KeyError::status`]). Takes anything that is bytes, such as an `http::HeaderValue`:
/// `key_from_header(headers.get(IdempotencyKey::HEADER))`.
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::store::{KeyError, key_from_header};
///
/// let quoted = key_from_header(Some("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""));
/// assert_eq!(quoted, Ok(IdempotencyKey::from("8e03978e-40d5-43e8-bc93-6894a57f9324")));
/// assert_eq!(key_from_header(Some("payout-4711")), Ok(IdempotencyKey::from("payout-4711")));
///
/// assert_eq!(key_from_header(None::<&str>), Err(KeyError::Missing));
/// assert_eq!(key_from_header(Some("\"\"")), Err(KeyError::Invalid));
/// assert_eq!(KeyError::Missing.status(), 400);
/// ```
pub fn key_from_header(value: Option<impl AsRef<[u8]>>) -> Result<IdempotencyKey, KeyError> {
    let value = value.ok_or(KeyError::Missing)?;
    let value = value.as_ref().trim_ascii();
    let key = match value.strip_prefix(b"\"") {
        Some(quoted) => parse_sf_string(quoted)?,
        None => value.to_vec(),
    };
    let printable = |b: &u8| (0x20..=0x7e).contains(b);
    if key.is_empty() || key.len() > KeyError::MAX_LEN || !key.iter().all(printable) {
        return Err(KeyError::Invalid);
    }
    if value.first() != Some(&b'"') && key.iter().any(|b| matches!(b, b' ' | b'"')) {
        return Err(KeyError::Invalid);
    }
    // Printable ASCII only, checked above.
    String::from_utf8(key)
        .map(IdempotencyKey::from)
        .map_err(|_| KeyError::Invalid)
}

/// The rest of a structured-field string after its opening quote (RFC 8941 §3.3.3): `\"` and
/// `\\` are the only escapes; parameters after the closing quote (`;name=value`) are ignored.
fn parse_sf_string(rest: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut key = Vec::with_capacity(rest.len());
    let mut bytes = rest.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&escaped @ (b'"' | b'\\')) => key.push(escaped),
                _ => return Err(KeyError::Invalid),
            },
            b'"' => {
                let after = bytes.as_slice().trim_ascii_start();
                return if after.is_empty() || after.starts_with(b";") {
                    Ok(key)
                } else {
                    Err(KeyError::Invalid)
                };
            }
            _ => key.push(b),
        }
    }
    Err(KeyError::Invalid) // no closing quote
}

/// Why a request has no usable idempotency key. A route that requires one answers 400.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyError {
    /// The request has no `Idempotency-Key` header.
    Missing,
    /// The header is empty, longer than [`KeyError::MAX_LEN`], not printable ASCII, or an
    /// unterminated or malformed quoted string.
    Invalid,
}

impl KeyError {
    /// The longest key accepted, in bytes, so that a client cannot fill the store with huge
    /// keys: 255, as common payment APIs allow.
    pub const MAX_LEN: usize = 255;

    /// The HTTP status to answer with: 400 Bad Request.
    pub const fn status(&self) -> u16 {
        400
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyError::Missing => "the request has no `Idempotency-Key` header",
            KeyError::Invalid => "the `Idempotency-Key` header is not a valid key",
        })
    }
}

impl std::error::Error for KeyError {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};
    use std::thread;

    const TTL: Duration = Duration::from_secs(60);

    /// A store on a clock that only moves when the test says so.
    fn store_with_clock() -> (MemoryStore<String>, impl Fn(Duration)) {
        let now = Arc::new(Mutex::new(Instant::now()));
        let clock = Arc::clone(&now);
        let store = MemoryStore::new(TTL).with_clock(move || *clock.lock().unwrap());
        let advance = move |by: Duration| *now.lock().unwrap() += by;
        (store, advance)
    }

    fn key(text: &str) -> IdempotencyKey {
        IdempotencyKey::from(text)
    }

    fn execute<'s>(
        store: &'s MemoryStore<String>,
        key: &IdempotencyKey,
        payload: &[u8],
    ) -> Guard<'s, String> {
        match store.begin(key, Fingerprint::of(payload)) {
            Begin::Execute(guard) => guard,
            other => panic!("expected Execute, got {other:?}"),
        }
    }

    fn stored(store: &MemoryStore<String>) -> usize {
        store.lock().entries.len()
    }

    #[test]
    fn the_first_request_executes_and_a_repeat_gets_the_stored_response() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        let guard = execute(&store, &k, b"pay 100");
        assert_eq!(guard.key(), &k);
        guard.complete("receipt 1".to_owned());
        for _ in 0..3 {
            assert_eq!(
                store.begin(&k, Fingerprint::of(b"pay 100")),
                Begin::Replay("receipt 1".to_owned())
            );
        }
    }

    #[test]
    fn keys_are_independent() {
        let store = MemoryStore::new(TTL);
        execute(&store, &key("a"), b"pay 100").complete("a".to_owned());
        execute(&store, &key("b"), b"pay 100").complete("b".to_owned());
        assert_eq!(
            store.begin(&key("a"), Fingerprint::of(b"pay 100")),
            Begin::Replay("a".to_owned())
        );
        assert_eq!(
            store.begin(&key("b"), Fingerprint::of(b"pay 100")),
            Begin::Replay("b".to_owned())
        );
    }

    #[test]
    fn a_repeat_while_the_first_runs_is_in_progress() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        let guard = execute(&store, &k, b"pay 100");
        let repeat = store.begin(&k, Fingerprint::of(b"pay 100"));
        assert_eq!(repeat, Begin::InProgress);
        assert_eq!(repeat.rejection_status(), Some(409));
        guard.complete("receipt 1".to_owned());
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
    }

    #[test]
    fn a_different_payload_is_a_mismatch_after_completion() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        execute(&store, &k, b"pay 100").complete("receipt 1".to_owned());
        let other = store.begin(&k, Fingerprint::of(b"pay 900"));
        assert_eq!(other, Begin::Mismatch);
        assert_eq!(other.rejection_status(), Some(422));
        // The mismatch changes nothing: the first request is still replayed.
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
    }

    #[test]
    fn a_different_payload_is_a_mismatch_while_the_first_runs() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        let _guard = execute(&store, &k, b"pay 100");
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 900")),
            Begin::Mismatch
        );
    }

    #[test]
    fn a_dropped_guard_releases_the_key_for_a_retry() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        drop(execute(&store, &k, b"pay 100"));
        assert_eq!(stored(&store), 0);
        // The retry executes, and may even carry another payload: nothing was stored.
        execute(&store, &k, b"pay 900").complete("receipt 2".to_owned());
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 900")),
            Begin::Replay("receipt 2".to_owned())
        );
    }

    #[test]
    fn a_guard_dropped_by_a_panic_releases_the_key() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = execute(&store, &k, b"pay 100");
            panic!("the handler failed halfway");
        }));
        assert!(panicked.is_err());
        assert!(matches!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Execute(_)
        ));
    }

    #[test]
    fn a_stored_response_expires_after_the_ttl() {
        let (store, advance) = store_with_clock();
        let k = key("k1");
        execute(&store, &k, b"pay 100").complete("receipt 1".to_owned());
        advance(TTL - Duration::from_millis(1));
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
        advance(Duration::from_millis(1));
        execute(&store, &k, b"pay 100").complete("receipt 2".to_owned());
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 2".to_owned())
        );
    }

    #[test]
    fn the_ttl_counts_from_completion_not_from_the_start() {
        let (store, advance) = store_with_clock();
        let k = key("k1");
        let guard = execute(&store, &k, b"pay 100");
        advance(TTL * 2);
        // A running key does not expire: its guard is alive.
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::InProgress
        );
        guard.complete("receipt 1".to_owned());
        advance(TTL - Duration::from_millis(1));
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
    }

    #[test]
    fn a_ttl_of_forever_never_expires() {
        let now = Arc::new(Mutex::new(Instant::now()));
        let clock = Arc::clone(&now);
        let store = MemoryStore::new(Duration::MAX).with_clock(move || *clock.lock().unwrap());
        let k = key("k1");
        execute(&store, &k, b"pay 100").complete("receipt 1".to_owned());
        *now.lock().unwrap() += Duration::from_secs(10 * 365 * 24 * 60 * 60);
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
    }

    #[test]
    fn an_expired_key_may_carry_a_new_payload() {
        let (store, advance) = store_with_clock();
        let k = key("k1");
        execute(&store, &k, b"pay 100").complete("receipt 1".to_owned());
        advance(TTL);
        execute(&store, &k, b"pay 900").complete("receipt 2".to_owned());
    }

    #[test]
    fn expired_responses_leave_memory_at_most_a_ttl_later() {
        let (store, advance) = store_with_clock();
        for i in 0..10 {
            execute(&store, &key(&format!("old {i}")), b"pay").complete(String::new());
        }
        let running = execute(&store, &key("running"), b"pay");
        assert_eq!(stored(&store), 11);
        advance(TTL);
        let _new = store.begin(&key("new"), Fingerprint::of(b"pay"));
        // The ten expired responses are gone; the running key and the new one stay.
        assert_eq!(stored(&store), 2);
        running.complete(String::new());
    }

    #[test]
    fn a_stale_claim_changes_nothing() {
        let store = MemoryStore::new(TTL);
        let k = key("k1");
        let guard = execute(&store, &k, b"pay 100");
        let store_dyn: &dyn IdempotencyStore<String> = &store;
        store_dyn.release(&k, guard.claim + 1);
        store_dyn.complete(&k, guard.claim + 1, "forged".to_owned());
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::InProgress
        );
        guard.complete("receipt 1".to_owned());
        // A completed key is not released by a late guard of its own claim either.
        store_dyn.release(&k, 1);
        assert_eq!(
            store.begin(&k, Fingerprint::of(b"pay 100")),
            Begin::Replay("receipt 1".to_owned())
        );
    }

    #[test]
    fn concurrent_requests_with_one_key_execute_once() {
        let store = Arc::new(MemoryStore::<String>::new(TTL));
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
                thread::spawn(move || {
                    barrier.wait();
                    match store.begin(&key("k1"), Fingerprint::of(b"pay 100")) {
                        Begin::Execute(guard) => {
                            // Hold the claim until every other thread has asked.
                            barrier.wait();
                            guard.complete("receipt 1".to_owned());
                            true
                        }
                        other => {
                            assert_eq!(other, Begin::InProgress);
                            barrier.wait();
                            false
                        }
                    }
                })
            })
            .collect();
        let executed = handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .filter(|&executed| executed)
            .count();
        assert_eq!(executed, 1);
    }

    #[test]
    fn stores_and_guards_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<MemoryStore<String>>();
        send::<Guard<'static, String>>();
        send::<Begin<'static, String>>();
        send_sync::<Arc<dyn IdempotencyStore<String>>>();
    }

    #[test]
    fn debug_shows_counts_not_responses() {
        let store = MemoryStore::new(TTL);
        let _running = execute(&store, &key("a"), b"pay");
        execute(&store, &key("b"), b"pay").complete("secret".to_owned());
        let text = format!("{store:?}");
        assert_eq!(text, "MemoryStore { ttl: 60s, running: 1, stored: 1, .. }");
    }

    #[test]
    fn fingerprints_are_fnv1a_64() {
        assert_eq!(Fingerprint::of(b"").as_u64(), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fingerprint::of(b"a").as_u64(), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fingerprint::of(b"foobar").as_u64(), 0x8594_4171_f739_67e8);
        const AT_COMPILE_TIME: Fingerprint = Fingerprint::of(b"a");
        assert_eq!(AT_COMPILE_TIME, Fingerprint::from(0xaf63_dc4c_8601_ec8c));
    }

    #[test]
    fn header_values() {
        let ok = |value: &str| key_from_header(Some(value)).map(|k| k.to_string());
        assert_eq!(ok("\"abc\""), Ok("abc".to_owned()));
        assert_eq!(ok("  \"abc\"  "), Ok("abc".to_owned()));
        assert_eq!(ok("\"a b\""), Ok("a b".to_owned()));
        assert_eq!(ok(r#""a\"b\\c""#), Ok(r#"a"b\c"#.to_owned()));
        assert_eq!(ok("\"abc\";v=1"), Ok("abc".to_owned()));
        assert_eq!(ok("abc-123_X"), Ok("abc-123_X".to_owned()));
        let too_long = "k".repeat(KeyError::MAX_LEN + 1);
        for bad in [
            "",
            "  ",
            "\"\"",
            "\"abc",
            "\"abc\" x",
            r#""a\b""#,
            "a b",
            "a\"b",
            "\"é\"",
            "é",
            "\"tab\there\"",
            &too_long,
        ] {
            assert_eq!(
                key_from_header(Some(bad)),
                Err(KeyError::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(
            key_from_header(Some(b"\xff".as_slice())),
            Err(KeyError::Invalid)
        );
        assert_eq!(key_from_header(None::<&[u8]>), Err(KeyError::Missing));
        assert_eq!(
            ok(&"k".repeat(KeyError::MAX_LEN)).map(|k| k.len()),
            Ok(KeyError::MAX_LEN)
        );
    }

    #[test]
    fn key_errors_are_400_and_say_what_is_wrong() {
        assert_eq!(KeyError::Missing.status(), 400);
        assert_eq!(KeyError::Invalid.status(), 400);
        assert_eq!(
            KeyError::Missing.to_string(),
            "the request has no `Idempotency-Key` header"
        );
    }
}
