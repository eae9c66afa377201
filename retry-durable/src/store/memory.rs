//! [`MemoryStore`]: the keys in this process's memory.

use super::{
    Begin, BoxFuture, Claim, Fingerprint, Guard, IdempotencyStore, Mode, StoreError, StoreOptions,
};
use retry_runtime::IdempotencyKey;
use std::collections::HashMap;
use std::fmt;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// An [`IdempotencyStore`] in this process's memory: maps behind a short [`std::sync::Mutex`],
/// never held across an `.await` or while the request executes. Every operation is ready at
/// once.
///
/// It forgets every key when the process ends, and each process has its own: use it for tests
/// and single-process tools, and `SqliteStore` or `PostgresStore` for a service that restarts
/// or runs replicas (see the [module docs](super#three-stores)). Its
/// [`Transaction`](IdempotencyStore::Transaction) is `()`: the handler's own writes are not
/// covered.
///
/// Leases and expiry work as in the SQL stores, on the [`Instant`] clock or one the caller
/// moves, with the same [`StoreOptions`] (`max_response_bytes` aside: responses are kept as they
/// are, not serialized). Expired responses leave memory at the latest a TTL after they expired:
/// `begin` sweeps them at most once per TTL, and
/// [`purge_expired`](IdempotencyStore::purge_expired) at once.
///
/// The one-commit mode ([`begin_with(Mode::OneCommit, ..)`](IdempotencyStore::begin_with)) has
/// no transaction here: its claim is held without a lease until the guard completes, releases
/// or is dropped, and a concurrent duplicate is [`InProgress`](Begin::InProgress) (where the SQL
/// stores make it wait for the claimer's transaction).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_durable::store::StoreError> {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore, StoreOptions};
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
///
/// // A clock the example moves by hand.
/// let now = Arc::new(Mutex::new(Instant::now()));
/// let clock = Arc::clone(&now);
/// let store = MemoryStore::new()
///     .with_options(StoreOptions::new().ttl(Duration::from_secs(60)))
///     .with_clock(move || *clock.lock().unwrap());
///
/// let key = IdempotencyKey::from("payout-4711");
/// let payload = Fingerprint::of(b"125000");
/// let Begin::Execute(guard) = store.begin(&key, payload).await? else { unreachable!() };
/// guard.complete(&"R-1").await?;
///
/// *now.lock().unwrap() += Duration::from_secs(59);
/// assert_eq!(store.begin(&key, payload).await?, Begin::Replay("R-1"));
/// *now.lock().unwrap() += Duration::from_secs(1);
/// assert!(matches!(store.begin(&key, payload).await?, Begin::Execute(_))); // expired
/// # Ok(())
/// # }
/// ```
pub struct MemoryStore<R> {
    options: StoreOptions,
    clock: Box<dyn Fn() -> Instant + Send + Sync>,
    state: Mutex<State<R>>,
}

struct State<R> {
    /// By scope, then by key: a lookup by `&str` and `&IdempotencyKey` allocates nothing.
    scopes: HashMap<Arc<str>, HashMap<IdempotencyKey, Entry<R>>>,
    /// When expired entries were last swept out: at most one sweep per `ttl` keeps the cost of
    /// `begin` independent of the number of keys.
    purged: Option<Instant>,
}

enum Entry<R> {
    Running {
        fingerprint: Fingerprint,
        claim: u64,
        token: u64,
        renewed: Instant,
        /// Whether a lease holds it (the lease mode), or its guard until it ends (the
        /// one-commit mode, which nobody takes over).
        leased: bool,
    },
    Completed {
        fingerprint: Fingerprint,
        claim: u64,
        response: R,
        stored: Instant,
    },
}

impl<R> MemoryStore<R> {
    /// An empty store with the default [`StoreOptions`], on the [`Instant::now`] clock.
    pub fn new() -> Self {
        MemoryStore {
            options: StoreOptions::new(),
            clock: Box::new(Instant::now),
            state: Mutex::new(State {
                scopes: HashMap::new(),
                purged: None,
            }),
        }
    }

    /// The same store with `options` (the TTL and the lease; responses are not serialized,
    /// so `max_response_bytes` does not apply).
    #[must_use]
    pub fn with_options(mut self, options: StoreOptions) -> Self {
        self.options = options;
        self
    }

    /// The store's settings.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The same store reading the time from `clock`, for tests that move time by hand (see the
    /// example on [`MemoryStore`]).
    pub fn with_clock(self, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        MemoryStore {
            clock: Box::new(clock),
            ..self
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        // Nothing below panics halfway through an update, so a poisoned map is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn claim(
        &self,
        mode: Mode,
        scope: &str,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> Decision<R>
    where
        R: Clone,
    {
        let now = (self.clock)();
        let (ttl, lease) = (self.options.ttl, self.options.lease);
        let mut state = self.lock();
        // Durations since, not `Instant + ttl`, which overflows for a `ttl` of "forever".
        if state
            .purged
            .is_none_or(|at| now.saturating_duration_since(at) >= ttl)
        {
            state.remove_expired(now, ttl, lease);
            state.purged = Some(now);
        }
        // Random, as in the SQL stores: the token names this one claim, whatever the store.
        let token = super::random_token();
        let entries = match state.scopes.get_mut(scope) {
            Some(entries) => entries,
            None => state.scopes.entry(scope.into()).or_default(),
        };
        let number = match entries.get(key) {
            None => 1,
            Some(entry) if entry.expired(now, ttl, lease) => entry.claim() + 1,
            Some(entry) if entry.fingerprint() != fingerprint => return Decision::Mismatch,
            Some(Entry::Running {
                claim,
                renewed,
                leased: true,
                ..
            }) if now.saturating_duration_since(*renewed) >= lease => claim + 1,
            Some(Entry::Running { .. }) => return Decision::InProgress,
            Some(Entry::Completed { response, .. }) => return Decision::Replay(response.clone()),
        };
        let running = Entry::Running {
            fingerprint,
            claim: number,
            token,
            renewed: now,
            leased: mode == Mode::Lease,
        };
        entries.insert(key.clone(), running);
        Decision::Execute(Claim::new(scope, key.clone(), number, token).in_mode(mode))
    }

    /// Applies `change` to the entry `claim` still runs, or refuses with `Superseded`.
    fn with_running(
        &self,
        claim: &Claim,
        change: impl FnOnce(&mut HashMap<IdempotencyKey, Entry<R>>, Instant),
    ) -> Result<(), StoreError> {
        let now = (self.clock)();
        let mut state = self.lock();
        let entries = state.scopes.get_mut(claim.scope());
        match entries {
            Some(entries)
                if matches!(
                    entries.get(claim.key()),
                    Some(Entry::Running { token, .. }) if *token == claim.token()
                ) =>
            {
                change(entries, now);
                Ok(())
            }
            _ => Err(StoreError::Superseded {
                claim: claim.number(),
            }),
        }
    }
}

enum Decision<R> {
    Execute(Claim),
    Replay(R),
    InProgress,
    Mismatch,
}

impl<R> State<R> {
    fn remove_expired(&mut self, now: Instant, ttl: Duration, lease: Duration) -> u64 {
        let mut removed = 0;
        self.scopes.retain(|_, entries| {
            let before = entries.len();
            entries.retain(|_, entry| !entry.expired(now, ttl, lease));
            removed += (before - entries.len()) as u64;
            !entries.is_empty()
        });
        removed
    }
}

impl<R> Default for MemoryStore<R> {
    /// Same as [`MemoryStore::new`].
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Clone + Send + 'static> IdempotencyStore<R> for MemoryStore<R> {
    type Transaction = ();

    fn begin_with<'s, 'a>(
        &'s self,
        mode: Mode,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, ()>, StoreError>>
    where
        's: 'a,
    {
        let begin = super::validate_key(key.as_str())
            .map_err(StoreError::from)
            .map(|()| match self.claim(mode, scope, key, fingerprint) {
                Decision::Execute(claim) => Begin::Execute(Guard::new(self, claim)),
                Decision::Replay(response) => Begin::Replay(response),
                Decision::InProgress => Begin::InProgress,
                Decision::Mismatch => Begin::Mismatch,
            });
        super::metrics::record_begin("memory", &begin);
        Box::pin(ready(begin))
    }

    fn transaction<'a>(&'a self, _: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(ready(Ok(())))
    }

    fn complete<'a>(
        &'a self,
        claim: &'a Claim,
        _: Option<()>,
        response: &'a R,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let completed = self.with_running(claim, |entries, now| {
            if let Some(entry) = entries.get_mut(claim.key()) {
                *entry = Entry::Completed {
                    fingerprint: entry.fingerprint(),
                    claim: claim.number(),
                    response: response.clone(),
                    stored: now,
                };
            }
        });
        Box::pin(ready(completed))
    }

    fn renew<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
        let renewed = self.with_running(claim, |entries, now| {
            if let Some(Entry::Running { renewed, .. }) = entries.get_mut(claim.key()) {
                *renewed = now;
            }
        });
        Box::pin(ready(renewed))
    }

    fn release<'a>(
        &'a self,
        claim: &'a Claim,
        _: Option<()>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let released = self.with_running(claim, |entries, _| {
            entries.remove(claim.key());
        });
        Box::pin(ready(released))
    }

    fn release_in_background(&self, claim: Claim, _: Option<()>) {
        // Nobody waits for the answer: a claim that no longer holds the key changes nothing.
        let _ = self.with_running(&claim, |entries, _| {
            entries.remove(claim.key());
        });
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        let now = (self.clock)();
        let mut state = self.lock();
        let removed = state.remove_expired(now, self.options.ttl, self.options.lease);
        state.purged = Some(now);
        Box::pin(ready(Ok(removed)))
    }

    fn metrics_label(&self) -> &'static str {
        "memory"
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

    fn claim(&self) -> u64 {
        match self {
            Entry::Running { claim, .. } | Entry::Completed { claim, .. } => *claim,
        }
    }

    /// Whether the entry is gone for every purpose: a response past its TTL, or a running key
    /// whose holder has not renewed it for a lease and a TTL.
    fn expired(&self, now: Instant, ttl: Duration, lease: Duration) -> bool {
        match self {
            Entry::Completed { stored, .. } => now.saturating_duration_since(*stored) >= ttl,
            Entry::Running { leased: false, .. } => false,
            Entry::Running { renewed, .. } => {
                now.saturating_duration_since(*renewed) >= lease.saturating_add(ttl)
            }
        }
    }
}

impl<R> fmt::Debug for MemoryStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        let (mut running, mut stored) = (0, 0);
        for entry in state.scopes.values().flat_map(HashMap::values) {
            match entry {
                Entry::Running { .. } => running += 1,
                Entry::Completed { .. } => stored += 1,
            }
        }
        f.debug_struct("MemoryStore")
            .field("ttl", &self.options.ttl)
            .field("lease", &self.options.lease)
            .field("running", &running)
            .field("stored", &stored)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::thread;

    const TTL: Duration = Duration::from_secs(60);
    const LEASE: Duration = Duration::from_secs(10);

    /// A store on a clock that only moves when the test says so.
    fn store_with_clock() -> (MemoryStore<String>, impl Fn(Duration)) {
        let now = Arc::new(Mutex::new(Instant::now()));
        let clock = Arc::clone(&now);
        let store = MemoryStore::new()
            .with_options(StoreOptions::new().ttl(TTL).lease(LEASE))
            .with_clock(move || *clock.lock().unwrap());
        let advance = move |by: Duration| *now.lock().unwrap() += by;
        (store, advance)
    }

    fn key(text: &str) -> IdempotencyKey {
        IdempotencyKey::from(text)
    }

    async fn execute<'s>(
        store: &'s MemoryStore<String>,
        key: &IdempotencyKey,
        payload: &[u8],
    ) -> Guard<'s, String> {
        match store.begin(key, Fingerprint::of(payload)).await {
            Ok(Begin::Execute(guard)) => guard,
            other => panic!("expected Execute, got {other:?}"),
        }
    }

    async fn begin(
        store: &MemoryStore<String>,
        key: &IdempotencyKey,
        payload: &[u8],
    ) -> Begin<'static, String> {
        match store.begin(key, Fingerprint::of(payload)).await {
            Ok(Begin::Execute(guard)) => panic!("expected no execution, got {guard:?}"),
            Ok(Begin::Replay(response)) => Begin::Replay(response),
            Ok(Begin::InProgress) => Begin::InProgress,
            Ok(Begin::Mismatch) => Begin::Mismatch,
            Err(e) => panic!("{e}"),
        }
    }

    fn stored(store: &MemoryStore<String>) -> usize {
        store.lock().scopes.values().map(HashMap::len).sum()
    }

    #[tokio::test]
    async fn the_defaults_are_a_day_and_a_minute() {
        let store = MemoryStore::<()>::default();
        assert_eq!(store.options().ttl, Duration::from_secs(86_400));
        assert_eq!(store.options().lease, Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_stored_response_expires_after_the_ttl() {
        let (store, advance) = store_with_clock();
        let k = key("k1");
        execute(&store, &k, b"pay 100")
            .await
            .complete(&"receipt 1".to_owned())
            .await
            .unwrap();
        advance(TTL - Duration::from_millis(1));
        assert_eq!(
            begin(&store, &k, b"pay 100").await,
            Begin::Replay("receipt 1".to_owned())
        );
        advance(Duration::from_millis(1));
        let guard = execute(&store, &k, b"pay 100").await;
        // The sweep in `begin` deleted the expired entry: a new key, counted from 1 again.
        assert_eq!(guard.claim(), 1);
        guard.complete(&"receipt 2".to_owned()).await.unwrap();
        assert_eq!(
            begin(&store, &k, b"pay 100").await,
            Begin::Replay("receipt 2".to_owned())
        );
    }

    #[tokio::test]
    async fn a_ttl_of_forever_never_expires() {
        let now = Arc::new(Mutex::new(Instant::now()));
        let clock = Arc::clone(&now);
        let store = MemoryStore::new()
            .with_options(StoreOptions::new().ttl(Duration::MAX).lease(Duration::MAX))
            .with_clock(move || *clock.lock().unwrap());
        let k = key("k1");
        let running = execute(&store, &k, b"running").await;
        execute(&store, &key("k2"), b"pay 100")
            .await
            .complete(&"receipt 1".to_owned())
            .await
            .unwrap();
        *now.lock().unwrap() += Duration::from_secs(10 * 365 * 24 * 60 * 60);
        assert_eq!(store.purge_expired().await.unwrap(), 0);
        assert_eq!(
            begin(&store, &key("k2"), b"pay 100").await,
            Begin::Replay("receipt 1".to_owned())
        );
        assert_eq!(begin(&store, &k, b"running").await, Begin::InProgress);
        drop(running);
    }

    #[tokio::test]
    async fn expired_entries_leave_memory_at_most_a_ttl_later() {
        let (store, advance) = store_with_clock();
        for i in 0..10 {
            let guard = execute(&store, &key(&format!("old {i}")), b"pay").await;
            guard.complete(&String::new()).await.unwrap();
        }
        let running = execute(&store, &key("running"), b"pay").await;
        assert_eq!(stored(&store), 11);
        advance(TTL);
        running.renew().await.unwrap();
        let _new = store.begin(&key("new"), Fingerprint::of(b"pay")).await;
        // The ten expired responses are gone; the running key and the new one stay.
        assert_eq!(stored(&store), 2);
    }

    #[tokio::test]
    async fn purge_counts_what_it_removed() {
        let (store, advance) = store_with_clock();
        for i in 0..3 {
            let guard = execute(&store, &key(&format!("{i}")), b"pay").await;
            guard.complete(&String::new()).await.unwrap();
        }
        let dead = execute(&store, &key("dead"), b"pay").await;
        std::mem::forget(dead); // a holder that never comes back
        advance(TTL);
        assert_eq!(store.purge_expired().await.unwrap(), 3);
        advance(LEASE);
        assert_eq!(
            store.purge_expired().await.unwrap(),
            1,
            "a lease and a TTL after its claim"
        );
        assert_eq!(stored(&store), 0);
    }

    #[test]
    fn concurrent_requests_with_one_key_execute_once() {
        let store = Arc::new(MemoryStore::<String>::new());
        let threads = 8;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
                thread::spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    runtime.block_on(async {
                        barrier.wait();
                        match store.begin(&key("k1"), Fingerprint::of(b"pay 100")).await {
                            Ok(Begin::Execute(guard)) => {
                                // Hold the claim until every other thread has asked.
                                barrier.wait();
                                guard.complete(&"receipt 1".to_owned()).await.unwrap();
                                true
                            }
                            other => {
                                assert_eq!(other.unwrap(), Begin::InProgress);
                                barrier.wait();
                                false
                            }
                        }
                    })
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

    /// Issue 17, defect 5: the docs say every claim carries a random token; `MemoryStore`
    /// counted them from 1.
    #[test]
    fn claim_tokens_are_random() {
        let tokens: Vec<u64> = (0..4)
            .map(|_| {
                let store = MemoryStore::<String>::new();
                match store.claim(Mode::Lease, "", &key("k"), Fingerprint::of(b"pay")) {
                    Decision::Execute(claim) => claim.token(),
                    _ => panic!("a new key executes"),
                }
            })
            .collect();
        let mut distinct = tokens.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "four stores' first claims: {tokens:?}");
    }

    #[test]
    fn stores_guards_and_futures_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>(_: &T) {}
        send_sync::<MemoryStore<String>>();
        send_sync::<Arc<dyn IdempotencyStore<String, Transaction = ()>>>();
        let store = MemoryStore::<String>::new();
        let k = key("k");
        let begin = store.begin(&k, Fingerprint::of(b""));
        send(&begin);
    }

    #[tokio::test]
    async fn debug_shows_counts_not_responses() {
        let store = MemoryStore::new().with_options(StoreOptions::new().ttl(TTL));
        let _running = execute(&store, &key("a"), b"pay").await;
        execute(&store, &key("b"), b"pay")
            .await
            .complete(&"secret".to_owned())
            .await
            .unwrap();
        let text = format!("{store:?}");
        assert_eq!(
            text,
            "MemoryStore { ttl: 60s, lease: 60s, running: 1, stored: 1, .. }"
        );
        assert_eq!(
            format!("{:?}", execute(&store, &key("c"), b"pay").await),
            r#"Guard { scope: "", key: IdempotencyKey("c"), claim: 1, mode: Lease, transaction: false }"#
        );
    }
}
