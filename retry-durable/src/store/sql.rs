//! [`SqlStore`]: the SQL stores, written once over a [`Backend`] (`sqlx::Sqlite` for
//! `SqliteStore`, `sqlx::Postgres` for `PostgresStore`), with both modes ([`Mode`]).

use super::{
    Begin, BoxFuture, Claim, Fingerprint, Guard, IdempotencyStore, Mode, StoreError, StoreOptions,
};
use crate::sql::sealed::Engine;
use crate::sql::{
    self, Backend, ClaimRow, Claimed, InFlight, MigrateError, Run, STORE_SCHEMA, Taken,
};
use retry_runtime::{IdempotencyKey, Transient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::SystemTime;

/// Rows one purge statement deletes at most, so that no statement holds the table for long.
const PURGE_BATCH: i64 = 1000;

/// How often `begin` claims again when the row it could not claim vanished before it was read
/// (released or purged in between), or was claimed by a transaction it waited for. After that it
/// answers `InProgress`, which is safe.
const CLAIM_ROUNDS: usize = 4;

/// The statements of engine `B`.
type RunOn<B> = <B as Engine>::Run;

/// An [`IdempotencyStore`] in a SQL database, in both modes ([`Mode`]): the one implementation
/// behind [`SqliteStore`](super::SqliteStore) (`SqlStore<sqlx::Sqlite, R>`) and
/// [`PostgresStore`](super::PostgresStore) (`SqlStore<sqlx::Postgres, R>`), whose pages say
/// what each engine does. `R` is the stored response.
pub struct SqlStore<B: Backend, R> {
    pool: sqlx::Pool<B>,
    options: StoreOptions,
    clock: Option<Arc<dyn Fn() -> SystemTime + Send + Sync>>,
    response: PhantomData<fn() -> R>,
}

impl<B: Backend, R> SqlStore<B, R> {
    /// A store on `pool` with the default [`StoreOptions`].
    pub(crate) fn on(pool: sqlx::Pool<B>) -> Self {
        SqlStore {
            pool,
            options: StoreOptions::new(),
            clock: None,
            response: PhantomData,
        }
    }

    /// The same store with `options`: the TTL of stored responses, the lease of the lease mode,
    /// the longest response stored.
    #[must_use]
    pub fn with_options(mut self, options: StoreOptions) -> Self {
        self.options = options;
        self
    }

    /// The store's settings.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// Reads the time from `clock` instead of the database's clock: for tests that move time
    /// by hand, so that a lease or a TTL ends without waiting for it. Every process and replica
    /// must use the same clock.
    pub fn with_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The pool the store runs on, for the service's own tables.
    pub fn pool(&self) -> &sqlx::Pool<B> {
        &self.pool
    }

    /// The same store (the same pool and settings) for another response type, for a second
    /// route whose responses differ.
    pub fn with_response<S>(&self) -> SqlStore<B, S> {
        SqlStore {
            pool: self.pool.clone(),
            options: self.options,
            clock: self.clock.clone(),
            response: PhantomData,
        }
    }

    /// Creates the store's tables and indexes, or brings them to this version, in one
    /// transaction that waits for any other migration of them.
    pub(crate) async fn migrate_schema(&self) -> Result<(), StoreError> {
        RunOn::<B>::migrate(&self.pool, B::DIALECT, &STORE_SCHEMA)
            .await
            .map_err(|e| match e {
                MigrateError::Database(e) => db(e),
                MigrateError::Newer(message) => StoreError::Schema(message),
            })
    }

    /// Now from the injected clock, if there is one; `None` lets the database read its own.
    fn now(&self) -> Option<i64> {
        self.clock.as_ref().map(|clock| sql::millis(clock()))
    }

    /// A claim's arguments. A claim of the one-commit mode has no lease: the row it writes
    /// expires a TTL from now, as the completion in the same transaction will leave it.
    fn row<'a>(
        &self,
        mode: Mode,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
        token: i64,
    ) -> ClaimRow<'a> {
        let lease = match mode {
            Mode::Lease => sql::capped_ms(self.options.lease),
            Mode::OneCommit => 0,
        };
        ClaimRow {
            scope,
            key: key.as_str(),
            fingerprint: fingerprint.as_u64() as i64,
            token,
            now: self.now(),
            lease,
            ttl: sql::capped_ms(self.options.ttl),
        }
    }

    /// Rolls `transaction` back (if any) and deletes the claim's running row, or refuses with
    /// `Superseded` when the claim no longer holds the key (the rollback happens all the same).
    async fn release_claim(
        &self,
        claim: &Claim,
        transaction: Option<sqlx::Transaction<'static, B>>,
    ) -> Result<(), StoreError> {
        if let Some(transaction) = transaction {
            // A failed rollback leaves nothing to undo: the database rolls back the
            // transaction of a connection that broke or closed.
            let _ = transaction.rollback().await;
        }
        if claim.mode() == Mode::OneCommit {
            // The claim was in the transaction: rolled back with it.
            return Ok(());
        }
        match RunOn::<B>::release(&self.pool, B::statements(), claim).await {
            Ok(0) => Err(superseded(claim)),
            Ok(_) => Ok(()),
            Err(e) => Err(db(e)),
        }
    }
}

impl<B: Backend, R> Clone for SqlStore<B, R> {
    fn clone(&self) -> Self {
        self.with_response()
    }
}

impl<B: Backend, R> fmt::Debug for SqlStore<B, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(B::STORE)
            .field("ttl", &self.options.ttl)
            .field("lease", &self.options.lease)
            .field("max_response_bytes", &self.options.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// The lease mode's claim commits on its own (see each engine's page for its statements). The
/// one-commit mode's claim is the first statement of the handler's transaction: a concurrent
/// duplicate's claim waits for the claimer's transaction (PostgreSQL's `INSERT … ON CONFLICT`
/// blocks on the claimer's uncommitted row, SQLite's `BEGIN IMMEDIATE` on its write lock, up to
/// the busy timeout). When the claimer commits, the duplicate's claim finds the committed row and
/// claims nothing, and its next read (a new statement, so a new snapshot) replays it; when the
/// claimer rolls back, the duplicate claims. At repeatable read or serializable PostgreSQL's
/// blocked claim fails with a serialization failure instead; the claim is retried whole, and
/// then reads the committed row.
impl<B, R> IdempotencyStore<R> for SqlStore<B, R>
where
    B: Backend,
    R: Serialize + DeserializeOwned + Send + 'static,
{
    type Transaction = sqlx::Transaction<'static, B>;

    fn metrics_label(&self) -> &'static str {
        B::LABEL
    }

    fn begin_with<'s, 'a>(
        &'s self,
        mode: Mode,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        super::metrics::begin(B::LABEL, async move {
            // The rule of every key, before any database work.
            super::validate_key(key.as_str())?;
            match mode {
                Mode::Lease => self.claim_leased(scope, key, fingerprint).await,
                Mode::OneCommit => self.claim_in_transaction(scope, key, fingerprint).await,
            }
        })
    }

    fn transaction<'a>(
        &'a self,
        _: &'a Claim,
    ) -> BoxFuture<'a, Result<Self::Transaction, StoreError>> {
        Box::pin(async move { RunOn::<B>::begin(&self.pool, B::DIALECT).await.map_err(db) })
    }

    fn complete<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
        response: &'a R,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let encoded = encode(response, self.options.max_response_bytes);
        Box::pin(async move {
            let encoded = match encoded {
                Ok(encoded) => encoded,
                Err(refused) => {
                    // A claim taken over meanwhile has nothing to release: the size is still
                    // the answer.
                    match self.release_claim(claim, transaction).await {
                        Ok(()) | Err(StoreError::Superseded { .. }) => {}
                        Err(e) => return Err(e),
                    }
                    return Err(refused);
                }
            };
            let (sql, now, ttl) = (B::statements(), self.now(), self.ttl_ms());
            let failed = match transaction {
                Some(mut transaction) => {
                    match RunOn::<B>::complete_in(&mut transaction, sql, claim, encoded, now, ttl)
                        .await
                    {
                        Ok(0) => {
                            // Taken over (the lease mode), or the handler deleted the claim's
                            // row in its own transaction (the one-commit mode).
                            let _ = transaction.rollback().await;
                            return Err(superseded(claim));
                        }
                        Ok(_) => match transaction.commit().await {
                            Ok(()) => return Ok(()),
                            Err(e) => e,
                        },
                        Err(e) => {
                            let _ = transaction.rollback().await;
                            e
                        }
                    }
                }
                None => {
                    match RunOn::<B>::complete(&self.pool, sql, claim, &encoded, now, ttl).await {
                        Ok(0) => return Err(superseded(claim)),
                        Ok(_) => return Ok(()),
                        Err(e) => e,
                    }
                }
            };
            if claim.mode() == Mode::OneCommit {
                // The claim was in the failed transaction: nobody else can hold it, and if the
                // commit did not happen, nothing did.
                return Err(db(failed));
            }
            // At repeatable read or serializable, a transaction that read the row before a
            // takeover changed it fails with a serialization failure (40001) instead of finding
            // no row: a fresh read tells a takeover from a passing failure, so that a stale
            // holder is told `Superseded`, never to retry.
            match RunOn::<B>::holds(&self.pool, sql, claim).await {
                Ok(false) => Err(superseded(claim)),
                Ok(true) | Err(_) => Err(db(failed)),
            }
        })
    }

    fn renew<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let lease = sql::capped_ms(self.options.lease);
            let (sql, now, ttl) = (B::statements(), self.now(), self.ttl_ms());
            match RunOn::<B>::renew(&self.pool, sql, claim, now, lease, ttl).await {
                Ok(0) => Err(superseded(claim)),
                Ok(_) => Ok(()),
                Err(e) => Err(db(e)),
            }
        })
    }

    fn release<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.release_claim(claim, transaction))
    }

    fn release_in_background(&self, claim: Claim, transaction: Option<Self::Transaction>) {
        if claim.mode() == Mode::OneCommit {
            // The claim is in the transaction: dropping it rolls both back (sqlx queues the
            // `ROLLBACK` and the pool runs it before the connection is used again).
            drop(transaction);
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = self.with_response::<()>();
            // Nobody waits for the answer: a claim taken over meanwhile changes nothing.
            runtime.spawn(async move { store.release_claim(&claim, transaction).await });
        }
        // Without a runtime the transaction's drop rolls it back and the lease returns the key.
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let now = self.now();
            let mut purged = 0;
            loop {
                let batch = RunOn::<B>::purge(&self.pool, B::statements(), now, PURGE_BATCH)
                    .await
                    .map_err(db)?;
                purged += batch;
                if batch < PURGE_BATCH as u64 {
                    return Ok(purged);
                }
            }
        })
    }
}

impl<B, R> SqlStore<B, R>
where
    B: Backend,
    R: Serialize + DeserializeOwned + Send + 'static,
{
    /// The lease mode's `begin`: the claim commits on its own statement.
    async fn claim_leased<'s>(
        &'s self,
        scope: &str,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> Result<Begin<'s, R, sqlx::Transaction<'static, B>>, StoreError> {
        let token = sql::new_token();
        let claim = Claim::new(scope, key.clone(), 0, token as u64);
        let mut in_flight = InFlight::new::<RunOn<B>>(&self.pool, B::statements(), claim);
        for _ in 0..CLAIM_ROUNDS {
            let row = self.row(Mode::Lease, scope, key, fingerprint, token);
            // An error leaves `in_flight` armed: the claim may have committed before the
            // connection broke, and the drop gives it back.
            match RunOn::<B>::claim(&mut in_flight, B::statements(), &row)
                .await
                .map_err(db)?
            {
                Claimed::Mine(number) => {
                    in_flight.settled();
                    let claim = Claim::new(scope, key.clone(), number as u64, token as u64);
                    return Ok(Begin::Execute(Guard::new(self, claim)));
                }
                Claimed::Other(taken) => {
                    in_flight.settled();
                    return decide(fingerprint, taken);
                }
                // Claimed by another request after this statement's snapshot (the snapshot had
                // no row, or a free one), or released in between: claim again, with a new
                // snapshot that sees the winner.
                Claimed::Unseen => {}
            }
        }
        in_flight.settled();
        // Every round found the key claimed by a request it could not see yet: it is running.
        Ok(Begin::InProgress)
    }

    /// The one-commit mode's `begin`: the claim is the first statement of a transaction that
    /// the guard holds.
    async fn claim_in_transaction<'s>(
        &'s self,
        scope: &str,
        key: &IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> Result<Begin<'s, R, sqlx::Transaction<'static, B>>, StoreError> {
        let (token, sql) = (sql::new_token(), B::statements());
        for _ in 0..CLAIM_ROUNDS {
            let row = self.row(Mode::OneCommit, scope, key, fingerprint, token);
            match RunOn::<B>::claim_in_transaction(&self.pool, B::DIALECT, sql, &row)
                .await
                .map_err(db)?
            {
                Claimed::Mine((transaction, number)) => {
                    let claim = Claim::new(scope, key.clone(), number as u64, token as u64)
                        .in_mode(Mode::OneCommit);
                    return Ok(Begin::Execute(Guard::in_transaction(
                        self,
                        claim,
                        transaction,
                    )));
                }
                // A replay, a mismatch or a key running in the lease mode: answered from the
                // row, with no transaction left open.
                Claimed::Other(taken) => return decide(fingerprint, taken),
                // Another transaction claimed the key and committed while this claim waited
                // for it, after the read: read what it committed.
                Claimed::Unseen => {}
            }
        }
        // Four rounds, each losing to a transaction that committed a claim it could not read
        // yet: the key is busy, and a 409 sends the client back later.
        Ok(Begin::InProgress)
    }

    fn ttl_ms(&self) -> i64 {
        sql::capped_ms(self.options.ttl)
    }
}

fn superseded(claim: &Claim) -> StoreError {
    StoreError::Superseded {
        claim: claim.number(),
    }
}

/// The response as stored: its JSON, refused past `limit` bytes.
fn encode<R: Serialize>(response: &R, limit: usize) -> Result<Vec<u8>, StoreError> {
    let bytes = serde_json::to_vec(response).map_err(|e| StoreError::Codec(Box::new(e)))?;
    if bytes.len() > limit {
        return Err(StoreError::TooLarge {
            len: bytes.len(),
            limit,
        });
    }
    Ok(bytes)
}

/// The answer for a row that another claim holds or completed: a replay of the stored
/// response, in progress, a mismatch.
fn decide<'s, R: DeserializeOwned, T: Send>(
    fingerprint: Fingerprint,
    (stored_fingerprint, state, response): Taken,
) -> Result<Begin<'s, R, T>, StoreError> {
    if stored_fingerprint != fingerprint.as_u64() as i64 {
        return Ok(Begin::Mismatch);
    }
    match (state.as_str(), response) {
        ("completed", Some(bytes)) => serde_json::from_slice(&bytes)
            .map(Begin::Replay)
            .map_err(|e| StoreError::Codec(Box::new(e))),
        _ => Ok(Begin::InProgress),
    }
}

/// A driver error as the store reports it: a missing table says to migrate; every other error
/// is a database error, classified.
pub(super) fn db(error: sqlx::Error) -> StoreError {
    if sql::missing_table(&error, STORE_SCHEMA.table) {
        return StoreError::Schema(format!(
            "the idempotency store's table is missing ({error}): call `store.migrate().await` \
             once at startup; it is idempotent and safe to run from every replica"
        ));
    }
    let transient = error.is_transient();
    StoreError::Database {
        source: Box::new(error),
        transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_past_the_limit_are_refused() {
        let text = "x".repeat(10);
        assert_eq!(encode(&text, 12).unwrap(), b"\"xxxxxxxxxx\"");
        assert!(matches!(
            encode(&text, 11),
            Err(StoreError::TooLarge { len: 12, limit: 11 })
        ));
    }

    #[test]
    fn a_stored_response_of_another_shape_is_a_codec_error() {
        let fingerprint = Fingerprint::of(b"pay");
        let stored = fingerprint.as_u64() as i64;
        let completed = |bytes: &[u8]| (stored, "completed".to_owned(), Some(bytes.to_vec()));
        let answer = decide::<u32, ()>(fingerprint, completed(b"\"text\""));
        assert!(matches!(answer, Err(StoreError::Codec(_))));
        let answer = decide::<u32, ()>(fingerprint, completed(b"7"));
        assert_eq!(answer.unwrap(), Begin::Replay(7));
        let answer = decide::<u32, ()>(fingerprint, (stored + 1, "completed".to_owned(), None));
        assert_eq!(answer.unwrap(), Begin::Mismatch);
        let answer = decide::<u32, ()>(fingerprint, (stored, "running".to_owned(), None));
        assert_eq!(answer.unwrap(), Begin::InProgress);
    }

    /// The claim statement of a `begin` whose answer was lost (the connection broke after the
    /// commit) runs again with the same token: the key is still its own, not another's.
    async fn a_claim_retried_with_its_token_is_recognised_as_its_own<B: Backend>(
        pool: sqlx::Pool<B>,
    ) {
        let store = SqlStore::<B, ()>::on(pool);
        store.migrate_schema().await.unwrap();
        let row = ClaimRow {
            scope: "",
            key: "k",
            fingerprint: 7,
            token: 42,
            now: Some(1_000),
            lease: 60_000,
            ttl: 86_400_000,
        };
        let claim_once = async |row: &ClaimRow<'_>| {
            let claim = Claim::new("", IdempotencyKey::from("k"), 0, row.token as u64);
            let mut in_flight = InFlight::new::<RunOn<B>>(store.pool(), B::statements(), claim);
            let claimed = RunOn::<B>::claim(&mut in_flight, B::statements(), row)
                .await
                .unwrap();
            in_flight.settled();
            claimed
        };
        assert!(matches!(claim_once(&row).await, Claimed::Mine(1)));
        // The answer to the first statement was lost: the same statement again is still ours.
        assert!(matches!(claim_once(&row).await, Claimed::Mine(1)));
        // Another request's token does not get it: it finds the row running.
        let other = ClaimRow { token: 43, ..row };
        let claimed = claim_once(&other).await;
        assert!(matches!(claimed, Claimed::Other((7, ref state, None)) if state == "running"));
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_sqlite_claim_retried_with_its_token_is_recognised_as_its_own() {
        let dir = std::env::temp_dir().join(format!("retry-claim-{}", IdempotencyKey::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let pool = super::super::SqliteStore::<()>::open(dir.join("store.db"))
            .await
            .unwrap()
            .pool()
            .clone();
        a_claim_retried_with_its_token_is_recognised_as_its_own(pool).await;
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(feature = "postgres")]
    #[tokio::test]
    async fn a_postgres_claim_retried_with_its_token_is_recognised_as_its_own() {
        let Some(pool) = fresh_schema("a_postgres_claim_retried_with_its_token").await else {
            return;
        };
        a_claim_retried_with_its_token_is_recognised_as_its_own(pool).await;
    }

    /// A pool on a fresh schema of the server in `RETRY_TEST_POSTGRES_URL` (`.ci/postgres.sh`),
    /// or `None` after saying how to run the test (a failure when `CI` is set).
    #[cfg(feature = "postgres")]
    pub(crate) async fn fresh_schema(test: &str) -> Option<sqlx::PgPool> {
        use std::io::Write;
        let Ok(url) = std::env::var("RETRY_TEST_POSTGRES_URL") else {
            let message = format!(
                "{test} needs PostgreSQL: run it with \
                 `.ci/postgres.sh run cargo test -p retry-durable --lib {test}`"
            );
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set, so a skip is a failure: {message}"
            );
            let _ = writeln!(std::io::stderr(), "skipped: {message}");
            return None;
        };
        let schema = format!("unit_{}", IdempotencyKey::new().as_str().replace('-', ""));
        let admin = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .unwrap();
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        Some(sqlx::PgPool::connect_lazy_with(
            options.options([("search_path", schema.as_str())]),
        ))
    }
}
