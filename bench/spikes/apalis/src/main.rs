//! Spike: apalis 1.0 on SQLite and PostgreSQL.
//! usage: spike <sqlite-path|postgres-url> enqueue <n> [kind]
//!        spike <db> work <name> <sleep_ms> <heartbeat_ms> <missed> <concurrency>
//!        spike <db> status
use apalis::prelude::*;
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Job {
    claim: u32,
    kind: String,
}

#[derive(Debug)]
struct Permanent(String);
impl std::fmt::Display for Permanent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "permanent: {}", self.0)
    }
}
impl std::error::Error for Permanent {}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
fn t() -> f64 {
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

async fn handle(job: Job, w: WorkerContext, sleep: Data<u64>) -> Result<String, BoxDynError> {
    println!(
        "{:7.3} {} start claim {} kind {}",
        t(),
        w.name(),
        job.claim,
        job.kind
    );
    std::io::stdout().flush().ok();
    tokio::time::sleep(Duration::from_millis(*sleep)).await;
    match job.kind.as_str() {
        "later" => Err(Box::new(RetryAfterError::new(
            Permanent(format!("later {}", job.claim)),
            Duration::from_millis(500),
        ))),
        "abort" => Err(Box::new(AbortError::new(Permanent(format!(
            "claim {}",
            job.claim
        ))))),
        "fail" => Err(Box::new(Permanent(format!(
            "plain fail claim {}",
            job.claim
        )))),
        _ => {
            println!("{:7.3} {} done claim {}", t(), w.name(), job.claim);
            std::io::stdout().flush().ok();
            Ok(format!("ok {}", job.claim))
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    t();
    let args: Vec<String> = std::env::args().collect();
    let db = &args[1];
    let pg = db.starts_with("postgres");
    match args[2].as_str() {
        "enqueue" => {
            let n: u32 = args[3].parse()?;
            let kind = args.get(4).cloned().unwrap_or("ok".into());
            if pg {
                let pool = sqlx::PgPool::connect(db).await?;
                PostgresStorage::setup(&pool).await?;
                let mut s = PostgresStorage::<Job>::new(&pool)
                    .with_config(apalis_postgres::Config::default().queue("claims"));
                for i in 0..n {
                    s.push(Job {
                        claim: 4700 + i,
                        kind: kind.clone(),
                    })
                    .await?;
                }
            } else {
                let pool = sqlx::SqlitePool::connect(&format!("sqlite://{db}?mode=rwc")).await?;
                SqliteStorage::setup(&pool).await?;
                let mut s: SqliteStorage<Job> = SqliteStorage::new(&pool)
                    .with_config(apalis_sqlite::Config::default().queue("claims"));
                for i in 0..n {
                    s.push(Job {
                        claim: 4700 + i,
                        kind: kind.clone(),
                    })
                    .await?;
                }
            }
            println!("enqueued {n}");
        }
        "work" => {
            let name = args[3].clone();
            let sleep: u64 = args[4].parse()?;
            let hb = Duration::from_millis(args[5].parse()?);
            let missed: usize = args[6].parse()?;
            let conc: usize = args[7].parse()?;
            if pg {
                let pool = sqlx::PgPool::connect(db).await?;
                let cfg = apalis_postgres::Config::default()
                    .queue("claims")
                    .heartbeat_interval(hb)
                    .missed_heartbeats(missed);
                let s = PostgresStorage::<Job>::new(&pool).with_config(cfg);
                let w = WorkerBuilder::new(name)
                    .backend(s)
                    .data(sleep)
                    .concurrency(conc)
                    .on_event(|_, ev| println!("{:7.3} event {ev:?}", t()))
                    .build(handle);
                w.run().await?;
            } else {
                let pool = sqlx::SqlitePool::connect(&format!("sqlite://{db}?mode=rwc")).await?;
                let cfg = apalis_sqlite::Config::default()
                    .queue("claims")
                    .heartbeat_interval(hb)
                    .missed_heartbeats(missed);
                let s: SqliteStorage<Job> = SqliteStorage::new(&pool).with_config(cfg);
                let w = WorkerBuilder::new(name)
                    .backend(s)
                    .data(sleep)
                    .concurrency(conc)
                    .on_event(|_, ev| println!("{:7.3} event {ev:?}", t()))
                    .build(handle);
                w.run().await?;
            }
        }
        "status" => {
            if pg {
                let pool = sqlx::PgPool::connect(db).await?;
                let rows: Vec<(String, i32, i32, Option<serde_json::Value>)> = sqlx::query_as("SELECT status, attempts, max_attempts, last_result FROM apalis.jobs ORDER BY id").fetch_all(&pool).await?;
                for r in rows {
                    println!("{r:?}");
                }
            } else {
                let pool = sqlx::SqlitePool::connect(&format!("sqlite://{db}")).await?;
                let rows: Vec<(String, i64, i64, Option<String>, i64)> = sqlx::query_as("SELECT status, attempts, max_attempts, last_result, run_at FROM Jobs ORDER BY id").fetch_all(&pool).await?;
                for r in rows {
                    println!("{r:?}");
                }
            }
        }
        _ => panic!("mode"),
    }
    Ok(())
}
