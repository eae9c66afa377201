//! [`TransactionalStore`] for [`SqliteStore`]: the claim as the first statement of the handler's
//! `BEGIN IMMEDIATE` transaction.
//!
//! SQLite has one writer at a time. A concurrent duplicate's `BEGIN IMMEDIATE` waits (up to the
//! busy timeout) for the claimer's transaction to end; its claim then finds the committed row
//! and claims nothing, and its next read replays. A claimer that rolls back leaves no row.

use super::super::sql::{self, CLAIM_ROUNDS, Decision};
use super::super::transactional::{TransactionalStore, TxBegin, TxGuard};
use super::super::{BoxFuture, Claim, Fingerprint, StoreError};
use super::{SqliteStore, open_transaction, read_row};
use retry_runtime::{IdempotencyKey, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{Sqlite, SqlitePool, Transaction};

/// The claim in the handler's transaction: a new row, or the takeover of a row that is free
/// (expired, or running in the lease mode with an ended lease and the same fingerprint).
const CLAIM_IN_TRANSACTION: &str = r"
INSERT INTO retry_idempotency_keys AS k
    (scope, key, fingerprint, state, claim, token, claimed_at, lease_until, completed_at,
     expires_at, response)
VALUES (?1, ?2, ?3, 'running', 1, ?4, ?5, ?5 + ?6, NULL, ?5 + ?6 + ?7, NULL)
ON CONFLICT (scope, key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    state = 'running',
    claim = k.claim + 1,
    token = excluded.token,
    claimed_at = excluded.claimed_at,
    lease_until = excluded.lease_until,
    completed_at = NULL,
    expires_at = excluded.expires_at,
    response = NULL
WHERE k.expires_at <= excluded.claimed_at
   OR (k.state = 'running' AND k.lease_until <= excluded.claimed_at
       AND k.fingerprint = excluded.fingerprint)
RETURNING claim";

const COMPLETE_IN_TRANSACTION: &str = r"
UPDATE retry_idempotency_keys
SET state = 'completed', response = ?1, completed_at = ?2, lease_until = NULL,
    expires_at = ?2 + ?3
WHERE scope = ?4 AND key = ?5 AND token = ?6";

/// The arguments of the claim.
struct TxClaim<'a> {
    scope: &'a str,
    key: &'a str,
    fingerprint: i64,
    token: i64,
    now: i64,
    lease: i64,
    ttl: i64,
}

/// Opens `BEGIN IMMEDIATE` (waiting for another writer) and claims in it: the transaction and
/// the claim number, or `None` (rolled back) when the row is not free. Retried whole: a failure
/// leaves nothing committed.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn claim_in_transaction(
    pool: &SqlitePool,
    claim: &TxClaim<'_>,
) -> Result<Option<(Transaction<'static, Sqlite>, i64)>, sqlx::Error> {
    let mut transaction = open_transaction(pool).await?;
    let number: Option<i64> = sqlx::query_scalar(CLAIM_IN_TRANSACTION)
        .bind(claim.scope)
        .bind(claim.key)
        .bind(claim.fingerprint)
        .bind(claim.token)
        .bind(claim.now)
        .bind(claim.lease)
        .bind(claim.ttl)
        .fetch_optional(&mut *transaction)
        .await?;
    match number {
        Some(number) => Ok(Some((transaction, number))),
        None => {
            transaction.rollback().await?;
            Ok(None)
        }
    }
}

impl<R> TransactionalStore<R> for SqliteStore<R>
where
    R: Serialize + DeserializeOwned + Send + 'static,
{
    type Transaction = Transaction<'static, Sqlite>;

    fn begin_in_transaction_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<TxBegin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        crate::store::metrics::begin("sqlite", async move {
            // The rule of every key, before any database work.
            crate::store::validate_key(key.as_str())?;
            let token = sql::new_token();
            let fingerprint_bits = fingerprint.as_u64() as i64;
            for _ in 0..CLAIM_ROUNDS {
                let now = self.settings.now_ms();
                // A replay, a mismatch and a running lease-mode key are answered by this read,
                // which never waits for a writer (write-ahead logging) and opens nothing.
                let found = read_row(&self.pool, scope, key.as_str())
                    .await
                    .map_err(sql::db)?;
                if let Some(found) = found.filter(|found| !found.is_free(now, fingerprint_bits)) {
                    let response = found.response.as_deref();
                    return Ok(
                        match sql::decide(fingerprint, found.fingerprint, &found.state, response)? {
                            Decision::Replay(response) => TxBegin::Replay(response),
                            Decision::InProgress => TxBegin::InProgress,
                            Decision::Mismatch => TxBegin::Mismatch,
                        },
                    );
                }
                let claim = TxClaim {
                    scope,
                    key: key.as_str(),
                    fingerprint: fingerprint_bits,
                    token,
                    // The time after the wait for the write lock would be more exact, but the
                    // row is free or not by the committed state, which the claim reads itself.
                    now,
                    lease: self.settings.lease_ms(),
                    ttl: self.settings.ttl_ms(),
                };
                if let Some((transaction, number)) = claim_in_transaction(&self.pool, &claim)
                    .await
                    .map_err(sql::db)?
                {
                    let claim = Claim::new(scope, key.clone(), number as u64, token as u64);
                    return Ok(TxBegin::Execute(TxGuard::new(self, claim, transaction)));
                }
                // Another transaction claimed the key and committed while this one waited for
                // the write lock: read what it committed.
            }
            Ok(TxBegin::InProgress)
        })
    }

    fn complete_in_transaction<'a>(
        &'a self,
        claim: &'a Claim,
        mut transaction: Self::Transaction,
        response: &'a R,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let encoded = sql::encode(response, self.settings.max_response_bytes);
        Box::pin(async move {
            let encoded = match encoded {
                Ok(encoded) => encoded,
                Err(refused) => {
                    let _ = transaction.rollback().await;
                    return Err(refused);
                }
            };
            let done = sqlx::query(COMPLETE_IN_TRANSACTION)
                .bind(encoded)
                .bind(self.settings.now_ms())
                .bind(self.settings.ttl_ms())
                .bind(claim.scope())
                .bind(claim.key().as_str())
                .bind(claim.token() as i64)
                .execute(&mut *transaction)
                .await
                .map_err(sql::db)?;
            if done.rows_affected() == 0 {
                // The handler deleted the claim's row in its own transaction.
                let _ = transaction.rollback().await;
                return Err(StoreError::Superseded {
                    claim: claim.number(),
                });
            }
            transaction.commit().await.map_err(sql::db)
        })
    }

    fn rollback_in_transaction(
        &self,
        transaction: Self::Transaction,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { transaction.rollback().await.map_err(sql::db) })
    }

    fn metrics_label(&self) -> &'static str {
        "sqlite"
    }
}
