//! What the durable crate's tests (and, by path, the examples' tests) share: a fresh database per test (a SQLite file, or a
//! PostgreSQL schema on the server `.ci/postgres.sh` starts) and the rule for a missing server.
//!
//! The rule and the databases are the behaviour tests' own (`tests/it/common`), included by
//! path, so that there is one of each.

#![allow(dead_code)] // each test binary uses a part

#[path = "../../../tests/it/common/databases.rs"]
pub mod databases;
#[path = "../../../tests/it/common/skip.rs"]
mod skip;

pub use databases::unique_name;
pub use skip::skip_or_fail;

use std::path::PathBuf;

/// The engines every test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// A fresh database for one test: a SQLite file in a directory of its own (deleted when the
/// value drops), or a schema of its own on the test server.
pub struct Database {
    /// What `Queue::open` and `claims-portal --database` take.
    pub url: String,
    dir: Option<PathBuf>,
}

impl Database {
    /// A fresh database on `engine`, or `None` after [`databases::server_missing`] when the test's
    /// PostgreSQL server is missing.
    pub async fn fresh(engine: Engine, test: &str) -> Option<Self> {
        match engine {
            Engine::Sqlite => {
                let dir = std::env::temp_dir().join(unique_name(test));
                std::fs::create_dir_all(&dir).expect("a temp dir");
                Some(Database {
                    url: dir.join("queue.db").display().to_string(),
                    dir: Some(dir),
                })
            }
            Engine::Postgres => {
                let server = postgres_url(test)?;
                let schema = databases::new_schema(&server, test).await;
                Some(Database {
                    url: format!("{server}?options[search_path]={schema}"),
                    dir: None,
                })
            }
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The shared server's URL, or `None` after [`databases::server_missing`].
pub fn postgres_url(test: &str) -> Option<String> {
    databases::postgres_url(test, ".ci/postgres.sh run cargo test --workspace")
}
