//! What the examples' tests share: a fresh database per test (a SQLite file, or a PostgreSQL
//! schema on the server `.ci/postgres.sh` starts), the rule for a missing server, and the
//! `claims-portal` process, started, read and killed.
//!
//! The rule, the databases and the engines are those of the behaviour tests and the durable
//! crate's tests (`retry-durable/tests/common`), included by path, so that there is one of each.

#![allow(dead_code)] // each test binary uses a part

#[path = "../../../retry-durable/tests/common/mod.rs"]
mod durable;

#[allow(unused_imports)] // each test binary uses a part
pub use durable::{Database, Engine, databases, postgres_url, skip_or_fail, unique_name};

use retry_durable::queue::Queue;
use retry_examples::portal::later::{self, PortalDb};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The portal's databases.
impl Database {
    /// The coverage-check queue and the portal's tables in it, on engine `B` (the test's).
    pub async fn queue<B: PortalDb>(&self) -> Queue<B> {
        let queue = Queue::open(&self.url, later::QUEUE)
            .await
            .expect("the queue opens");
        later::migrate(&queue).await.expect("the portal's tables");
        queue
    }
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
