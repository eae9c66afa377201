//! [`TransactionalStore`] for [`PostgresStore`]: the claim as the first statement of the
//! handler's transaction.
//!
//! A concurrent duplicate's `INSERT … ON CONFLICT` blocks on the claimer's uncommitted row. When
//! the claimer commits, the duplicate's `DO UPDATE … WHERE <free>` is checked against the
//! committed row, claims nothing, and the duplicate's next read (a new statement, so under read
//! committed a new snapshot) replays it. When the claimer rolls back, the duplicate's insert goes
//! through and it executes. At repeatable read or serializable the blocked insert fails with a
//! serialization failure instead; the claim is retried whole, and then reads the committed row.

use super::super::sql::{self, CLAIM_ROUNDS, Decision};
use super::super::transactional::{TransactionalStore, TxBegin, TxGuard};
use super::super::{BoxFuture, Claim, Fingerprint, StoreError};
use super::PostgresStore;
use retry_runtime::{IdempotencyKey, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{PgPool, Postgres, Row, Transaction};

/// The key's row, and whether a claim may take it (its TTL has passed, or it runs in the lease
/// mode with an ended lease and the same fingerprint), by the database's clock.
const READ: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$3"),
    r" AS ms)
SELECT fingerprint, state, response,
       expires_at <= now.ms
       OR (state = 'running' AND lease_until <= now.ms AND fingerprint = $4) AS free
FROM retry_idempotency_keys, now
WHERE scope = $1 AND key = $2"
);

/// The claim in the handler's transaction: a new row, or the takeover of a free row.
const CLAIM_IN_TRANSACTION: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$5"),
    r" AS ms)
INSERT INTO retry_idempotency_keys AS k
    (scope, key, fingerprint, state, claim, token, claimed_at, lease_until, completed_at,
     expires_at, response)
SELECT $1, $2, $3, 'running', 1, $4, now.ms, now.ms + $6, NULL, now.ms + $6 + $7, NULL
FROM now
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
RETURNING k.claim"
);

const COMPLETE_IN_TRANSACTION: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$2"),
    r" AS ms)
UPDATE retry_idempotency_keys
SET state = 'completed', response = $1, completed_at = now.ms, lease_until = NULL,
    expires_at = now.ms + $3
FROM now
WHERE scope = $4 AND key = $5 AND token = $6"
);

/// The arguments of the claim.
struct TxClaim<'a> {
    scope: &'a str,
    key: &'a str,
    fingerprint: i64,
    token: i64,
    now: Option<i64>,
    lease: i64,
    ttl: i64,
}

/// The key's row: `None` when it is missing or free, else its fingerprint, state and response.
type Taken = Option<(i64, String, Option<Vec<u8>>)>;

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn read_taken(
    pool: &PgPool,
    scope: &str,
    key: &str,
    now: Option<i64>,
    fingerprint: i64,
) -> Result<Taken, sqlx::Error> {
    let row = sqlx::query(READ)
        .bind(scope)
        .bind(key)
        .bind(now)
        .bind(fingerprint)
        .fetch_optional(pool)
        .await?;
    match row {
        Some(row) if !row.try_get::<bool, _>(3)? => {
            Ok(Some((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        }
        _ => Ok(None),
    }
}

/// Opens a transaction and claims in it: the transaction and the claim number, or `None`
/// (rolled back) when the row is not free. Retried whole, also after a serialization failure:
/// a failure leaves nothing committed.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn claim_in_transaction(
    pool: &PgPool,
    claim: &TxClaim<'_>,
) -> Result<Option<(Transaction<'static, Postgres>, i64)>, sqlx::Error> {
    let mut transaction = pool.begin().await?;
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

impl<R> TransactionalStore<R> for PostgresStore<R>
where
    R: Serialize + DeserializeOwned + Send + 'static,
{
    type Transaction = Transaction<'static, Postgres>;

    fn begin_in_transaction_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<TxBegin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        crate::store::metrics::begin("postgres", async move {
            // The rule of every key, before any database work.
            crate::store::validate_key(key.as_str())?;
            let token = sql::new_token();
            let fingerprint_bits = fingerprint.as_u64() as i64;
            for _ in 0..CLAIM_ROUNDS {
                let now = self.settings.injected_now_ms();
                // A replay, a mismatch and a running lease-mode key are answered by this read,
                // one round trip that opens no transaction. Each round is a new statement, so it
                // sees what a transaction it waited for committed.
                let taken = read_taken(&self.pool, scope, key.as_str(), now, fingerprint_bits)
                    .await
                    .map_err(sql::db)?;
                if let Some((stored, state, response)) = taken {
                    return Ok(
                        match sql::decide(fingerprint, stored, &state, response.as_deref())? {
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
                    now: self.settings.injected_now_ms(),
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
                // Another transaction claimed the key and committed while this claim waited on
                // its row: read what it committed.
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
                .bind(self.settings.injected_now_ms())
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
        "postgres"
    }
}
