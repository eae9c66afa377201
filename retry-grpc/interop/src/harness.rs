//! Runs the harness's processes and reads what they report: a scripted server (the tonic one,
//! or grpcio's), and grpcio's client driver with a service config.
//!
//! Everything is on loopback; every child process is killed when its handle drops.

use crate::server::AttemptRecord;
use serde::Deserialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The grpcio (and grpcio-tools) that `.ci/grpcio.sh install` puts in the tests' virtual
/// environment ([`venv_dir`]): the release `bench/RESULTS.md` §10 was measured with.
pub const GRPCIO_VERSION: &str = "1.85.1";

/// The grpcio releases the tests run against: `1.85.x`, any patch of the pinned release's line
/// (patch releases fix bugs; the retry rules the tests check are the 1.85 line's). A Python
/// with another grpcio is not used: the tests skip, saying how to get the pinned one.
pub const GRPCIO_RANGE: &str = "1.85.x";

/// Whether `version` (`grpc.__version__`) is in [`GRPCIO_RANGE`].
pub fn grpcio_in_range(version: &str) -> bool {
    version
        .strip_prefix("1.85.")
        .is_some_and(|patch| !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()))
}

/// What to run to get grpcio.
pub const INSTALL_HINT: &str = "run `.ci/grpcio.sh install` (a virtual environment under target/ with \
     grpcio and grpcio-tools 1.85.1 from PyPI), or point RETRY_TEST_PYTHON at a Python with grpcio 1.85.x \
     and grpcio-tools";

/// The directory of the Python drivers.
pub fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// The virtual environment `.ci/grpcio.sh install` makes: `grpcio-venv` in cargo's target
/// directory (`$CARGO_TARGET_DIR`, relative to the workspace if relative, else the workspace's
/// `target/`), so that it goes with the build and `cargo clean`, and never touches the
/// machine's own Python.
pub fn venv_dir() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| workspace.join("target"), |dir| workspace.join(dir));
    target.join("grpcio-venv")
}

/// The Python the drivers run with, and its `grpc.__version__`: `$RETRY_TEST_PYTHON` if set,
/// else the virtual environment's ([`venv_dir`]) if it exists, else `python3`; it must have
/// grpcio in [`GRPCIO_RANGE`] and grpcio-tools. `Err` says, in one line, what is missing and
/// how to get it. Looked up once per process.
pub fn python() -> Result<(PathBuf, String), String> {
    static FOUND: OnceLock<Result<(PathBuf, String), String>> = OnceLock::new();
    FOUND.get_or_init(find_python).clone()
}

fn find_python() -> Result<(PathBuf, String), String> {
    let venv = venv_dir().join(if cfg!(windows) {
        "Scripts/python.exe"
    } else {
        "bin/python"
    });
    let python = match std::env::var_os("RETRY_TEST_PYTHON").filter(|p| !p.is_empty()) {
        Some(python) => PathBuf::from(python),
        None if venv.exists() => venv,
        None => PathBuf::from("python3"),
    };
    let shown = python.display();
    let output = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools; print(grpc.__version__)"])
        .stderr(Stdio::null())
        .output()
        .map_err(|error| format!("{shown} could not run ({error}): {INSTALL_HINT}"))?;
    if !output.status.success() {
        return Err(format!(
            "{shown} has no grpcio or grpcio-tools: {INSTALL_HINT}"
        ));
    }
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !grpcio_in_range(&version) {
        return Err(format!(
            "{shown} has grpcio {version}, the tests run against {GRPCIO_RANGE}: {INSTALL_HINT}"
        ));
    }
    Ok((python, version))
}

/// A scripted server running as a child process, and the attempts it reported.
pub struct ServerProcess {
    child: Child,
    address: String,
    records: Arc<Mutex<Vec<AttemptRecord>>>,
}

impl ServerProcess {
    /// Starts `command` (which prints `{"listening": ADDRESS}` first, then one attempt per line)
    /// and waits for its address.
    pub fn start(mut command: Command) -> Result<Self, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| format!("could not start {command:?}: {error}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let address = serde_json::from_str::<Value>(&first)
            .ok()
            .and_then(|value| value["listening"].as_str().map(str::to_owned));
        let Some(address) = address else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "the server did not say where it listens; its first line was {first:?}"
            ));
        };
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(record) = serde_json::from_str::<AttemptRecord>(&line) {
                    sink.lock().unwrap_or_else(|p| p.into_inner()).push(record);
                }
            }
        });
        Ok(ServerProcess {
            child,
            address,
            records,
        })
    }

    /// The tonic scripted server (`scripted-server`, built by cargo beside the tests).
    pub fn tonic(binary: &Path) -> Result<Self, String> {
        Self::start(Command::new(binary))
    }

    /// grpcio's scripted server (`python/scripted_server.py`).
    pub fn grpcio(python: &Path) -> Result<Self, String> {
        let mut command = Command::new(python);
        command
            .arg(python_dir().join("scripted_server.py"))
            .current_dir(python_dir());
        Self::start(command)
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The attempts reported so far, once the report has been quiet for 50 ms (the server writes
    /// an attempt before it answers, so after the client has its answer only the pipe may lag).
    pub fn records(&self) -> Vec<AttemptRecord> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut seen = usize::MAX;
        loop {
            let count = self.records.lock().unwrap_or_else(|p| p.into_inner()).len();
            if count == seen || Instant::now() > deadline {
                break;
            }
            seen = count;
            std::thread::sleep(Duration::from_millis(50));
        }
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The attempts of one scenario, in arrival order.
    pub fn attempts_of(&self, scenario: &str) -> Vec<AttemptRecord> {
        self.records()
            .into_iter()
            .filter(|record| record.scenario == scenario)
            .collect()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on: bound, then released.
pub fn closed_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// One reply a call delivered to the application.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ReplyRecord {
    /// The server's attempt that sent it.
    pub attempt: u32,
    /// Its index in the stream.
    pub index: u32,
    /// Request messages the server had received.
    pub received: u32,
}

/// One call as grpcio's application saw it.
#[derive(Clone, Debug, Deserialize)]
pub struct CallRecord {
    /// The call's number.
    pub call: u32,
    /// The final status code's name (`OK`, `UNAVAILABLE`, ...).
    pub code: String,
    /// The status message.
    pub details: String,
    /// When it started, in ms since the first call.
    pub started_ms: f64,
    /// How long it took, in ms.
    pub elapsed_ms: f64,
    /// The replies delivered.
    pub replies: Vec<ReplyRecord>,
    /// The trailing metadata (text values).
    pub trailing_metadata: serde_json::Map<String, Value>,
}

/// The client driver's report.
#[derive(Clone, Debug, Deserialize)]
pub struct ClientReport {
    /// `grpc.__version__`.
    pub grpcio: String,
    /// The calls, in order.
    pub calls: Vec<CallRecord>,
}

/// A run of grpcio's client driver.
#[derive(Clone, Debug)]
pub struct ClientRun {
    /// `unary`, `client_stream` or `server_stream`.
    pub method: &'static str,
    /// The scenario (`unavailable_then_ok:3`).
    pub scenario: String,
    /// How many calls, one after the other.
    pub calls: u32,
    /// The service config.
    pub config: Value,
    /// Each call's deadline.
    pub timeout: Duration,
    /// `wait_for_ready` on each call.
    pub wait_for_ready: bool,
}

impl ClientRun {
    /// One unary call of `scenario` under `config`, with a 10 s deadline.
    pub fn unary(scenario: &str, config: Value) -> Self {
        ClientRun {
            method: "unary",
            scenario: scenario.to_owned(),
            calls: 1,
            config,
            timeout: Duration::from_secs(10),
            wait_for_ready: false,
        }
    }

    /// Another method.
    pub fn method(mut self, method: &'static str) -> Self {
        self.method = method;
        self
    }

    /// More calls.
    pub fn calls(mut self, calls: u32) -> Self {
        self.calls = calls;
        self
    }

    /// Another deadline.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `wait_for_ready`.
    pub fn wait_for_ready(mut self) -> Self {
        self.wait_for_ready = true;
        self
    }

    /// Runs the driver against `target` and reads its report.
    pub fn run(&self, python: &Path, target: &str) -> Result<ClientReport, String> {
        let mut command = Command::new(python);
        command
            .arg(python_dir().join("client.py"))
            .current_dir(python_dir())
            .args([
                "--target",
                target,
                "--method",
                self.method,
                "--scenario",
                &self.scenario,
            ])
            .args([
                "--calls",
                &self.calls.to_string(),
                "--config",
                &self.config.to_string(),
            ])
            .args(["--timeout", &self.timeout.as_secs_f64().to_string()]);
        if self.wait_for_ready {
            command.arg("--wait-for-ready");
        }
        let output = command
            .stderr(Stdio::inherit())
            .output()
            .map_err(|error| format!("{command:?}: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "the client driver failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stdout)
            ));
        }
        serde_json::from_slice(&output.stdout).map_err(|error| {
            format!(
                "the client driver's report is not JSON ({error}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }
}

/// The pauses between a call's attempts as the server saw them, in ms.
pub fn pauses_ms(attempts: &[AttemptRecord]) -> Vec<f64> {
    attempts
        .windows(2)
        .map(|pair| pair[1].at_ms - pair[0].at_ms)
        .collect()
}

/// The attempts of call `call`.
pub fn of_call(attempts: &[AttemptRecord], call: u32) -> Vec<AttemptRecord> {
    attempts
        .iter()
        .filter(|record| record.call == call)
        .cloned()
        .collect()
}

/// The `grpc-previous-rpc-attempts` values of a call's attempts, in order.
pub fn previous_attempts(attempts: &[AttemptRecord]) -> Vec<Option<String>> {
    attempts
        .iter()
        .map(|record| record.previous_rpc_attempts.clone())
        .collect()
}

/// Runs `run` with the door (`retry_grpc::channel::GrpcRetryLayer`, read from the same JSON
/// config) over a tonic `Channel` to `target`, in this process on tokio's real clock, and
/// reports what the application saw as grpcio's driver does. tonic has no per-call
/// `wait_for_ready`: the door takes it from the config, so `wait_for_ready` sets
/// `"waitForReady": true` in every method config (adding one for every method if there is
/// none). The door's counters come with the report.
pub async fn run_door(
    run: &ClientRun,
    target: &str,
) -> Result<(ClientReport, Arc<retry_grpc::channel::Counters>), String> {
    use crate::proto::Request;
    use crate::proto::scripted_client::ScriptedClient;
    use retry_grpc::channel::GrpcRetryLayer;

    let mut config = run.config.clone();
    if run.wait_for_ready {
        let methods = config
            .as_object_mut()
            .ok_or("the config is not an object")?
            .entry("methodConfig")
            .or_insert_with(|| Value::Array(Vec::new()));
        let methods = methods.as_array_mut().ok_or("methodConfig is not a list")?;
        if methods.is_empty() {
            methods.push(serde_json::json!({"name": [{}]}));
        }
        for method in methods.iter_mut() {
            method["waitForReady"] = Value::Bool(true);
        }
    }
    let layer = GrpcRetryLayer::from_service_config(&config.to_string())
        .map_err(|error| error.to_string())?;
    let counters = layer.counters();
    let channel = tonic::transport::Channel::from_shared(format!("http://{target}"))
        .map_err(|error| error.to_string())?
        .connect_lazy();
    let mut client = ScriptedClient::new(tower_layer::Layer::layer(&layer, channel));
    let origin = Instant::now();
    let mut calls = Vec::new();
    for call in 0..run.calls {
        let message = Request {
            scenario: run.scenario.clone(),
            call,
            payload: Vec::new(),
        };
        let started = Instant::now();
        let mut replies = Vec::new();
        let reply = |r: &crate::proto::Reply| ReplyRecord {
            attempt: r.attempt,
            index: r.index,
            received: r.received,
        };
        fn with_deadline<T>(message: T, timeout: Duration) -> tonic::Request<T> {
            let mut request = tonic::Request::new(message);
            request.set_timeout(timeout);
            request
        }
        let outcome: Result<(), tonic::Status> = match run.method {
            "unary" => client
                .unary(with_deadline(message, run.timeout))
                .await
                .map(|r| replies.push(reply(r.get_ref()))),
            "client_stream" => {
                let messages = futures_util::stream::iter(vec![message; 3]);
                client
                    .client_stream(with_deadline(messages, run.timeout))
                    .await
                    .map(|r| replies.push(reply(r.get_ref())))
            }
            _ => match client
                .server_stream(with_deadline(message, run.timeout))
                .await
            {
                Ok(response) => {
                    let mut stream = response.into_inner();
                    loop {
                        match stream.message().await {
                            Ok(Some(r)) => replies.push(reply(&r)),
                            Ok(None) => break Ok(()),
                            Err(status) => break Err(status),
                        }
                    }
                }
                Err(status) => Err(status),
            },
        };
        let (code, details) = match outcome {
            Ok(()) => ("OK".to_owned(), String::new()),
            Err(status) => (
                retry_grpc::code::code_name(status.code()).to_owned(),
                status.message().to_owned(),
            ),
        };
        calls.push(CallRecord {
            call,
            code,
            details,
            started_ms: (started - origin).as_secs_f64() * 1000.0,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            replies,
            trailing_metadata: serde_json::Map::new(),
        });
    }
    let report = ClientReport {
        grpcio: String::new(),
        calls,
    };
    Ok((report, counters))
}
