//! The `metrics` feature's instruments (`docs/metrics.md`), read back from a real recorder
//! (metrics-util's `DebuggingRecorder`, set for the test's thread alone, so that tests running
//! in parallel do not count into each other), on SQLite and on PostgreSQL: each answer of a
//! store's `begin` counted once under its own label, errors by kind, the queue's depth and the
//! age of its oldest due job, each attempt the worker recorded, the dead letters. No label
//! carries a key, a queue's job or an error's message.

use crate::common::{Database, Engine};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use retry_durable::queue::{Job, Outcome, Queue, QueueStats, Worker};
use retry_durable::store::{
    Backend, Begin, Fingerprint, IdempotencyStore, Mode, PostgresStore, SqliteStore, StoreError,
};
use retry_runtime::{IdempotencyKey, Policy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

/// Runs `test` on a current-thread runtime with a recorder of its own, and returns what the
/// recorder holds afterwards: every series by kind, name and labels.
fn recorded<F: Future<Output = ()>>(test: impl FnOnce() -> F) -> Series {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(test());
    });
    Series::of(&snapshotter)
}

/// The recorded series: `kind name{label="value",...}` to its value (a counter's count, a
/// gauge's last value, a histogram's number of samples).
struct Series(BTreeMap<String, f64>);

impl Series {
    fn of(snapshotter: &Snapshotter) -> Self {
        let mut series = BTreeMap::new();
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let value = match value {
                DebugValue::Counter(count) => count as f64,
                DebugValue::Gauge(value) => value.0,
                // The runtime's, when its feature is on too (the stores' own statements retry).
                DebugValue::Histogram(samples) => samples.len() as f64,
            };
            series.insert(name(&key), value);
        }
        Series(series)
    }

    fn get(&self, series: &str) -> Option<f64> {
        self.0.get(series).copied()
    }

    /// The series whose name starts with `prefix`, as `name{labels} = value` lines.
    fn named(&self, prefix: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(name, _)| name.starts_with(prefix))
            .map(|(name, value)| format!("{name} = {value}"))
            .collect()
    }
}

fn name(key: &CompositeKey) -> String {
    let kind = match key.kind() {
        MetricKind::Counter => "counter",
        MetricKind::Gauge => "gauge",
        MetricKind::Histogram => "histogram",
    };
    let mut labels: Vec<String> = key
        .key()
        .labels()
        .map(|label| format!("{}=\"{}\"", label.key(), label.value()))
        .collect();
    labels.sort();
    format!("{kind} {}{{{}}}", key.key().name(), labels.join(","))
}

#[test]
fn begins_are_counted_by_answer_and_errors_by_kind_on_sqlite() {
    store_counts(Engine::Sqlite);
}

#[test]
fn begins_are_counted_by_answer_and_errors_by_kind_on_postgres() {
    store_counts(Engine::Postgres);
}

fn store_counts(engine: Engine) {
    let label = match engine {
        Engine::Sqlite => "sqlite",
        Engine::Postgres => "postgres",
    };
    let mut ran = false;
    let done = &mut ran;
    let series = recorded(|| async move {
        let test = format!("store_metrics_{label}");
        let Some(database) = Database::fresh(engine, &test).await else {
            return;
        };
        match engine {
            Engine::Sqlite => {
                let store = SqliteStore::<String>::open(&database.url)
                    .await
                    .expect("the SQLite store opens");
                store.migrate().await.expect("the store's table");
                every_answer(&store).await;
                store.pool().close().await;
                let closed = store
                    .begin(&IdempotencyKey::new(), Fingerprint::of(b"x"))
                    .await;
                assert!(matches!(closed, Err(StoreError::Database { .. })));
            }
            Engine::Postgres => {
                let pool = sqlx::PgPool::connect(&database.url)
                    .await
                    .expect("the test server");
                let store = PostgresStore::<String>::new(pool);
                store.migrate().await.expect("the store's table");
                every_answer(&store).await;
                store.pool().close().await;
                let closed = store
                    .begin(&IdempotencyKey::new(), Fingerprint::of(b"x"))
                    .await;
                assert!(matches!(closed, Err(StoreError::Database { .. })));
            }
        }
        *done = true;
    });
    if !ran {
        return; // skipped: no PostgreSQL server
    }
    let begins = |answer: &str| {
        series.get(&format!(
            "counter retry_store_begins_total{{answer=\"{answer}\",store=\"{label}\"}}"
        ))
    };
    // Two keys executed (one in each mode), each replayed once after; one repeat while the
    // first ran; one key reused for another payload.
    assert_eq!(begins("execute"), Some(2.0));
    assert_eq!(begins("replay"), Some(2.0));
    assert_eq!(begins("in_progress"), Some(1.0));
    assert_eq!(begins("mismatch"), Some(1.0));
    let errors = |kind: &str| {
        series.get(&format!(
            "counter retry_store_errors_total{{kind=\"{kind}\",store=\"{label}\"}}"
        ))
    };
    assert_eq!(errors("invalid_key"), Some(1.0));
    assert_eq!(errors("database"), Some(1.0));
    // Nothing else: no other label, no key in a label.
    assert_eq!(
        series.named("counter retry_store").len(),
        6,
        "{:#?}",
        series.0
    );
}

/// Every answer of `begin` and of `begin_with(Mode::OneCommit, ..)`, and an invalid key.
async fn every_answer<S: IdempotencyStore<String>>(store: &S) {
    let key = IdempotencyKey::new();
    let payload = Fingerprint::of(b"claim 4711, EUR 1,250.00");
    let Ok(Begin::Execute(guard)) = store.begin(&key, payload).await else {
        panic!("a new key executes");
    };
    assert_eq!(
        store.begin(&key, payload).await.expect("an answer"),
        Begin::InProgress
    );
    guard
        .complete(&"receipt P-1".to_owned())
        .await
        .expect("completed");
    assert_eq!(
        store.begin(&key, payload).await.expect("an answer"),
        Begin::Replay("receipt P-1".to_owned())
    );
    let other = Fingerprint::of(b"claim 4711, EUR 9,900.00");
    assert_eq!(
        store.begin(&key, other).await.expect("an answer"),
        Begin::Mismatch
    );
    let invalid = IdempotencyKey::from("");
    assert!(matches!(
        store.begin(&invalid, payload).await,
        Err(StoreError::InvalidKey)
    ));

    let key = IdempotencyKey::new();
    let Ok(Begin::Execute(guard)) = store.begin_with(Mode::OneCommit, "", &key, payload).await
    else {
        panic!("a new key executes in a transaction");
    };
    guard
        .complete(&"receipt P-2".to_owned())
        .await
        .expect("committed");
    assert_eq!(
        store
            .begin_with(Mode::OneCommit, "", &key, payload)
            .await
            .expect("an answer"),
        Begin::Replay("receipt P-2".to_owned())
    );
}

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Check {
    Passes,
    FailsForGood,
    KeepsFailing,
}

#[test]
fn the_queue_counts_its_depth_attempts_and_dead_letters_on_sqlite() {
    queue_counts(Engine::Sqlite);
}

#[test]
fn the_queue_counts_its_depth_attempts_and_dead_letters_on_postgres() {
    queue_counts(Engine::Postgres);
}

fn queue_counts(engine: Engine) {
    match engine {
        Engine::Sqlite => queue_counts_on::<sqlx::Sqlite>(engine),
        Engine::Postgres => queue_counts_on::<sqlx::Postgres>(engine),
    }
}

fn queue_counts_on<B: Backend>(engine: Engine) {
    let name = format!("metrics-{engine:?}").to_lowercase();
    let mut ran = false;
    let (done, name_of) = (&mut ran, &name);
    let series = recorded(|| async move {
        let name = name_of;
        let Some(database) = Database::fresh(engine, name).await else {
            return;
        };
        let queue = Queue::<B>::open(&database.url, name)
            .await
            .expect("the queue opens")
            .with_max_attempts(2);
        assert_eq!(
            queue.observe().await.expect("the stats"),
            QueueStats::default()
        );
        for (key, check) in [
            ("claim-4714", Check::Passes),
            ("claim-4791", Check::FailsForGood),
            ("claim-4715", Check::KeepsFailing),
        ] {
            queue.enqueue(key, &check).await.expect("enqueued");
        }
        let stats = queue.observe().await.expect("the stats");
        assert_eq!(stats.depth, 3);
        let drained = Worker::new("metrics-test")
            .per_second(f64::INFINITY)
            .poll(Duration::from_millis(10))
            .backoff(Policy::new().base(Duration::from_millis(10)))
            .until_empty()
            .run(&queue, |job: Job<Check>| async move {
                match job.payload {
                    Check::Passes => Outcome::Done("covered"),
                    Check::FailsForGood => Outcome::Dead("no claim 4791 on record".to_owned()),
                    Check::KeepsFailing => Outcome::RetryLater("overloaded".to_owned()),
                }
            })
            .await
            .expect("drained");
        assert_eq!((drained.done, drained.retried, drained.dead), (1, 1, 2));
        *done = true;
    });
    if !ran {
        return;
    }
    let queue = format!("queue=\"{name}\"");
    assert_eq!(
        series.named("counter retry_queue"),
        [
            format!("counter retry_queue_attempts_total{{outcome=\"dead\",{queue}}} = 2"),
            format!("counter retry_queue_attempts_total{{outcome=\"done\",{queue}}} = 1"),
            format!("counter retry_queue_attempts_total{{outcome=\"retry\",{queue}}} = 1"),
            format!("counter retry_queue_dead_letters_total{{{queue}}} = 2"),
        ]
    );
    // The worker's last look, when nothing was left: an empty queue.
    assert_eq!(
        series.named("gauge retry_queue"),
        [
            format!("gauge retry_queue_depth{{{queue}}} = 0"),
            format!("gauge retry_queue_oldest_due_age_seconds{{{queue}}} = 0"),
        ]
    );
}

#[test]
fn the_oldest_due_job_ages_from_its_run_at() {
    let mut seen = None;
    let saw = &mut seen;
    let series = recorded(|| async move {
        let Some(database) = Database::fresh(Engine::Sqlite, "oldest_due").await else {
            return;
        };
        let queue = Queue::<sqlx::Sqlite>::open(&database.url, "oldest-due")
            .await
            .expect("the queue opens");
        queue.enqueue("a", &1).await.expect("enqueued");
        // The database's clock moves on; the job has been due since it was enqueued.
        tokio::time::sleep(Duration::from_millis(60)).await;
        queue.enqueue("b", &2).await.expect("enqueued");
        *saw = Some(queue.observe().await.expect("the stats"));
    });
    let stats = seen.expect("observed");
    assert_eq!(stats.depth, 2);
    assert!(
        stats.oldest_due_age >= Duration::from_millis(60),
        "{stats:?}"
    );
    assert_eq!(
        series.get("gauge retry_queue_depth{queue=\"oldest-due\"}"),
        Some(2.0)
    );
    assert_eq!(
        series.get("gauge retry_queue_oldest_due_age_seconds{queue=\"oldest-due\"}"),
        Some(stats.oldest_due_age.as_secs_f64())
    );
}
