//! The payment service's metrics through a real Prometheus server (Debian's `prometheus`
//! package; `.ci/run` installs it when missing): the server runs as a child process on a free
//! loopback port, with a config and a TSDB directory of its own, and scrapes the service's
//! `/metrics` every 250 ms while the bank goes through a scripted outage. Everything is asserted
//! through Prometheus's own HTTP API with PromQL, as a dashboard or an alert would see it:
//!
//! - before the outage every transfer succeeds at its first try and nothing is retried;
//! - during it the retries rise, the first payout gives up with `reason="exhausted"`, the
//!   fifth failure in a row opens the bank's breaker, and every payout after it gives up with
//!   `reason="breaker_open"` without asking the bank;
//! - the breaker's gauge shows it open (1), then closed (0) once the bank is back and the
//!   trial transfer has passed;
//! - nothing is counted twice: the calls of `transfer` by outcome add up to the payouts the test
//!   sent, and so do the store's `execute` answers.
//!
//! Without a `prometheus` binary the test says how to get one and passes, unless `CI` is set
//! (`tests/it/common/skip.rs`). `RETRY_TEST_PROMETHEUS` names another binary.

use crate::common;
use retry_examples::payments::bank::{BANK_OPEN_FOR, Bank};
use retry_examples::payments::process::ServiceProcess;
use retry_examples::payments::service::{Config, Database};
use retry_examples::payments::{Cents, ClaimId, PayoutRequest};
use retry_runtime::IdempotencyKey;
use serde_json::Value;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SERVICE: &str = env!("CARGO_BIN_EXE_payments-service");

/// How long the test waits for Prometheus to start, or to have scraped what the service did.
const PATIENCE: Duration = Duration::from_secs(20);

/// Payouts before the outage, during it, and after it.
const BEFORE: u32 = 5;
const DURING: u32 = 6;
const AFTER: u32 = 5;

/// Debian's binary, unless `RETRY_TEST_PROMETHEUS` names another; `None` when there is none.
fn prometheus_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RETRY_TEST_PROMETHEUS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let mut candidates = vec![PathBuf::from("/usr/bin/prometheus")];
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("prometheus")));
    }
    candidates.into_iter().find(|path| path.is_file())
}

/// A Prometheus server, a child process: killed and its directory deleted when dropped, on
/// every path out of the test, a failed assertion included.
struct Prometheus {
    child: Child,
    url: String,
    dir: PathBuf,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts `binary` on a free loopback port, scraping `target` (`127.0.0.1:PORT`) at
    /// `/metrics` every 250 ms, and waits until it is ready.
    async fn start(binary: &Path, target: &str) -> Self {
        let dir = std::env::temp_dir().join(common::unique_name("prometheus"));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let config = format!(
            "global:\n  scrape_interval: 250ms\n  evaluation_interval: 250ms\n\
             scrape_configs:\n  - job_name: payments\n    scrape_interval: 250ms\n    \
             scrape_timeout: 250ms\n    metrics_path: /metrics\n    static_configs:\n      \
             - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("the config is written");
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("a log file");
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", binary.display()));
        let mut prometheus = Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
            http: reqwest::Client::new(),
        };
        let ready = format!("{}/-/ready", prometheus.url);
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(response) = prometheus.http.get(&ready).send().await
                && response.status().is_success()
            {
                return prometheus;
            }
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                panic!("Prometheus ended ({status}):\n{}", prometheus.log());
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus was not ready within {PATIENCE:?}:\n{}",
                prometheus.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// `GET /api/v1/...` with `params`, the `data` of a successful answer.
    async fn api(&self, path: &str, params: &[(&str, String)]) -> Value {
        let mut url = format!("{}/api/v1/{path}?", self.url);
        for (name, value) in params {
            let _ = write!(url, "{name}={}&", encode(value));
        }
        let answer: Value = self
            .http
            .get(&url)
            .send()
            .await
            .expect("Prometheus answers")
            .json()
            .await
            .expect("Prometheus answers JSON");
        assert_eq!(answer["status"], "success", "{url}: {answer}");
        answer["data"].clone()
    }

    /// An instant query at `at` (now if `None`): each series' labels and value.
    async fn query(&self, promql: &str, at: Option<f64>) -> Vec<(Value, f64)> {
        let mut params = vec![("query", promql.to_owned())];
        if let Some(at) = at {
            params.push(("time", format!("{at:.3}")));
        }
        let data = self.api("query", &params).await;
        data["result"]
            .as_array()
            .expect("a vector")
            .iter()
            .map(|series| (series["metric"].clone(), number(&series["value"][1])))
            .collect()
    }

    /// The one value of an instant query that must yield one series; `None` when it yields
    /// none.
    async fn value(&self, promql: &str, at: Option<f64>) -> Option<f64> {
        let result = self.query(promql, at).await;
        assert!(result.len() <= 1, "{promql}: {result:?}");
        result.first().map(|(_, value)| *value)
    }

    /// Waits until `promql` yields `wanted`: until Prometheus has scraped what the service did.
    /// Returns the time of the query that saw it.
    async fn wait_for(&self, promql: &str, wanted: f64) -> f64 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let at = unix_now();
            let seen = self.value(promql, Some(at)).await;
            if seen == Some(wanted) {
                return at;
            }
            assert!(
                Instant::now() < deadline,
                "{promql} was {seen:?}, not {wanted}, after {PATIENCE:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A range query from `start` to `end` every 50 ms (five points per scrape): the
    /// one series' values, in order, with its value at `end` last.
    async fn range(&self, promql: &str, start: f64, end: f64) -> Vec<f64> {
        let params = [
            ("query", promql.to_owned()),
            ("start", format!("{start:.3}")),
            ("end", format!("{end:.3}")),
            ("step", "0.05".to_owned()),
        ];
        let data = self.api("query_range", &params).await;
        let series = data["result"].as_array().expect("a matrix");
        assert_eq!(series.len(), 1, "{promql}: {data}");
        let mut values: Vec<f64> = series[0]["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|point| number(&point[1]))
            .collect();
        values.extend(self.value(promql, Some(end)).await);
        values
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn number(value: &Value) -> f64 {
    value
        .as_str()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("a sample value, not {value}"))
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

/// A port nobody listens on now (the listener is closed before Prometheus binds it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Percent-encoding for a query string: everything but unreserved characters.
fn encode(text: &str) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

/// One payout with a key of its own, sent once (the test counts requests; the client's
/// `#[retry]` would send more): its status.
async fn pay(http: &reqwest::Client, service: &str, claim: u32) -> u16 {
    let body = serde_json::to_vec(&PayoutRequest {
        claim: ClaimId(claim),
        cents: Cents(10_000 + u64::from(claim)),
    })
    .expect("a payout request");
    http.post(format!("{service}/payouts"))
        .header(IdempotencyKey::HEADER, IdempotencyKey::new().as_str())
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the service answers")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_sees_the_retries_give_ups_and_breaker_of_a_bank_outage() {
    let Some(binary) = prometheus_binary() else {
        return common::skip_or_fail(
            "needs Prometheus: install Debian's package (`apt-get install prometheus`, which \
             `.ci/prometheus.sh install` runs as root), or set RETRY_TEST_PROMETHEUS to a \
             prometheus binary",
        );
    };
    let dir = TempDir::new("prometheus-payments");
    let bank = Bank::start_quiet(Duration::ZERO)
        .await
        .expect("the bank starts");
    let config = Config {
        database: Database::Sqlite(dir.0.join("payments.db")),
        bank: Some(bank.url().to_owned()),
        metrics: true,
        quiet: true,
        ..Config::default()
    };
    let service = ServiceProcess::start(Path::new(SERVICE), &[], &config, false)
        .await
        .expect("the service starts");
    let target = service.url().trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(&binary, &target).await;
    let http = reqwest::Client::new();
    // Most of the test's time: Prometheus 2.42 hands its scrape loops their targets on a fixed
    // 5 s tick, so the first scrape comes about 5 s after the start, whatever the interval.
    let started = prometheus.wait_for("up{job=\"payments\"}", 1.0).await;

    let calls = "sum(retry_calls_total{function=\"transfer\"})";
    let retries = "retry_retries_total{function=\"transfer\"}";
    let breaker = "retry_breaker_state{breaker=\"bank\"}";
    let gave_up = |reason: &str| {
        format!(
            "retry_calls_total{{function=\"transfer\",outcome=\"gave_up\",reason=\"{reason}\"}}"
        )
    };

    // Before the outage: every payout paid at its first try.
    for claim in 0..BEFORE {
        assert_eq!(pay(&http, service.url(), claim).await, 201);
    }
    let before = prometheus.wait_for(calls, f64::from(BEFORE)).await;
    assert_eq!(prometheus.value(retries, Some(before)).await, Some(0.0));
    assert_eq!(prometheus.value(breaker, Some(before)).await, Some(0.0));

    // The outage: the first payout uses up its retries, the fifth failure in a row opens the
    // breaker, and the payouts after it are refused without asking the bank. The service
    // answers each 503 (with Retry-After), having given its key back.
    bank.set_down(true);
    let mut opened_by = Instant::now();
    for claim in BEFORE..BEFORE + DURING {
        assert_eq!(pay(&http, service.url(), claim).await, 503);
        if claim == BEFORE + 1 {
            opened_by = Instant::now();
        }
    }
    assert_eq!(
        bank.refused(),
        5,
        "four attempts, then the fifth opens the breaker"
    );
    let during = prometheus.wait_for(calls, f64::from(BEFORE + DURING)).await;
    let seen_open = prometheus.wait_for(breaker, 1.0).await;

    // The bank is back; once the breaker's time is over, its trial transfer passes and the
    // breaker closes.
    bank.set_down(false);
    tokio::time::sleep(
        (opened_by + BANK_OPEN_FOR + Duration::from_millis(100))
            .saturating_duration_since(Instant::now()),
    )
    .await;
    for claim in BEFORE + DURING..BEFORE + DURING + AFTER {
        assert_eq!(pay(&http, service.url(), claim).await, 201);
    }
    let total = BEFORE + DURING + AFTER;
    let after = prometheus.wait_for(calls, f64::from(total)).await;
    // The time of the query that saw the breaker closed, so that every query at `end` reads
    // that scrape's samples.
    let end = prometheus.wait_for(breaker, 0.0).await;

    // Nothing counted twice: one call of `transfer` per payout sent, by outcome, and one store
    // answer per payout.
    let by_outcome = prometheus
        .query(
            "sum by (outcome) (retry_calls_total{function=\"transfer\"})",
            Some(end),
        )
        .await;
    let mut outcomes: Vec<(String, f64)> = by_outcome
        .iter()
        .filter(|(_, count)| *count > 0.0)
        .map(|(labels, count)| (labels["outcome"].as_str().unwrap_or("").to_owned(), *count))
        .collect();
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        outcomes,
        [
            ("first_try".to_owned(), f64::from(BEFORE + AFTER)),
            ("gave_up".to_owned(), f64::from(DURING)),
        ]
    );
    assert_eq!(
        prometheus
            .value(
                "sum(retry_store_begins_total{store=\"sqlite\",answer=\"execute\"})",
                Some(end)
            )
            .await,
        Some(f64::from(total))
    );
    assert_eq!(
        prometheus
            .value("sum(retry_store_begins_total{store=\"sqlite\"})", Some(end))
            .await,
        Some(f64::from(total))
    );

    // The give-ups with their reasons.
    assert_eq!(
        prometheus.value(&gave_up("exhausted"), Some(end)).await,
        Some(1.0)
    );
    assert_eq!(
        prometheus.value(&gave_up("breaker_open"), Some(end)).await,
        Some(f64::from(DURING - 1))
    );

    // The retries rose during the outage, and only then.
    let rise = prometheus.range(retries, before, during).await;
    assert_eq!(rise.first(), Some(&0.0), "{rise:?}");
    assert!(rise.windows(2).all(|w| w[0] <= w[1]), "{rise:?}");
    let retried = *rise.last().expect("a value");
    assert!(
        retried >= 3.0,
        "the first payout's three retries at least: {rise:?}"
    );
    assert_eq!(prometheus.value(retries, Some(after)).await, Some(retried));
    assert_eq!(
        prometheus
            .value(&format!("increase({retries}[1h])"), Some(end))
            .await
            .map(f64::round),
        Some(retried)
    );

    // The breaker's gauge: closed, then open, then closed again, each change once.
    let states = prometheus.range(breaker, started, end).await;
    let opened = states.iter().position(|&s| s == 1.0).expect("seen open");
    let closed = states.iter().rposition(|&s| s == 0.0).expect("seen closed");
    assert!(states[..opened].iter().all(|&s| s == 0.0), "{states:?}");
    assert!(opened < closed && closed == states.len() - 1, "{states:?}");
    assert!(seen_open < end);
    for to in ["open", "half_open", "closed"] {
        assert_eq!(
            prometheus
                .value(
                    &format!("retry_breaker_transitions_total{{breaker=\"bank\",to=\"{to}\"}}"),
                    Some(end)
                )
                .await,
            Some(1.0),
            "to {to}"
        );
    }

    drop(prometheus);
    service.kill().expect("the service is killed");
}

/// A directory of the test's own, deleted when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(common::unique_name(name));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
