//! The receiving side of an idempotency key: a service that executes a request once per key
//! and answers a repeat with the stored response.
//!
//! A client that retries a payout after its response was lost sends the same key again (the
//! IETF "Idempotency-Key" HTTP header draft). The service must then answer with the first
//! response instead of paying a second time. [`IdempotencyStore::begin`] tells it which case it
//! is in:
//!
//! | request | `begin` answers | HTTP answer |
//! |---|---|---|
//! | a key not seen before, released, or whose stored response has expired | [`Begin::Execute`] | execute, [`Guard::complete`] with the response, send it |
//! | the same key and payload, the first completed | [`Begin::Replay`] | the stored response, without executing again |
//! | the same key and payload, the first still running under its lease | [`Begin::InProgress`] | 409 Conflict; the client retries later |
//! | the same key and payload, the first's lease ended without completion (its process died) | [`Begin::Execute`] with the next claim number | execute; the dead holder can no longer complete |
//! | the same key, a different payload (running or completed) | [`Begin::Mismatch`] | 422 Unprocessable Content; not worth a retry |
//! | the store cannot be reached | `Err(`[`StoreError`]`)` | 503 with `Retry-After`: nothing executes without a record |
//! | no key on a route that requires one | — (the service's decision, see [`key_from_header`]) | 400 Bad Request |
//! | a key that breaks the key rule (over 255 characters, a control character, empty; [`validate_key`]) | `Err(`[`StoreError::InvalidKey`]`)`, before any database work | 400 Bad Request |
//!
//! The key rule counts characters, not bytes: a valid key of 255 characters outside ASCII is up
//! to 1,020 bytes of UTF-8, and that is what a key column must hold (the SQL stores' `TEXT`
//! columns do). Keys in the `Idempotency-Key` header are printable ASCII
//! ([`key_from_header`]), one byte a character.
//!
//! # Three stores
//!
//! | | [`MemoryStore`] | `SqliteStore` | `PostgresStore` |
//! |---|---|---|---|
//! | feature | none | `sqlite` (default) | `postgres` (default) |
//! | keys are kept in | this process's memory | a file (sqlx's bundled SQLite) | one PostgreSQL database |
//! | a restart of the service | forgets every key: a retry after it pays again | keeps them | keeps them |
//! | replicas | each has its own keys: a retry on another replica pays again | processes on one machine sharing the file | every replica, anywhere |
//! | a crash mid-payout | forgets the key and the payout's record | the payout's rows and the key's completion commit together or not at all; the key is taken over after its lease | the same |
//! | the handler's own writes | not covered (`Transaction = ()`) | in [`Guard::transaction`], a `sqlx::Transaction` on the file | in [`Guard::transaction`], a `sqlx::Transaction` on the database |
//! | writers at once | many | **one**: every write (a claim, a completion, the handler's own transaction) waits for the file's write lock | many |
//!
//! All three implement [`IdempotencyStore`], with the same [`StoreOptions`], so a handler
//! written against the trait runs on any of them; `MemoryStore` is for tests and
//! single-process tools.
//!
//! **Choosing an engine.** SQLite has one writer at a time, for the whole file: with 16 requests
//! writing at once, each write waits for the write lock, the handler's own transaction included,
//! with or without a store, and it waits by sleeping (SQLite's busy handler tries again after 1,
//! 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and 100 ms), so every write's p99 grows to one of those
//! sums. `bench/RESULTS.md` §6 measured it with `cargo run --release -p retry-bench --bin
//! payments -- --postgres URL --runs 5` (twice, on a 2-core machine shared with other builds,
//! load average 10 to 17): 16 callers sharing one pool of 10, their operations mixed, gave p99s
//! of 35 to 178 ms for the handler alone (one transaction with one `INSERT`) and of 8 to 112 ms
//! for a new key with a store, in ten runs, against under a millisecond at p50 one at a time;
//! issue 39's measurement of the same layout from outside reached 231 to 334 ms. Replays are
//! reads and do not wait. A service that writes from many requests at once, or runs replicas on
//! several machines, wants PostgreSQL.
//!
//! # Exactly once, and where it ends
//!
//! For the service's **own writes** (the payout's row in the ledger), the SQL stores give
//! exactly once: [`Guard::transaction`] opens a transaction on the store's database, the handler
//! writes its rows in it, and [`Guard::complete`] stores the response and marks the key completed
//! *in the same transaction*, then commits. Either both commit or neither does: a crash before
//! the commit leaves no payout and no completed key, and the retry executes once; a crash after
//! it leaves both, and the retry gets the stored response.
//!
//! A call to **another system** (the bank) is outside that transaction. A crash between the
//! bank's answer and the commit leaves the key running; after the lease the retry executes again
//! and calls the bank again. That second call is harmless only if the handler passed the same
//! key on to the bank (its own `Idempotency-Key`): derive it from the claim's key, never from the
//! claim number. Make the foreign call before opening the transaction, so that the database is
//! not held while the bank thinks.
//!
//! # One commit per new key
//!
//! The flow above, the **lease mode** ([`Mode::Lease`], [`IdempotencyStore::begin`]), costs a
//! new key two durable commits: the claim commits on its own (so that it outlives a crash and
//! can be fenced), then the handler's transaction commits its rows with the completion. A
//! handler whose side effects **all** live in the store's database (its rows, and jobs in a
//! [queue](crate::queue) on the same pool) needs only one: the **one-commit mode**
//! ([`Mode::OneCommit`], `begin_with(Mode::OneCommit, scope, key, fingerprint)`) makes the claim
//! the first statement of the handler's own transaction, and [`Guard::complete`] commits the
//! claim, the rows and the response at once. The two modes hand out the same [`Guard`]; they
//! differ in what it holds:
//!
//! | | lease mode | one-commit mode |
//! |---|---|---|
//! | the claim when `begin` answers | committed, under a lease | written in the guard's open transaction |
//! | [`Guard::transaction`] | opened on the first call, after any call to another system | the claim's transaction |
//! | a concurrent duplicate | [`Begin::InProgress`] (409) | waits for the claimer's transaction, then [`Begin::Replay`] |
//! | a crash, a rollback, a dropped guard | the key is released in the background, or taken over after its lease | the claim rolls back with the rows: the key is free at once |
//! | [`Guard::renew`] | extends the lease | nothing to do |
//!
//! In the one-commit mode a duplicate's claim waits on the claimer's transaction (PostgreSQL's
//! `INSERT … ON CONFLICT` on its uncommitted row, SQLite's `BEGIN IMMEDIATE` on its write lock,
//! up to the busy timeout) and then answers from what it committed. It answers
//! [`Begin::InProgress`] in two cases: the key is running in the lease mode, or four claims in a
//! row each found the key claimed and committed by another transaction that the following read
//! still did not show (a key busy with requests that keep replacing its row; rare, and a 409
//! sends the client back later). Keep the transaction short and never call another system inside
//! it: every duplicate of the key waits for it, holding a connection. Both modes share the
//! table: a key running in the lease mode is `InProgress` to the one-commit mode, and a lease-mode
//! holder whose lease ended is taken over by either.
//!
//! | a new key costs | round trips (PostgreSQL) | durable commits |
//! |---|---|---|
//! | the lease mode | the claim, then `BEGIN`, the handler's statements, the completion, `COMMIT` | two |
//! | the one-commit mode | `BEGIN`, the claim, the handler's statements, the completion, `COMMIT` | one |
//! | a replay, either mode | one statement (the one-commit mode: `BEGIN` and one statement) that locks no row and writes no WAL | none |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use retry_runtime::IdempotencyKey;
//! use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, Mode, SqliteStore};
//!
//! # let dir = std::env::temp_dir().join(format!("retry-doc-{}", IdempotencyKey::new()));
//! # std::fs::create_dir_all(&dir)?;
//! let store = SqliteStore::<String>::open(dir.join("ledger.db")).await?;
//! store.migrate().await?;
//! sqlx::query("CREATE TABLE ledger (key TEXT PRIMARY KEY, cents INTEGER NOT NULL)")
//!     .execute(store.pool())
//!     .await?;
//!
//! let key = IdempotencyKey::from("transfer-4711");
//! let body = br#"{"from":1,"to":2,"cents":125000}"#;
//! for _ in 0..2 {
//!     match store.begin_with(Mode::OneCommit, "", &key, Fingerprint::of(body)).await? {
//!         Begin::Execute(mut guard) => {
//!             // The claim is already written in this transaction, not committed.
//!             sqlx::query("INSERT INTO ledger (key, cents) VALUES (?, ?)")
//!                 .bind(key.as_str())
//!                 .bind(125_000_i64)
//!                 .execute(&mut **guard.transaction().await?)
//!                 .await?;
//!             guard.complete(&"201 transfer T-1".to_owned()).await?; // the one commit
//!         }
//!         Begin::Replay(stored) => assert_eq!(stored, "201 transfer T-1"),
//!         other => panic!("answer {:?}", other.rejection_status()),
//!     }
//! }
//! let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger").fetch_one(store.pool()).await?;
//! assert_eq!(rows, 1);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Leases and fencing
//!
//! A running key holds a **lease** (60 s by default, [`DEFAULT_LEASE`]). While it runs, a repeat
//! is [`Begin::InProgress`]. When a process dies holding a key, nobody completes or releases it;
//! once the lease has ended, the next request with the same payload takes the key over and gets
//! [`Begin::Execute`] with the next **claim number** ([`Guard::claim`]: 1 for the first
//! execution, 2 for the first takeover, ...). A handler that runs longer than the lease calls
//! [`Guard::renew`] between its steps. A `begin` that is itself cancelled gives back the claim
//! it wrote, like a dropped guard (see [`IdempotencyStore::begin_with`]).
//!
//! Each claim also carries a random token, and every write of a guard (complete, renew,
//! release) names it: a **fencing token**. A holder whose key was taken over is refused with
//! [`StoreError::Superseded`], and `complete` rolls its transaction back, so a stale handler
//! (a process that was paused, not dead) can never overwrite its successor's answer or commit a
//! second payout. That holds at every isolation level: when the handler's transaction fails
//! because a takeover changed the key's row (PostgreSQL's 40001 at repeatable read or
//! serializable), `complete` reads the row afresh and answers `Superseded`, not a transient
//! error. A holder whose lease ended but whose key nobody took over still completes.
//!
//! # Expiry
//!
//! A completed key replays its response for a TTL after completion (24 h by default, as Stripe
//! keeps keys, [`DEFAULT_TTL`]); after that the key executes afresh. Expired rows are deleted by
//! [`IdempotencyStore::purge_expired`]; run it from a timer in one replica, every few minutes to
//! once an hour (it deletes in batches of 1,000 rows, so it never holds the table for long, and
//! an expired key behaves as expired whether it has been deleted or not). A running key whose
//! holder died is deleted a TTL after its lease ended. (In the one-commit mode the SQL stores
//! count the TTL from the claim, a statement earlier in the same transaction as the
//! completion, so that the completion changes no indexed column.) The TTL, the lease and the
//! size limit below are [`StoreOptions`].
//!
//! # Scopes
//!
//! Keys are compared as they are. A service with many clients scopes them: each client (an API
//! account, a tenant) gets its own key space with [`IdempotencyStore::begin_scoped`], so two
//! clients that chose the same key never see each other's responses. [`IdempotencyStore::begin`]
//! is the scope `""`.
//!
//! # Stored responses
//!
//! `MemoryStore` keeps `R` as it is. The SQL stores keep it as JSON (`R: Serialize +
//! DeserializeOwned`, with `serde_json`), at most 64 KiB by default
//! ([`DEFAULT_MAX_RESPONSE_BYTES`], [`StoreOptions::max_response_bytes`]). A longer response is refused by
//! [`Guard::complete`] with [`StoreError::TooLarge`] before anything is written: the handler's
//! transaction rolls back, the key is released, and the service should answer 500, because the
//! same request would fail the same way. Store what a repeat needs (a status and a small body, or
//! a reference to a document), not the document.
//!
//! # When the store fails
//!
//! `begin` returns `Err(StoreError)` when the database cannot be reached or refuses the
//! statement. Execute nothing then: answer 503 with `Retry-After` ([`StoreError::status`]), which
//! a client's `#[retry]` treats as a passing failure. The SQL stores retry their own statements
//! twice on a passing failure ([`Transient`](retry_runtime::Transient) for `sqlx::Error`) before giving
//! up, except a pool timeout and SQLite's busy, which have already waited their whole timeout.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), retry_durable::store::StoreError> {
//! use retry_runtime::IdempotencyKey;
//! use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
//!
//! let store = MemoryStore::<String>::new();
//! let key = IdempotencyKey::from("8e03978e-40d5-43e8-bc93-6894a57f9324");
//! let payload = Fingerprint::of(br#"{"claim":4711,"cents":125000}"#);
//! let mut payouts = 0;
//!
//! // The first request executes and stores its response.
//! let Begin::Execute(guard) = store.begin(&key, payload).await? else { unreachable!() };
//! payouts += 1;
//! guard.complete(&"201 receipt R-1".to_owned()).await?;
//!
//! // The client did not get it and sends the same request again: the stored response.
//! assert_eq!(store.begin(&key, payload).await?, Begin::Replay("201 receipt R-1".to_owned()));
//!
//! // The same key for another payout is a client error.
//! let other = Fingerprint::of(br#"{"claim":4711,"cents":990000}"#);
//! let answer = store.begin(&key, other).await?;
//! assert_eq!(answer, Begin::Mismatch);
//! assert_eq!(answer.rejection_status(), Some(422));
//! assert_eq!(payouts, 1);
//! # Ok(())
//! # }
//! ```

use retry_runtime::IdempotencyKey;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "conformance")]
pub mod conformance;
mod memory;
pub(crate) mod metrics;
mod options;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryStore;
pub use options::{Mode, StoreOptions};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use {crate::sql::Backend, sql::SqlStore};

/// How long a completed key replays its response: 24 hours, as Stripe keeps its keys.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a running key is held for its handler before another request may take it over:
/// 60 seconds. A handler that may run longer calls [`Guard::renew`].
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// The longest response the SQL stores keep, serialized: 64 KiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The future a store's operation returns: boxed, so that the trait can be used as
/// `dyn IdempotencyStore`, and `Send`, so that it can be awaited in an axum handler or a spawned
/// task. One allocation per operation, next to a database round trip.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An error that may come from any database driver.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Where a service keeps the responses it gave, by idempotency key.
///
/// `R` is the stored response: whatever the service needs to answer a repeat, such as a status
/// code and a body. [`Transaction`](IdempotencyStore::Transaction) is what a claim hands the
/// handler for its own writes: a `sqlx::Transaction` for the SQL stores, `()` for
/// [`MemoryStore`].
///
/// Services call [`begin`](IdempotencyStore::begin) (or
/// [`begin_scoped`](IdempotencyStore::begin_scoped)) and use the [`Guard`] it hands out, and
/// call [`purge_expired`](IdempotencyStore::purge_expired) from a timer. The other methods are
/// what the guard calls, for the [`Claim`] it holds; an implementation checks the claim's
/// token on each of them, so that a guard whose key has been taken over changes nothing.
///
/// The trait is dyn-compatible: a service can hold an `Arc<dyn IdempotencyStore<R, Transaction
/// = T>>`, with `T` the store's transaction type (`sqlx::Transaction<'static, sqlx::Postgres>`
/// for `PostgresStore`, and so on), which the handler's own writes depend on.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
/// use std::sync::Arc;
///
/// // Generic over the store, so that tests can pass a `MemoryStore` and production a database.
/// async fn pay_out<S>(store: &S, key: &IdempotencyKey, cents: u64) -> Result<u32, u16>
/// where
///     S: IdempotencyStore<u32> + ?Sized,
/// {
///     match store.begin(key, Fingerprint::of(&cents.to_be_bytes())).await {
///         Ok(Begin::Execute(guard)) => {
///             let receipt = 7; // the real work
///             guard.complete(&receipt).await.map_err(|e| e.status())?;
///             Ok(receipt)
///         }
///         Ok(Begin::Replay(receipt)) => Ok(receipt),
///         Ok(rejected) => Err(rejected.rejection_status().unwrap_or(500)),
///         Err(unavailable) => Err(unavailable.status()),
///     }
/// }
///
/// // Or behind `dyn`, naming the store's transaction type (`()` for `MemoryStore`).
/// let store: Arc<dyn IdempotencyStore<u32, Transaction = ()>> = Arc::new(MemoryStore::new());
/// let key = IdempotencyKey::new();
/// assert_eq!(pay_out(&*store, &key, 125_000).await, Ok(7));
/// assert_eq!(pay_out(&*store, &key, 125_000).await, Ok(7)); // replayed
/// assert_eq!(pay_out(&*store, &key, 990_000).await, Err(422));
/// # }
/// ```
pub trait IdempotencyStore<R>: Send + Sync {
    /// What [`Guard::transaction`] hands the handler for its own writes, committed together with
    /// the key's completion.
    type Transaction: Send;

    /// Looks up `key` in `scope`: claims it for the caller in `mode` if it is new, released,
    /// expired, or its lease-mode holder's lease ended, or says why the caller must not execute.
    /// See the [module docs](self) for the cases and [`Mode`] for the two modes, which differ in
    /// the [`Guard`] they hand out: in [`Mode::Lease`] the claim has committed under a lease
    /// when the guard is handed out; in [`Mode::OneCommit`] it is written in the guard's open
    /// transaction and commits with the completion. One atomic statement decides the claim, so
    /// two requests that arrive together on two replicas get exactly one [`Begin::Execute`].
    ///
    /// A different `fingerprint` wins over a running execution: the answer is
    /// [`Mismatch`](Begin::Mismatch), not [`InProgress`](Begin::InProgress), because the request
    /// would be refused however long the client waited. A key whose holder died is taken over
    /// only by the same payload; a different one is a mismatch until the key expires.
    ///
    /// A key that breaks the key rule ([`validate_key`]) is refused with
    /// [`StoreError::InvalidKey`] before any database work.
    ///
    /// # Cancellation
    ///
    /// A `begin` whose future is dropped before it answers (a timeout, a `select!`, a client
    /// that hung up) gives back any claim it wrote, as a dropped [`Guard`] does:
    /// [`MemoryStore`] at once; the SQL stores in a tokio task that deletes the claim by its
    /// token on the connection that ran the claim statement, after that statement, so that the
    /// key is free again within a round trip (in the one-commit mode the claim is uncommitted,
    /// and the dropped transaction takes it with it). So does a `begin` that fails after its
    /// statement may have committed (the connection broke before the answer). The lease returns
    /// the key instead, a whole lease later, where the store cannot do that: no tokio runtime at
    /// the drop, a process that dies, or a connection that breaks while the server is still
    /// running the claim statement (the release then runs on another connection and may come
    /// first).
    fn begin_with<'s, 'a>(
        &'s self,
        mode: Mode,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a;

    /// [`begin_with`](IdempotencyStore::begin_with) in the lease mode and the scope `""`, for a
    /// service whose keys are unique across its clients (random UUIDs from trusted callers).
    fn begin<'s, 'a>(
        &'s self,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        self.begin_with(Mode::Lease, "", key, fingerprint)
    }

    /// [`begin_with`](IdempotencyStore::begin_with) in the lease mode, in `scope` (an API
    /// account, a tenant: see [Scopes](self#scopes)).
    fn begin_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        self.begin_with(Mode::Lease, scope, key, fingerprint)
    }

    /// Opens the transaction [`Guard::transaction`] hands out in the lease mode (the one-commit
    /// mode's guard holds its transaction from the start).
    fn transaction<'a>(
        &'a self,
        claim: &'a Claim,
    ) -> BoxFuture<'a, Result<Self::Transaction, StoreError>>;

    /// Stores `response` for `claim`'s key and marks it completed, in `transaction` if there is
    /// one (always in the one-commit mode, whose claim it holds), and commits. Refuses with
    /// [`StoreError::Superseded`] (and rolls back) if the claim no longer holds the key. Called
    /// by [`Guard::complete`].
    fn complete<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
        response: &'a R,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Extends `claim`'s lease to a full lease from now, or refuses with
    /// [`StoreError::Superseded`]. Called by [`Guard::renew`] in the lease mode only.
    fn renew<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Rolls `transaction` back and forgets `claim`'s key, so that the next request executes
    /// (in the one-commit mode the rollback is all it takes). Refuses with
    /// [`StoreError::Superseded`] (and changes nothing but the rollback) if the claim no longer
    /// holds the key. Called by [`Guard::release`].
    fn release<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The same as [`release`](IdempotencyStore::release), without waiting: called when a
    /// [`Guard`] is dropped. A store that needs I/O starts it in the background (the SQL stores
    /// spawn a tokio task); if it cannot, the lease returns the key. Nobody sees the answer: a
    /// claim that no longer holds the key changes nothing, silently.
    fn release_in_background(&self, claim: Claim, transaction: Option<Self::Transaction>);

    /// Deletes the keys whose TTL has passed and returns how many. Expired keys already behave
    /// as absent; this only frees the space. See the [module docs](self#expiry) for how often.
    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// The `store` label of this store's metrics (feature `metrics`, `docs/metrics.md`): the
    /// kind of store, `memory`, `sqlite` or `postgres`, and `custom` for a store that does not
    /// say. A bounded name: never a URL, a file or a key.
    fn metrics_label(&self) -> &'static str {
        "custom"
    }
}

/// What a service should do with a request that carries an idempotency key: the answer of
/// [`IdempotencyStore::begin`].
///
/// `T` is the store's [`Transaction`](IdempotencyStore::Transaction) type.
#[must_use = "a request is executed only on `Begin::Execute`; the other cases are answers to send"]
#[non_exhaustive]
pub enum Begin<'s, R, T: Send = ()> {
    /// The key is new (or free again): execute, then [`complete`](Guard::complete) the guard
    /// with the response.
    Execute(Guard<'s, R, T>),
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

impl<R, T: Send> Begin<'_, R, T> {
    /// The HTTP status of a refusal: 409 for [`InProgress`](Begin::InProgress), 422 for
    /// [`Mismatch`](Begin::Mismatch), `None` when there is a response to send
    /// ([`Execute`](Begin::Execute), [`Replay`](Begin::Replay)).
    ///
    /// ```
    /// use retry_durable::store::Begin;
    ///
    /// assert_eq!(Begin::<()>::InProgress.rejection_status(), Some(409));
    /// assert_eq!(Begin::<()>::Mismatch.rejection_status(), Some(422));
    /// assert_eq!(Begin::<_>::Replay(()).rejection_status(), None);
    /// ```
    pub const fn rejection_status(&self) -> Option<u16> {
        match self {
            Begin::InProgress => Some(409),
            Begin::Mismatch => Some(422),
            Begin::Execute(_) | Begin::Replay(_) => None,
        }
    }
}

impl<R: fmt::Debug, T: Send> fmt::Debug for Begin<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Begin::Execute(guard) => f.debug_tuple("Execute").field(guard).finish(),
            Begin::Replay(response) => f.debug_tuple("Replay").field(response).finish(),
            Begin::InProgress => f.write_str("InProgress"),
            Begin::Mismatch => f.write_str("Mismatch"),
        }
    }
}

/// Equal when both are the same case, with equal responses or guards holding the same claim.
impl<R: PartialEq, T: Send> PartialEq for Begin<'_, R, T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Begin::Execute(a), Begin::Execute(b)) => a == b,
            (Begin::Replay(a), Begin::Replay(b)) => a == b,
            (Begin::InProgress, Begin::InProgress) | (Begin::Mismatch, Begin::Mismatch) => true,
            _ => false,
        }
    }
}

impl<R: Eq, T: Send> Eq for Begin<'_, R, T> {}

/// One holder's claim on a key: what the store handed out with [`Begin::Execute`], and what
/// [`Guard`] passes back to each of the store's methods.
///
/// The claim number counts the executions of the key (1 for the first, one more per takeover
/// after a lease ended). The token is random and names this one claim: the stores refuse a
/// write whose token no longer holds the key (fencing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Claim {
    scope: Arc<str>,
    key: IdempotencyKey,
    number: u64,
    token: u64,
    mode: Mode,
}

impl Claim {
    /// A claim of the lease mode on `key` in `scope`, with its number and token. For
    /// implementors of [`IdempotencyStore`].
    pub fn new(scope: &str, key: IdempotencyKey, number: u64, token: u64) -> Self {
        Claim {
            scope: scope.into(),
            key,
            number,
            token,
            mode: Mode::Lease,
        }
    }

    /// The same claim, made in `mode`.
    #[must_use]
    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// How the claim commits.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The scope the key is unique in (`""` for [`IdempotencyStore::begin`]).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The claim number: 1 for the key's first execution, one more for each takeover (see
    /// [`Guard::claim`]).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The random token that names this claim in the store.
    pub fn token(&self) -> u64 {
        self.token
    }
}

/// The claim on a key whose request is being executed, in either [`Mode`].
///
/// [`complete`](Guard::complete) stores the response for repeats (for the SQL stores in the
/// same transaction as the handler's own writes, [`transaction`](Guard::transaction)). [`release`](Guard::release) gives the key back after a
/// passing failure, so that the client's retry executes afresh; dropping the guard does the same
/// in the background (for the SQL stores, a spawned task), so that a handler that fails, panics
/// or is cancelled halfway does not leave the key blocked until its lease ends.
///
/// Complete the guard with every *final* response, success or a permanent error; release it
/// after a passing failure (the bank was unreachable) that a retry may get past.
///
/// The two modes differ in the guard, not in its type: a guard of the lease mode
/// ([`IdempotencyStore::begin`]) holds a committed claim under a lease and opens its
/// transaction on the first call to [`transaction`](Guard::transaction); a guard of the
/// one-commit mode ([`IdempotencyStore::begin_with(Mode::OneCommit, ..)`]) holds the open transaction in
/// which its claim was written, so [`transaction`](Guard::transaction) returns it at once and
/// dropping the guard rolls the claim back with the handler's rows. [`mode`](Guard::mode) tells
/// them apart.
///
/// A handler cancelled after a side effect *outside* the database (the bank call) and before
/// `complete` releases the key too, and the retry calls the bank again: pass the key on to the
/// bank, or run the whole `begin`, execute, `complete` sequence in a task that the connection
/// does not own (`tokio::spawn` with an `Arc` of the store) and await its result in the handler.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), retry_durable::store::StoreError> {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
///
/// let store = MemoryStore::<String>::new();
/// let key = IdempotencyKey::from("payout-4711");
/// let payload = Fingerprint::of(b"125000");
///
/// let Begin::Execute(guard) = store.begin(&key, payload).await? else { unreachable!() };
/// assert_eq!(guard.claim(), 1);
/// assert_eq!(store.begin(&key, payload).await?, Begin::InProgress);
/// guard.release().await?; // the bank was unreachable: nothing to store
/// assert!(matches!(store.begin(&key, payload).await?, Begin::Execute(_))); // the retry executes
/// # Ok(())
/// # }
/// ```
#[must_use = "dropping the guard releases the key; call `complete` with the response"]
pub struct Guard<'s, R, T: Send = ()> {
    store: &'s (dyn IdempotencyStore<R, Transaction = T> + 's),
    claim: Claim,
    transaction: Option<T>,
    finished: bool,
}

impl<'s, R, T: Send> Guard<'s, R, T> {
    /// A guard over `claim`, which `store` has just handed out, with no transaction open yet
    /// (the lease mode's). For implementors of [`IdempotencyStore`]; services get their guards
    /// from [`begin`](IdempotencyStore::begin).
    pub fn new(store: &'s (dyn IdempotencyStore<R, Transaction = T> + 's), claim: Claim) -> Self {
        Guard {
            store,
            claim,
            transaction: None,
            finished: false,
        }
    }

    /// A guard over `claim`, written in `transaction`, which `store` has just opened (the
    /// one-commit mode's). For implementors of [`IdempotencyStore`].
    pub fn in_transaction(
        store: &'s (dyn IdempotencyStore<R, Transaction = T> + 's),
        claim: Claim,
        transaction: T,
    ) -> Self {
        Guard {
            store,
            claim,
            transaction: Some(transaction),
            finished: false,
        }
    }

    /// How the claim commits: [`Mode::Lease`] from [`begin`](IdempotencyStore::begin),
    /// [`Mode::OneCommit`] from [`begin_with(Mode::OneCommit, ..)`](IdempotencyStore::begin_with).
    pub fn mode(&self) -> Mode {
        self.claim.mode()
    }

    /// The key this guard holds.
    pub fn key(&self) -> &IdempotencyKey {
        self.claim.key()
    }

    /// The scope of the key (`""` for [`IdempotencyStore::begin`]).
    pub fn scope(&self) -> &str {
        self.claim.scope()
    }

    /// The claim number, the fencing number that orders the key's holders: 1 for the key's first
    /// execution, 2 when a request took the key over after the first holder's lease ended (or
    /// after its response expired), and so on. It starts again at 1 once the key's row is gone
    /// (released, or deleted after it expired). A number above 1 may mean that an earlier
    /// execution reached its calls to other systems: pass the key on to them.
    pub fn claim(&self) -> u64 {
        self.claim.number()
    }

    /// The transaction for the handler's own writes (for the SQL stores, a `sqlx::Transaction`
    /// on the store's pool, in which a [queue](crate::queue::Queue::enqueue_in) on the same pool
    /// can enqueue too). [`complete`](Guard::complete) commits it together with the key's
    /// completion; [`release`](Guard::release) and dropping the guard roll it back.
    ///
    /// In the lease mode it is opened on the first call (`BEGIN IMMEDIATE` for SQLite, so the
    /// write lock is taken at once): open it after any call to another system, so that the
    /// database is not held while that system answers. In the one-commit mode it is the
    /// transaction that holds the claim, open since `begin`.
    pub async fn transaction(&mut self) -> Result<&mut T, StoreError> {
        let transaction = match self.transaction.take() {
            Some(open) => open,
            None => metrics::counted(
                self.store.metrics_label(),
                self.store.transaction(&self.claim).await,
            )?,
        };
        Ok(self.transaction.insert(transaction))
    }

    /// Stores `response` as the answer to every repeat of this request until it expires, in
    /// the handler's transaction if one was opened, and commits.
    ///
    /// # Errors
    ///
    /// [`StoreError::Superseded`] if the key was taken over after the lease ended: nothing is
    /// stored and the transaction is rolled back, so the handler's own writes are undone too.
    /// [`StoreError::TooLarge`] for a response over the store's limit: likewise rolled back, and
    /// the key released. [`StoreError::Database`] if the commit failed: the key is released in
    /// the background if the commit did not happen; if it did, a repeat gets the response.
    pub async fn complete(mut self, response: &R) -> Result<(), StoreError> {
        let transaction = self.transaction.take();
        let completed = self
            .store
            .complete(&self.claim, transaction, response)
            .await;
        metrics::counted(self.store.metrics_label(), completed)?;
        self.finished = true;
        Ok(())
    }

    /// Extends the lease to a full lease from now. A handler that may run longer than the
    /// lease calls it between its steps, before it opens its [`transaction`](Guard::transaction):
    /// the renewal is written on a connection of its own, and on SQLite it would wait for the
    /// write lock that the open transaction holds (nobody can take the key over meanwhile
    /// either, since that is a write too). In the one-commit mode there is no lease, and it
    /// returns at once.
    ///
    /// # Errors
    ///
    /// [`StoreError::Superseded`] if the key was taken over: stop, and drop the guard.
    pub async fn renew(&self) -> Result<(), StoreError> {
        if self.claim.mode() == Mode::OneCommit {
            return Ok(());
        }
        let renewed = self.store.renew(&self.claim).await;
        metrics::counted(self.store.metrics_label(), renewed)
    }

    /// Rolls the handler's transaction back and gives the key up, so that the next request with
    /// it executes. For a passing failure; waits for the store, where dropping the guard does the
    /// same in the background.
    ///
    /// # Errors
    ///
    /// [`StoreError::Superseded`] if the key was taken over after the lease ended: the
    /// transaction is rolled back and the successor keeps the key. [`StoreError::Database`] if
    /// the store could not be reached: the transaction is rolled back, the guard's drop tries
    /// the release once more in the background, and failing that the lease returns the key.
    pub async fn release(mut self) -> Result<(), StoreError> {
        let transaction = self.transaction.take();
        let released = self.store.release(&self.claim, transaction).await;
        let released = metrics::counted(self.store.metrics_label(), released);
        // After a database error the drop tries once more in the background; otherwise the
        // claim is released or no longer the key's, and there is nothing left to give back.
        if !matches!(released, Err(StoreError::Database { .. })) {
            self.finished = true;
        }
        released
    }
}

impl<R, T: Send> Drop for Guard<'_, R, T> {
    fn drop(&mut self) {
        if !self.finished {
            self.store
                .release_in_background(self.claim.clone(), self.transaction.take());
        }
    }
}

impl<R, T: Send> fmt::Debug for Guard<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("scope", &self.claim.scope())
            .field("key", self.claim.key())
            .field("claim", &self.claim.number())
            .field("mode", &self.claim.mode())
            .field("transaction", &self.transaction.is_some())
            .finish()
    }
}

/// Two guards are equal when they hold the same claim.
impl<R, T: Send> PartialEq for Guard<'_, R, T> {
    fn eq(&self, other: &Self) -> bool {
        self.claim == other.claim
    }
}

impl<R, T: Send> Eq for Guard<'_, R, T> {}

/// Why a store could not answer or store.
///
/// [`status`](StoreError::status) gives the HTTP answer, and [`Transient`](retry_runtime::Transient)
/// says whether the client's retry may get past it.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The database could not run a statement: it is down or unreachable, busy, or it refused
    /// the statement. `transient` classifies `source` (for `sqlx::Error` by the table of
    /// [`Transient`](retry_runtime::Transient) for it). Answer 503 when transient, 500 otherwise.
    Database {
        /// The driver's error.
        source: BoxError,
        /// Whether the same statement may succeed after a pause.
        transient: bool,
    },
    /// The guard's claim no longer holds the key: its lease ended and another request took the
    /// key over with the claim number after this one. Nothing was stored and the handler's
    /// transaction was rolled back. Answer 409: the client's retry gets the successor's response.
    Superseded {
        /// The claim number that was refused.
        claim: u64,
    },
    /// The serialized response is longer than the store's limit. Nothing was stored, the
    /// transaction was rolled back and the key released. Answer 500.
    TooLarge {
        /// The serialized response's length in bytes.
        len: usize,
        /// The store's limit in bytes.
        limit: usize,
    },
    /// The response could not be serialized, or a stored one could not be read back as the
    /// store's response type (it changed between deployments without staying compatible).
    Codec(BoxError),
    /// The store's tables are missing or newer than this library: the message says what to do.
    Schema(String),
    /// The key breaks the rule of every key ([`validate_key`]): refused before any database
    /// work. Answer 400: the request is wrong, and a retry would get the same answer.
    InvalidKey,
}

/// A key refused by [`validate_key`].
impl From<KeyError> for StoreError {
    fn from(_: KeyError) -> Self {
        StoreError::InvalidKey
    }
}

impl StoreError {
    /// A database error from any driver, with its classification.
    pub fn database(source: impl Into<BoxError>, transient: bool) -> Self {
        StoreError::Database {
            source: source.into(),
            transient,
        }
    }

    /// The HTTP status to answer with: 503 for a transient database error (send `Retry-After`
    /// too), 409 for [`Superseded`](StoreError::Superseded), 400 for
    /// [`InvalidKey`](StoreError::InvalidKey), 500 otherwise.
    ///
    /// ```
    /// use retry_durable::store::StoreError;
    /// use std::io;
    ///
    /// let down = StoreError::database(io::Error::from(io::ErrorKind::ConnectionRefused), true);
    /// assert_eq!(down.status(), 503);
    /// assert_eq!(StoreError::Superseded { claim: 1 }.status(), 409);
    /// assert_eq!(StoreError::TooLarge { len: 70_000, limit: 65_536 }.status(), 500);
    /// assert_eq!(StoreError::InvalidKey.status(), 400);
    /// ```
    pub fn status(&self) -> u16 {
        match self {
            StoreError::InvalidKey => 400,
            StoreError::Database {
                transient: true, ..
            } => 503,
            StoreError::Superseded { .. } => 409,
            _ => 500,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Database {
                source,
                transient: true,
            } => write!(f, "the idempotency store is unavailable: {source}"),
            StoreError::Database { source, .. } => {
                write!(
                    f,
                    "the idempotency store's database refused a statement: {source}"
                )
            }
            StoreError::Superseded { claim } => write!(
                f,
                "claim {claim} on this idempotency key was taken over after its lease ended; \
                 nothing was stored and the transaction was rolled back"
            ),
            StoreError::TooLarge { len, limit } => write!(
                f,
                "the response is {len} bytes serialized, over the idempotency store's limit of \
                 {limit}; nothing was stored, the transaction was rolled back and the key \
                 released: store a smaller response or raise the limit with \
                 `max_response_bytes`"
            ),
            StoreError::Codec(source) => write!(
                f,
                "the response could not be converted to or from its stored JSON: {source}"
            ),
            StoreError::Schema(message) => f.write_str(message),
            StoreError::InvalidKey => write!(
                f,
                "the idempotency key is not valid: {}",
                retry_runtime::headers::KEY_RULE
            ),
        }
    }
}

impl Error for StoreError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StoreError::Database { source, .. } | StoreError::Codec(source) => Some(&**source),
            _ => None,
        }
    }
}

/// Transient: a database error classified so, and [`Superseded`](StoreError::Superseded) (the
/// successor's response is there for the retry). Not transient: a database error that will
/// recur, a response too large, a codec or schema error, an invalid key.
impl retry_runtime::Transient for StoreError {
    fn is_transient(&self) -> bool {
        match self {
            StoreError::Database { transient, .. } => *transient,
            StoreError::Superseded { .. } => true,
            _ => false,
        }
    }
}

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
/// use retry_durable::store::Fingerprint;
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

// The key header's reader and the rule of every key are the runtime's (`retry_runtime::headers`,
// with every header helper); the stores check keys with them and name them here too.
pub use retry_runtime::headers::{KeyError, key_from_header, validate_key};

/// A fresh claim token: random, so that it names one claim across stores, processes and
/// restarts.
pub(crate) fn random_token() -> u64 {
    use rand::Rng;
    rand::rng().next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_fnv1a_64() {
        assert_eq!(Fingerprint::of(b"").as_u64(), 0xcbf2_9ce4_8422_2325);
        assert_eq!(Fingerprint::of(b"a").as_u64(), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(Fingerprint::of(b"foobar").as_u64(), 0x8594_4171_f739_67e8);
        const AT_COMPILE_TIME: Fingerprint = Fingerprint::of(b"a");
        assert_eq!(AT_COMPILE_TIME, Fingerprint::from(0xaf63_dc4c_8601_ec8c));
    }
}
