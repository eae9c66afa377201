//! Real databases for the tests: a fresh SQLite file or PostgreSQL schema per test, a private
//! PostgreSQL cluster for the tests that stop or restart the server, and the rule for a test
//! whose server is missing.
//!
//! The shared PostgreSQL server comes from `.ci/postgres.sh` (`RETRY_TEST_POSTGRES_URL` and
//! friends); `.ci/run` starts one. Each test gets its own schema, so tests never share rows and
//! run in parallel.
//!
//! A module of `common` in the behaviour tests, and included by path into the examples' tests
//! (`examples/tests/common`); both have `skip_or_fail` (`skip.rs`) beside it.

#![allow(dead_code)] // each test binary uses a part

use super::skip_or_fail;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// [`skip_or_fail`] for a test whose server is missing: under CI it fails; otherwise it prints
/// one line saying that `test` needs `needs` and how to run it (`run`, a command), and the test
/// returns.
pub fn server_missing(test: &str, needs: &str, run: &str) {
    // The line starts with the test's name (see `skip_or_fail`); say `test` again only when it
    // names a case the thread's name does not (a test that runs one case per engine).
    let thread = std::thread::current();
    if thread.name().is_some_and(|name| name.ends_with(test)) {
        skip_or_fail(format_args!("needs {needs}: run it with `{run}`"));
    } else {
        skip_or_fail(format_args!("{test} needs {needs}: run it with `{run}`"));
    }
}

/// The shared server's URL, or `None` after [`server_missing`]; `run` is the command that runs
/// the test with a server, for the line.
pub fn postgres_url(test: &str, run: &str) -> Option<String> {
    match std::env::var("RETRY_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            server_missing(test, "PostgreSQL", run);
            None
        }
    }
}

static SEQUENCE: AtomicU32 = AtomicU32::new(0);

/// A name no other test of any run uses: the test's name, the process and a counter.
pub fn unique_name(test: &str) -> String {
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let test: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    format!("t_{test}_{}_{n}", std::process::id())
}

/// A fresh schema on the server at `url`; the options connect with it first on the search path,
/// so that everything a test creates goes there.
pub async fn fresh_schema(url: &str, test: &str) -> PgConnectOptions {
    let schema = new_schema(url, test).await;
    on_schema(url, &schema)
}

/// The options for `url` with `schema` first on the search path.
pub fn on_schema(url: &str, schema: &str) -> PgConnectOptions {
    PgConnectOptions::from_str(url)
        .expect("RETRY_TEST_POSTGRES_URL is a URL")
        .options([("search_path", schema)])
}

/// Creates a fresh schema on the server at `url` and returns its name.
pub async fn new_schema(url: &str, test: &str) -> String {
    let schema = unique_name(test);
    let admin = PgConnectOptions::from_str(url).expect("RETRY_TEST_POSTGRES_URL is a URL");
    let mut connection = admin
        .connect()
        .await
        .expect("the test server accepts connections");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut connection)
        .await
        .expect("a new schema");
    schema
}

/// A pool of a few connections on `options`.
pub fn pool(options: PgConnectOptions) -> PgPool {
    PgPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with(options)
}

/// A path for a fresh SQLite file in a directory of its own, deleted when the value drops.
pub struct TempFile {
    dir: PathBuf,
    path: PathBuf,
}

impl TempFile {
    pub fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(unique_name(test));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let path = dir.join("store.db");
        TempFile { dir, path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL cluster of the test's own, for tests that stop or restart the server: its data
/// directory in a temp dir, on a free loopback port, run as `RETRY_TEST_PG_USER` (servers refuse
/// root). Stopped and deleted when the value drops.
pub struct PrivateCluster {
    bin: PathBuf,
    user: Option<String>,
    dir: PathBuf,
    port: u16,
}

impl PrivateCluster {
    /// Starts one, or returns `None` after [`server_missing`] when the server binaries are not
    /// known (`RETRY_TEST_PG_BIN`, exported by `.ci/postgres.sh`); `run` is the command that
    /// runs the test with them, for the line.
    pub fn start(test: &str, run: &str) -> Option<Self> {
        let bin = match std::env::var("RETRY_TEST_PG_BIN") {
            Ok(bin) if Path::new(&bin).join("pg_ctl").exists() => PathBuf::from(bin),
            _ => {
                server_missing(test, "PostgreSQL's server binaries", run);
                return None;
            }
        };
        let user = std::env::var("RETRY_TEST_PG_USER")
            .ok()
            .filter(|user| !user.is_empty() && is_root());
        let dir = std::env::temp_dir().join(unique_name(test));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        if let Some(user) = &user {
            let status = Command::new("chown").arg(user).arg(&dir).status();
            assert!(status.is_ok_and(|s| s.success()), "chown {user} {dir:?}");
        }
        let port = free_port();
        let cluster = PrivateCluster {
            bin,
            user,
            dir,
            port,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        cluster.pg_ctl("start");
        Some(cluster)
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: waits until the server is back.
    pub fn restart(&self) {
        self.pg_ctl("restart");
    }

    /// `pg_ctl stop -m fast`.
    pub fn stop(&self) {
        self.pg_ctl("stop");
    }

    /// `pg_ctl start`: waits until the server accepts connections.
    pub fn start_again(&self) {
        self.pg_ctl("start");
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn pg_ctl(&self, action: &str) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-l",
                &log,
                "-m",
                "fast",
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                action,
            ],
        );
    }

    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = match &self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        };
        let output = command
            .args(args)
            .output()
            .expect("the server binaries run");
        assert!(
            output.status.success(),
            "{} {args:?}: {}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let data = self.data();
        let pg_ctl = self.bin.join("pg_ctl");
        let mut command = match &self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&pg_ctl);
                command
            }
            None => Command::new(&pg_ctl),
        };
        let _ = command
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}
