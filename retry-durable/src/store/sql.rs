//! What the SQLite and PostgreSQL stores share: their settings, the response codec, the answer
//! for a key that was not claimed, the classification of their errors, and the retry of their
//! own statements.

use super::{
    Claim, DEFAULT_LEASE, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TTL, Fingerprint, StoreError,
};
use retry_runtime::Transient;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The schema version `migrate` brings a database to.
pub(super) const SCHEMA_VERSION: i64 = 1;

/// Rows one purge statement deletes at most, so that no statement holds the table for long.
pub(super) const PURGE_BATCH: i64 = 1000;

/// How often `begin` claims again when the row it could not claim vanished before it was read
/// (released or purged in between). After that it answers `InProgress`, which is safe.
pub(super) const CLAIM_ROUNDS: usize = 4;

/// Longer durations count as forever: about 36 million years in milliseconds, far from `i64`
/// overflow when a lease and a TTL are added to the time.
const FOREVER_MS: i64 = 1 << 60;

/// A clock the tests move by hand.
pub(super) type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// The settings of a SQL store.
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) ttl: Duration,
    pub(super) lease: Duration,
    pub(super) max_response_bytes: usize,
    pub(super) clock: Option<Clock>,
}

impl Settings {
    pub(super) fn new() -> Self {
        Settings {
            ttl: DEFAULT_TTL,
            lease: DEFAULT_LEASE,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            clock: None,
        }
    }

    /// Now, in milliseconds since the Unix epoch, from the injected clock or the system's.
    #[cfg(feature = "sqlite")]
    pub(super) fn now_ms(&self) -> i64 {
        millis(
            self.clock
                .as_ref()
                .map_or_else(SystemTime::now, |clock| clock()),
        )
    }

    /// Now from the injected clock, if there is one; `None` lets the database read its own.
    #[cfg(feature = "postgres")]
    pub(super) fn injected_now_ms(&self) -> Option<i64> {
        self.clock.as_ref().map(|clock| millis(clock()))
    }

    pub(super) fn lease_ms(&self) -> i64 {
        capped_ms(self.lease)
    }

    pub(super) fn ttl_ms(&self) -> i64 {
        capped_ms(self.ttl)
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("ttl", &self.ttl)
            .field("lease", &self.lease)
            .field("max_response_bytes", &self.max_response_bytes)
            .field(
                "clock",
                &if self.clock.is_some() {
                    "injected"
                } else {
                    "system"
                },
            )
            .finish()
    }
}

fn capped_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).map_or(FOREVER_MS, |ms| ms.min(FOREVER_MS))
}

fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, capped_ms)
}

/// A fresh claim token: random, so that it names one claim across processes and restarts.
pub(super) fn new_token() -> i64 {
    super::random_token() as i64
}

/// How a store gives back a claim whose `begin` was dropped: on the connection that ran the
/// claim statement if there is one, else on the pool.
pub(super) type GiveBack<DB> = fn(
    Option<sqlx::pool::PoolConnection<DB>>,
    sqlx::Pool<DB>,
    Claim,
) -> super::BoxFuture<'static, ()>;

/// A claim statement in flight: the connection it runs on and the claim it may write. Dropped
/// before [`settled`](InFlight::settled) (the `begin` future was cancelled, or it failed after
/// the statement may have committed), it gives the claim back in a background task that runs
/// on the same connection, after the statement, so that the release cannot overtake the claim.
/// A claim that was never written is not found by its random token: the release changes
/// nothing.
pub(super) struct InFlight<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
    connection: Option<sqlx::pool::PoolConnection<DB>>,
    claim: Option<Claim>,
    give_back: GiveBack<DB>,
}

impl<DB: sqlx::Database> InFlight<DB> {
    /// Armed for `claim` (its number is not known yet and does not matter to a release).
    pub(super) fn new(pool: &sqlx::Pool<DB>, claim: Claim, give_back: GiveBack<DB>) -> Self {
        InFlight {
            pool: pool.clone(),
            connection: None,
            claim: Some(claim),
            give_back,
        }
    }

    /// The connection the claim statement runs on, held while it runs, so that a release
    /// after a cancellation queues behind the statement.
    pub(super) async fn connection(&mut self) -> Result<&mut DB::Connection, sqlx::Error> {
        let connection = match self.connection.take() {
            Some(connection) => connection,
            None => self.pool.acquire().await?,
        };
        Ok(&mut **self.connection.insert(connection))
    }

    /// The claim statement has ended (answered or failed): its connection goes back to the
    /// pool, since nothing on it can overtake a release any more, and so that `begin`'s next
    /// round (SQLite's read) never waits for a connection its own claim holds.
    pub(super) fn statement_ended(&mut self) {
        self.connection = None;
    }

    /// `begin` has its answer: a guard holds the claim, or no claim was written.
    pub(super) fn settled(&mut self) {
        self.claim = None;
    }
}

impl<DB: sqlx::Database> Drop for InFlight<DB> {
    fn drop(&mut self) {
        // Without a runtime the lease returns the key.
        if let Some(claim) = self.claim.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn((self.give_back)(
                self.connection.take(),
                self.pool.clone(),
                claim,
            ));
        }
    }
}

/// The response as stored: its JSON, refused past `limit` bytes.
pub(super) fn encode<R: Serialize>(response: &R, limit: usize) -> Result<Vec<u8>, StoreError> {
    let bytes = serde_json::to_vec(response).map_err(|e| StoreError::Codec(Box::new(e)))?;
    if bytes.len() > limit {
        return Err(StoreError::TooLarge {
            len: bytes.len(),
            limit,
        });
    }
    Ok(bytes)
}

/// What `begin` answers for a key it did not claim.
pub(super) enum Decision<R> {
    Replay(R),
    InProgress,
    Mismatch,
}

/// The answer for a row that another claim holds or completed.
pub(super) fn decide<R: DeserializeOwned>(
    fingerprint: Fingerprint,
    stored_fingerprint: i64,
    state: &str,
    response: Option<&[u8]>,
) -> Result<Decision<R>, StoreError> {
    if stored_fingerprint != fingerprint.as_u64() as i64 {
        return Ok(Decision::Mismatch);
    }
    match (state, response) {
        ("completed", Some(bytes)) => serde_json::from_slice(bytes)
            .map(Decision::Replay)
            .map_err(|e| StoreError::Codec(Box::new(e))),
        _ => Ok(Decision::InProgress),
    }
}

/// A driver error as the store reports it: a missing table says to migrate; every other error
/// is a database error, classified.
pub(super) fn db(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(database) = &error {
        let message = database.message();
        let missing_table =
            database.code().as_deref() == Some("42P01") || message.starts_with("no such table");
        if missing_table && message.contains("retry_idempotency") {
            return StoreError::Schema(format!(
                "the idempotency store's table is missing ({message}): call `store.migrate().await` \
                 once at startup; it is idempotent and safe to run from every replica"
            ));
        }
    }
    let transient = error.is_transient();
    StoreError::Database {
        source: Box::new(error),
        transient,
    }
}

/// The classifier of the stores' own statements: what is transient, except what has already
/// waited its whole budget: a pool timeout (the pool's `acquire_timeout`) and SQLite's busy
/// (the connection's busy timeout).
pub(super) fn retry_own_statement(error: &sqlx::Error) -> bool {
    const SQLITE_BUSY: u32 = 5;
    let busy = error
        .as_database_error()
        .and_then(|e| e.code())
        .and_then(|code| code.parse::<u32>().ok())
        .is_some_and(|code| code & 0xff == SQLITE_BUSY);
    !busy && !matches!(error, sqlx::Error::PoolTimedOut) && error.is_transient()
}

/// The error for a database whose schema is newer than this library.
pub(super) fn newer_schema(found: i64) -> StoreError {
    StoreError::Schema(format!(
        "the idempotency store's schema is version {found}, newer than version {SCHEMA_VERSION} \
         that this retry-runtime knows: upgrade retry-runtime in this service, or run it \
         against another database"
    ))
}

/// The methods of `IdempotencyStore` that the two SQL stores share word for word: `transaction`,
/// `complete`, `renew`, `release`, `release_in_background` and `purge_expired`, written once.
/// Each store's module has the statements for its database under the same names
/// (`open_transaction`, `complete_statement`, `complete_row`, `holds_row`, `renew_row`,
/// `release`, `purge_batch`), and `$now` names the `Settings` method that gives its statements
/// the time: `now_ms` for SQLite, `injected_now_ms` for PostgreSQL (the server's clock unless a
/// test injects one).
macro_rules! shared_methods {
    ($now:ident) => {
        fn transaction<'a>(
            &'a self,
            _: &'a Claim,
        ) -> BoxFuture<'a, Result<Self::Transaction, StoreError>> {
            Box::pin(async move { open_transaction(&self.pool).await.map_err(sql::db) })
        }

        fn complete<'a>(
            &'a self,
            claim: &'a Claim,
            transaction: Option<Self::Transaction>,
            response: &'a R,
        ) -> BoxFuture<'a, Result<(), StoreError>> {
            let encoded = sql::encode(response, self.settings.max_response_bytes);
            Box::pin(async move {
                let encoded = match encoded {
                    Ok(encoded) => encoded,
                    Err(refused) => {
                        // A claim taken over meanwhile has nothing to release: the size is
                        // still the answer.
                        match release(&self.pool, claim, transaction).await {
                            Ok(()) | Err(StoreError::Superseded { .. }) => {}
                            Err(e) => return Err(e),
                        }
                        return Err(refused);
                    }
                };
                let (now, ttl) = (self.settings.$now(), self.settings.ttl_ms());
                let superseded = StoreError::Superseded {
                    claim: claim.number(),
                };
                let failed = match transaction {
                    Some(mut transaction) => {
                        match complete_statement(claim, encoded, now, ttl)
                            .execute(&mut *transaction)
                            .await
                        {
                            Ok(done) if done.rows_affected() == 0 => {
                                let _ = transaction.rollback().await;
                                return Err(superseded);
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
                    None => match complete_row(&self.pool, claim, &encoded, now, ttl).await {
                        Ok(0) => return Err(superseded),
                        Ok(_) => return Ok(()),
                        Err(e) => e,
                    },
                };
                // At repeatable read or serializable, a transaction that read the row before a
                // takeover changed it fails with a serialization failure (40001) instead of
                // finding no row: a fresh read tells a takeover from a passing failure, so that
                // a stale holder is told `Superseded`, never to retry.
                match holds_row(&self.pool, claim).await {
                    Ok(false) => Err(superseded),
                    Ok(true) | Err(_) => Err(sql::db(failed)),
                }
            })
        }

        fn renew<'a>(&'a self, claim: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
            Box::pin(async move {
                let settings = &self.settings;
                let now = settings.$now();
                match renew_row(
                    &self.pool,
                    claim,
                    now,
                    settings.lease_ms(),
                    settings.ttl_ms(),
                )
                .await
                {
                    Ok(0) => Err(StoreError::Superseded {
                        claim: claim.number(),
                    }),
                    Ok(_) => Ok(()),
                    Err(e) => Err(sql::db(e)),
                }
            })
        }

        fn release<'a>(
            &'a self,
            claim: &'a Claim,
            transaction: Option<Self::Transaction>,
        ) -> BoxFuture<'a, Result<(), StoreError>> {
            Box::pin(release(&self.pool, claim, transaction))
        }

        fn release_in_background(&self, claim: Claim, transaction: Option<Self::Transaction>) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let pool = self.pool.clone();
                // Nobody waits for the answer: a claim taken over meanwhile changes nothing.
                runtime.spawn(async move { release(&pool, &claim, transaction).await });
            }
            // Without a runtime the transaction's drop rolls it back and the lease returns the key.
        }

        fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
            Box::pin(async move {
                let now = self.settings.$now();
                let mut purged = 0;
                loop {
                    let batch = purge_batch(&self.pool, now).await.map_err(sql::db)?;
                    purged += batch;
                    if batch < PURGE_BATCH as u64 {
                        return Ok(purged);
                    }
                }
            })
        }
    };
}
pub(super) use shared_methods;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_capped_far_from_overflow() {
        assert_eq!(capped_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(capped_ms(Duration::MAX), FOREVER_MS);
        assert!(
            FOREVER_MS.checked_mul(3).is_some(),
            "now + lease + ttl fits"
        );
        assert_eq!(millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

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
        let answer = decide::<u32>(fingerprint, stored, "completed", Some(b"\"text\""));
        assert!(matches!(answer, Err(StoreError::Codec(_))));
        let answer = decide::<u32>(fingerprint, stored, "completed", Some(b"7"));
        assert!(matches!(answer, Ok(Decision::Replay(7))));
        let answer = decide::<u32>(fingerprint, stored + 1, "completed", Some(b"7"));
        assert!(matches!(answer, Ok(Decision::Mismatch)));
        let answer = decide::<u32>(fingerprint, stored, "running", None);
        assert!(matches!(answer, Ok(Decision::InProgress)));
    }
}
