//! The metric tables in the docs (`retry-runtime/docs/metrics.md`, `retry-durable/docs/metrics.md`)
//! against what a scrape of `/metrics` shows: after a scenario that makes every instrument
//! record (the portal's long outage, which opens a breaker, spends a budget, queues checks and
//! drains them with one dead letter; a retry refused by an empty budget; a hedged call; a key a
//! store refuses; a door's own event), every instrument in the tables is in the scrape with the type the table gives,
//! every label of the scrape is in the table's row, and every `retry_*` series of the scrape is
//! in a table.
//!
//! The Prometheus recorder is installed for this process (its own test binary), and the scrape
//! is a real HTTP `GET /metrics` of `retry_examples::metrics`, what the payment service and the
//! portal serve with `--metrics`.

mod common;

use common::{Database, Engine};
use retry_durable::store::{Fingerprint, IdempotencyStore, MemoryStore, StoreError};
use retry_examples::metrics::Metrics;
use retry_examples::portal::outage::long_outage;
use retry_examples::portal::{ContractClient, ContractService};
use retry_runtime::{IdempotencyKey, RetryBudget, retry};
use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// A budget that pays for no retry.
static EMPTY: RetryBudget = RetryBudget::new()
    .name("empty")
    .ratio(0.0)
    .min_per_second(0);

#[retry(max = 3, base = "1ms", budget = EMPTY)]
async fn refused_by_the_budget() -> io::Result<()> {
    Err(io::ErrorKind::ConnectionReset.into())
}

/// Answers after 50 ms: a hedge starts at 5 ms.
#[retry(max = 0, hedge = "5ms")]
async fn hedged() -> io::Result<()> {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    Ok(())
}

/// One documented instrument: its type and the cell that lists its labels.
#[derive(Debug)]
struct Row {
    kind: String,
    labels: String,
    table: &'static str,
}

/// The instruments of a table: the rows whose first cell is a backquoted `retry_` name.
fn documented(table: &'static str, text: &str, rows: &mut BTreeMap<String, Row>) {
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, kind, _unit, labels, ..] = cells.as_slice() else {
            continue;
        };
        let Some(name) = name
            .strip_prefix('`')
            .and_then(|name| name.strip_suffix('`'))
            .filter(|name| name.starts_with("retry_"))
        else {
            continue;
        };
        let row = Row {
            kind: (*kind).to_owned(),
            labels: (*labels).to_owned(),
            table,
        };
        assert!(
            rows.insert(name.to_owned(), row).is_none(),
            "{name} is in two tables"
        );
    }
}

/// A scrape: each `retry_*` metric's type (from its `# TYPE` line) and the label names of its
/// samples.
fn scraped(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut metrics: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let (name, kind) = declared.split_once(' ').expect("# TYPE name kind");
            metrics.entry(name.to_owned()).or_default().0.push_str(kind);
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let series = line.split_whitespace().next().expect("a sample");
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        // A histogram's samples carry suffixes, and `le`, of Prometheus's own.
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| metrics.get(*base).is_some_and(|m| m.0 == "histogram"))
            })
            .unwrap_or(name);
        let entry = metrics.entry(base.to_owned()).or_default();
        for pair in labels
            .trim_end_matches('}')
            .split(',')
            .filter(|p| !p.is_empty())
        {
            let (label, _) = pair.split_once('=').expect("label=\"value\"");
            if label != "le" {
                entry.1.insert(label.to_owned());
            }
        }
    }
    metrics.retain(|name, _| name.starts_with("retry_"));
    metrics
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metric_tables_match_a_scrape() {
    let Some(database) = Database::fresh(Engine::Sqlite, "metrics_docs").await else {
        return;
    };
    let queue = database.queue::<sqlx::Sqlite>().await;
    let metrics = Metrics::install()
        .expect("the recorder installs")
        .observe(&queue);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!(
        "http://{}/metrics",
        listener.local_addr().expect("an address")
    );
    tokio::spawn(metrics.serve(listener));

    // The long outage: calls, retries, attempts, pauses, the breaker, the budget's tokens, the
    // contract service's store, the queue and its worker.
    let service = ContractService::start().await.expect("the service starts");
    let client = ContractClient::new(service.addr());
    long_outage(&service, &client, &queue)
        .await
        .expect("the scene plays");
    // A retry the budget refuses, a hedge, and a key the store refuses.
    assert!(refused_by_the_budget().await.is_err());
    assert!(hedged().await.is_ok());
    let store = MemoryStore::<String>::new();
    let refused = store
        .begin(&IdempotencyKey::from(""), Fingerprint::of(b""))
        .await;
    assert!(matches!(refused, Err(StoreError::InvalidKey)));
    // A door's own event (a door on the engine reports it, as the HTTP and gRPC doors do).
    retry_runtime::engine::report("a_door", retry_runtime::engine::Event::Throttled, &());

    let scrape = reqwest::get(&url)
        .await
        .expect("the scrape answers")
        .text()
        .await
        .expect("a text body");
    let scraped = scraped(&scrape);

    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut rows = BTreeMap::new();
    for table in [
        "retry-runtime/docs/metrics.md",
        "retry-durable/docs/metrics.md",
    ] {
        let text = std::fs::read_to_string(format!("{root}/{table}")).expect("the table");
        documented(table, &text, &mut rows);
    }
    assert!(rows.len() >= 15, "{rows:#?}");

    for (name, row) in &rows {
        let Some((kind, labels)) = scraped.get(name) else {
            panic!("{name} ({}) is not in the scrape:\n{scrape}", row.table);
        };
        assert_eq!(
            kind, &row.kind,
            "{name}: the scrape's type, {}'s",
            row.table
        );
        for label in labels {
            assert!(
                row.labels.contains(&format!("`{label}`")),
                "{name}: the label {label} is not in {}'s row: {}",
                row.table,
                row.labels
            );
        }
    }
    let undocumented: Vec<&String> = scraped.keys().filter(|n| !rows.contains_key(*n)).collect();
    assert!(
        undocumented.is_empty(),
        "in the scrape, in no table: {undocumented:?}"
    );
}
