//! One durable commit per new key: the claim made in the handler's own transaction
//! ([`TransactionalStore`], [`TxBegin`], [`TxGuard`]).

use super::{BoxFuture, Claim, Fingerprint, StoreError};
use retry_runtime::IdempotencyKey;
use std::fmt;

/// A store that claims a key **inside the handler's own transaction**, so that a new key costs
/// one durable commit: the claim, the handler's rows and the key's completion commit together.
///
/// # Which mode
///
/// | the handler's side effects | use | a new key costs | a crash mid-handler |
/// |---|---|---|---|
/// | all in the store's database (a ledger row, a balance) | [`begin_in_transaction`](TransactionalStore::begin_in_transaction) | one commit | rolls back the claim with the rows: the retry executes at once |
/// | also in another system (a bank, an e-mail) | [`IdempotencyStore::begin`](super::IdempotencyStore::begin) | two commits (the claim, then the rows with the completion) | the key stays claimed until its lease ends, and the fencing token refuses the dead holder |
///
/// In this mode there is no lease and no fencing token to check: the claim is an uncommitted
/// row, locked by the transaction that wrote it, and nobody else can see or take it.
/// - A **concurrent duplicate waits** on that row lock (PostgreSQL: its `INSERT … ON CONFLICT`
///   blocks on the claimer's uncommitted row; SQLite: its `BEGIN IMMEDIATE` waits for the
///   claimer's write lock, up to the pool's busy timeout) and, once the claimer commits, gets
///   [`TxBegin::Replay`] with the committed response instead of a 409.
/// - A handler that **fails, returns early, is cancelled or panics** drops its [`TxGuard`]: the
///   transaction rolls back, and with it the claim. The key is free at once.
/// - A **process killed** mid-transaction leaves nothing: the database discards the
///   uncommitted claim together with the handler's rows.
///
/// So keep the transaction short and never call another system inside it: every duplicate of
/// the key waits for it, holding a connection. A handler that needs another system uses the
/// lease mode ([`IdempotencyStore`](super::IdempotencyStore)), which makes that call before its
/// transaction opens.
///
/// Both modes share the table, so one key may be used in either: a key claimed by the lease
/// mode and still running answers [`TxBegin::InProgress`] here; a lease-mode holder whose lease
/// ended is taken over (its `complete` is then refused with
/// [`StoreError::Superseded`]); a completed key replays whichever mode completed it.
///
/// `SqliteStore` and `PostgresStore` implement it. `MemoryStore` does not: it has no
/// transaction to put the claim in (its `Transaction` is `()`, so the handler's writes are not
/// covered) and no commit to save (its lease mode costs no I/O at all).
///
/// # Costs
///
/// | | round trips | durable commits |
/// |---|---|---|
/// | a new key | a read, `BEGIN` with the claim, the handler's statements, the completion, `COMMIT` | one |
/// | a replay or a mismatch | the read | none |
/// | a concurrent duplicate | the read, the claim (waits), `ROLLBACK`, the read | none |
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Fingerprint, SqliteStore, TransactionalStore, TxBegin};
///
/// # let dir = std::env::temp_dir().join(format!("retry-doc-{}", IdempotencyKey::new()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = SqliteStore::<String>::open(dir.join("ledger.db")).await?;
/// store.migrate().await?;
/// sqlx::query("CREATE TABLE ledger (key TEXT PRIMARY KEY, cents INTEGER NOT NULL)")
///     .execute(store.pool())
///     .await?;
///
/// let key = IdempotencyKey::from("transfer-4711");
/// let body = br#"{"from":1,"to":2,"cents":125000}"#;
/// for _ in 0..2 {
///     match store.begin_in_transaction(&key, Fingerprint::of(body)).await? {
///         TxBegin::Execute(mut guard) => {
///             // The claim is already written in this transaction, not committed.
///             sqlx::query("INSERT INTO ledger (key, cents) VALUES (?, ?)")
///                 .bind(key.as_str())
///                 .bind(125_000_i64)
///                 .execute(&mut **guard.transaction())
///                 .await?;
///             guard.complete(&"201 transfer T-1".to_owned()).await?; // the one commit
///         }
///         TxBegin::Replay(stored) => assert_eq!(stored, "201 transfer T-1"),
///         other => panic!("answer {:?}", other.rejection_status()),
///     }
/// }
/// let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger").fetch_one(store.pool()).await?;
/// assert_eq!(rows, 1);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub trait TransactionalStore<R>: Send + Sync {
    /// The handler's transaction, which holds the claim: a `sqlx::Transaction` on the store's
    /// database.
    type Transaction: Send;

    /// Looks up `key` in `scope` and, if it is new (or free again: expired, or a lease-mode
    /// holder's lease ended with the same payload), opens a transaction and claims the key as
    /// its first statement. A replay or a mismatch is one read and opens nothing.
    ///
    /// A request whose key another transaction has just claimed waits for that transaction and
    /// then answers from what it committed: [`TxBegin::Replay`], or [`TxBegin::Execute`] if it
    /// rolled back. It answers [`TxBegin::InProgress`] only for a key running in the lease
    /// mode.
    fn begin_in_transaction_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<TxBegin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a;

    /// [`begin_in_transaction_scoped`](TransactionalStore::begin_in_transaction_scoped) in the
    /// scope `""`.
    fn begin_in_transaction<'s, 'a>(
        &'s self,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<TxBegin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        self.begin_in_transaction_scoped("", key, fingerprint)
    }

    /// Stores `response` for `claim`'s key and marks it completed in `transaction`, then
    /// commits. Called by [`TxGuard::complete`].
    fn complete_in_transaction<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Self::Transaction,
        response: &'a R,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Rolls `transaction` back, and the claim with it. Called by [`TxGuard::rollback`].
    fn rollback_in_transaction(
        &self,
        transaction: Self::Transaction,
    ) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The `store` label of this store's metrics, as
    /// [`IdempotencyStore::metrics_label`](super::IdempotencyStore::metrics_label) says it.
    fn metrics_label(&self) -> &'static str {
        "custom"
    }
}

/// The answer of [`TransactionalStore::begin_in_transaction`].
#[must_use = "a request is executed only on `TxBegin::Execute`; the other cases are answers to send"]
#[non_exhaustive]
pub enum TxBegin<'s, R, T: Send> {
    /// The key is claimed in the guard's transaction: write the handler's rows in
    /// [`TxGuard::transaction`], then [`complete`](TxGuard::complete).
    Execute(TxGuard<'s, R, T>),
    /// The same key and payload were completed before (perhaps while this request waited for
    /// the transaction that completed them): answer with this stored response.
    Replay(R),
    /// The key is running in the lease mode ([`IdempotencyStore`](super::IdempotencyStore)):
    /// answer 409 Conflict.
    InProgress,
    /// The key was used for a different payload: answer 422 Unprocessable Content.
    Mismatch,
}

impl<R, T: Send> TxBegin<'_, R, T> {
    /// The HTTP status of a refusal: 409 for [`InProgress`](TxBegin::InProgress), 422 for
    /// [`Mismatch`](TxBegin::Mismatch), `None` when there is a response to send.
    ///
    /// ```
    /// use retry_durable::store::TxBegin;
    ///
    /// assert_eq!(TxBegin::<(), ()>::Mismatch.rejection_status(), Some(422));
    /// assert_eq!(TxBegin::<_, ()>::Replay(()).rejection_status(), None);
    /// ```
    pub const fn rejection_status(&self) -> Option<u16> {
        match self {
            TxBegin::InProgress => Some(409),
            TxBegin::Mismatch => Some(422),
            TxBegin::Execute(_) | TxBegin::Replay(_) => None,
        }
    }
}

impl<R: fmt::Debug, T: Send> fmt::Debug for TxBegin<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxBegin::Execute(guard) => f.debug_tuple("Execute").field(guard).finish(),
            TxBegin::Replay(response) => f.debug_tuple("Replay").field(response).finish(),
            TxBegin::InProgress => f.write_str("InProgress"),
            TxBegin::Mismatch => f.write_str("Mismatch"),
        }
    }
}

/// Equal when both are the same case, with equal responses or guards holding the same claim.
impl<R: PartialEq, T: Send> PartialEq for TxBegin<'_, R, T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TxBegin::Execute(a), TxBegin::Execute(b)) => a.claim == b.claim,
            (TxBegin::Replay(a), TxBegin::Replay(b)) => a == b,
            (TxBegin::InProgress, TxBegin::InProgress) | (TxBegin::Mismatch, TxBegin::Mismatch) => {
                true
            }
            _ => false,
        }
    }
}

/// A key claimed in an open transaction, not yet committed: what
/// [`TxBegin::Execute`] hands the handler.
///
/// Write the handler's rows in [`transaction`](TxGuard::transaction), then
/// [`complete`](TxGuard::complete): the rows, the claim and the response commit at once.
/// [`rollback`](TxGuard::rollback), or dropping the guard, rolls everything back and frees the
/// key (a dropped `sqlx::Transaction` is rolled back when its connection goes back to the pool).
#[must_use = "dropping the guard rolls the transaction back; call `complete` with the response"]
pub struct TxGuard<'s, R, T: Send> {
    store: &'s (dyn TransactionalStore<R, Transaction = T> + 's),
    claim: Claim,
    transaction: T,
}

impl<'s, R, T: Send> TxGuard<'s, R, T> {
    /// A guard over `claim`, written in `transaction`, which `store` has just handed out. For
    /// implementors of [`TransactionalStore`].
    pub fn new(
        store: &'s (dyn TransactionalStore<R, Transaction = T> + 's),
        claim: Claim,
        transaction: T,
    ) -> Self {
        TxGuard {
            store,
            claim,
            transaction,
        }
    }

    /// The key this guard holds.
    pub fn key(&self) -> &IdempotencyKey {
        self.claim.key()
    }

    /// The scope of the key (`""` for
    /// [`begin_in_transaction`](TransactionalStore::begin_in_transaction)).
    pub fn scope(&self) -> &str {
        self.claim.scope()
    }

    /// The claim number: 1 for a new key, more when the key was taken over from a lease-mode
    /// holder whose lease ended (see [`Guard::claim`](super::Guard::claim)).
    pub fn claim(&self) -> u64 {
        self.claim.number()
    }

    /// The open transaction that holds the claim, for the handler's own writes.
    pub fn transaction(&mut self) -> &mut T {
        &mut self.transaction
    }

    /// Stores `response` as the answer to every repeat of this request until it expires, marks
    /// the key completed, and commits the transaction: the one durable commit of the request.
    ///
    /// # Errors
    ///
    /// [`StoreError::TooLarge`] or [`StoreError::Codec`] for a response that cannot be stored:
    /// the transaction is rolled back, and the key is free. [`StoreError::Database`] if a
    /// statement or the commit failed: if the commit did not happen, nothing did, and the retry
    /// executes; if it did, the retry gets the response.
    pub async fn complete(self, response: &R) -> Result<(), StoreError> {
        let TxGuard {
            store,
            claim,
            transaction,
        } = self;
        let completed = store
            .complete_in_transaction(&claim, transaction, response)
            .await;
        super::metrics::counted(store.metrics_label(), completed)
    }

    /// Rolls the transaction back, the claim with it, and waits for the database: the next
    /// request with the key executes. Dropping the guard does the same without waiting.
    pub async fn rollback(self) -> Result<(), StoreError> {
        let rolled_back = self.store.rollback_in_transaction(self.transaction).await;
        super::metrics::counted(self.store.metrics_label(), rolled_back)
    }
}

impl<R, T: Send> fmt::Debug for TxGuard<'_, R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxGuard")
            .field("scope", &self.claim.scope())
            .field("key", self.claim.key())
            .field("claim", &self.claim.number())
            .finish_non_exhaustive()
    }
}
