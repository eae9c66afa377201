//! What the queue tests share: a fresh database per test (a SQLite file, or a PostgreSQL schema
//! on the server `.ci/postgres.sh` starts), the rule for a missing server, and the
//! `claims-portal` process, started, read and killed.

#![allow(dead_code)] // each test binary uses a part

use retry_examples::portal::later;
use retry_examples::queue::Queue;
use sqlx::{Connection, PgConnection};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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
    /// A fresh database on `engine`, or `None` after [`skip_or_fail`] when the test's
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
                let schema = unique_name(test);
                let mut admin = PgConnection::connect(&server)
                    .await
                    .expect("the test server accepts connections");
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(&mut admin)
                    .await
                    .expect("a new schema");
                Some(Database {
                    url: format!("{server}?options[search_path]={schema}"),
                    dir: None,
                })
            }
        }
    }

    /// The coverage-check queue and the portal's tables in it.
    pub async fn queue(&self) -> Queue {
        let queue = Queue::open(&self.url, later::QUEUE)
            .await
            .expect("the queue opens");
        later::migrate(&queue).await.expect("the portal's tables");
        queue
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The rule for a test whose server is missing: with `CI` set it fails (a check must never
/// pass by not running); otherwise it prints one line saying how to run it, and the test
/// returns.
pub fn skip_or_fail(test: &str, needs: &str, run: &str) {
    let message = format!("{test} needs {needs}: run it with `{run}`");
    if std::env::var_os("CI").is_some_and(|ci| !ci.is_empty()) {
        panic!("CI is set, so a skip is a failure: {message}");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "skipped: {message}");
}

/// The shared server's URL, or `None` after [`skip_or_fail`].
pub fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("RETRY_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            skip_or_fail(
                test,
                "PostgreSQL",
                ".ci/postgres.sh run cargo test -p retry-examples --test 'queue_*'",
            );
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

/// How long a test waits for a process before it fails with the process's output.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A `claims-portal` process: its stdout lines as they come, and everything it printed.
pub struct Portal {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    output: Arc<Mutex<String>>,
    name: String,
}

impl Portal {
    /// Starts `claims-portal` with `args`.
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_claims-portal"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("claims-portal starts");
        let output = Arc::new(Mutex::new(String::new()));
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped stdout");
        let log = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                log.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_str(&format!("{line}\n"));
                let _ = send.send(line);
            }
        });
        let mut stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            log.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_str(&text);
        });
        Portal {
            child,
            lines,
            output,
            name: name.to_owned(),
        }
    }

    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits for a stdout line that starts with `prefix` and returns it.
    pub fn wait_for_line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "{}: no line starting with {prefix:?} within {PATIENCE:?}; output:\n{}",
                    self.name,
                    self.output()
                ),
            }
        }
    }

    /// `SIGKILL`, and waits until the process is gone.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }

    /// Waits until the process exits and asserts that it succeeded; returns its output.
    pub fn wait_success(mut self) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self
                .child
                .try_wait()
                .expect("the process can be waited for")
            {
                Some(status) => {
                    // Let the reader threads catch up with the last lines.
                    std::thread::sleep(Duration::from_millis(20));
                    let output = self.output();
                    assert!(
                        status.success(),
                        "{} failed ({status}):\n{output}",
                        self.name
                    );
                    return output;
                }
                None if Instant::now() > deadline => {
                    let _ = self.child.kill();
                    panic!(
                        "{} did not finish within {PATIENCE:?}:\n{}",
                        self.name,
                        self.output()
                    );
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Drop for Portal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator for a fault schedule that a seed replays (SplitMix64).
pub struct Schedule(u64);

impl Schedule {
    /// The seed from `QUEUE_FAULT_SEED`, or one from the clock; printed, so that a failing run
    /// can be replayed.
    pub fn from_env(test: &str) -> Self {
        let seed = std::env::var("QUEUE_FAULT_SEED")
            .ok()
            .and_then(|seed| seed.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(7411, |d| d.as_nanos() as u64)
            });
        let _ = writeln!(
            std::io::stderr(),
            "{test}: fault schedule seed {seed} (replay with QUEUE_FAULT_SEED={seed})"
        );
        Schedule(seed)
    }

    /// The next number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// Runs a blocking wait (a process, a line) off the runtime's threads, so that the contract
/// service in this process keeps answering meanwhile.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("the blocking wait does not panic")
}
