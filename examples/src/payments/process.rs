//! The service as a child process: started with a [`Config`], watched through the lines it
//! prints, and killed with SIGKILL, as a crash or an `kill -9` by an operator would end it.

use super::faults::{STOPPED_AT, Step};
use super::service::{Config, LISTENING};
use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a service may take to start or to reach its stop step before the wait is an error.
const PATIENCE: Duration = Duration::from_secs(60);

/// Lines kept for an error message.
const KEPT_LINES: usize = 40;

/// A running service process.
pub struct ServiceProcess {
    child: Child,
    url: String,
    lines: mpsc::UnboundedReceiver<String>,
    recent: Arc<Mutex<VecDeque<String>>>,
}

impl ServiceProcess {
    /// Starts `program` with `prefix` and then `config`'s arguments, and waits until it listens.
    /// With `echo`, the service's lines are printed as they come (the example); otherwise they
    /// are kept for error messages (the tests).
    pub async fn start(
        program: &Path,
        prefix: &[&str],
        config: &Config,
        echo: bool,
    ) -> io::Result<Self> {
        let mut child = Command::new(program)
            .args(prefix)
            .args(config.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", program.display())))?;
        let pid = child.id();
        let (sender, lines) = mpsc::unbounded_channel();
        let recent = Arc::new(Mutex::new(VecDeque::new()));
        for output in [
            child
                .stdout
                .take()
                .map(|out| Box::new(out) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|err| Box::new(err) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let sender = sender.clone();
            let recent = Arc::clone(&recent);
            std::thread::spawn(move || {
                for line in BufReader::new(output).lines().map_while(Result::ok) {
                    if echo {
                        // The log lines come indented; the marker lines get the process's id.
                        if line.starts_with(' ') {
                            println!("{line}");
                        } else {
                            println!("    [process {pid}] {line}");
                        }
                    }
                    let mut kept = recent.lock().unwrap_or_else(PoisonError::into_inner);
                    if kept.len() == KEPT_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line.clone());
                    drop(kept);
                    let _ = sender.send(line);
                }
            });
        }
        let mut process = ServiceProcess {
            child,
            url: String::new(),
            lines,
            recent,
        };
        let line = process
            .wait_for(|line| line.starts_with(LISTENING), "to listen")
            .await?;
        process.url = line[LISTENING.len()..].trim().to_owned();
        Ok(process)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The port it listens on, for a restart on the same port.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or(0)
    }

    /// Waits until the service says it stopped at a step (see
    /// [`faults`](super::faults)), and returns the step.
    pub async fn stopped(&mut self) -> io::Result<Step> {
        let line = self
            .wait_for(|line| line.starts_with(STOPPED_AT), "to stop at its step")
            .await?;
        line[STOPPED_AT.len()..]
            .trim()
            .parse()
            .map_err(io::Error::other)
    }

    /// Kills the process with SIGKILL and waits until it is gone.
    pub fn kill(mut self) -> io::Result<()> {
        self.child.kill()?;
        self.child.wait().map(drop)
    }

    /// The last lines the service printed, for an error message.
    pub fn recent_output(&self) -> String {
        let kept = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    async fn wait_for(&mut self, wanted: impl Fn(&str) -> bool, what: &str) -> io::Result<String> {
        let found = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = self.lines.recv().await {
                if wanted(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => Ok(line),
            Ok(None) => {
                let status = self.child.wait()?;
                Err(io::Error::other(format!(
                    "the service ended ({status}) before it was seen {what}:\n{}",
                    self.recent_output()
                )))
            }
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the service was not seen {what} within {PATIENCE:?}:\n{}",
                    self.recent_output()
                ),
            )),
        }
    }
}

/// A process left running by a failing test or example is killed.
impl Drop for ServiceProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// This program, to start again as the service (the example runs its service that way, so that
/// `cargo run --example payments` builds nothing else).
pub fn current_program() -> io::Result<PathBuf> {
    std::env::current_exe()
}
