//! `cargo run -p retry-bench --features metrics --bin metrics -- [--plot docs/metrics.png] [--csv docs/metrics.csv]`
//!
//! The portal's long outage (scene 5 of `cargo run --example portal`) as an operator's dashboard
//! shows it: the portal's `/metrics` (the Prometheus recorder, `retry_examples::metrics`) is
//! scraped over HTTP every 100 ms while a second of healthy coverage checks, the scene, and a
//! second after it play, and the series an operator watches (calls, retries, give-ups, the
//! breaker's state, the queue's depth) are written as CSV and drawn. About six seconds; the
//! queue is a SQLite file in the temp dir.

use retry_bench::cli::{self, Flags};
use retry_bench::outage::{self, Sample};
use retry_bench::plot;
use retry_durable::queue::Queue;
use retry_examples::metrics::Metrics;
use retry_examples::portal::coverage::check_coverage;
use retry_examples::portal::later;
use retry_examples::portal::outage::long_outage;
use retry_examples::portal::story::scene;
use retry_examples::portal::{Claim, ContractClient, ContractService};
use retry_runtime::IdempotencyKey;
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: metrics [--plot metrics.png] [--csv metrics.csv]";

/// How often `/metrics` is scraped.
const EVERY: Duration = Duration::from_millis(100);

fn main() -> ExitCode {
    cli::exit_code(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
            .block_on(run())
    })
}

async fn run() -> Result<(), Box<dyn Error>> {
    let flags = Flags::parse(&["plot", "csv"], USAGE)?;
    let dir = std::env::temp_dir().join(format!("retry-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let queue =
        Queue::<sqlx::Sqlite>::open(&dir.join("portal.db").display().to_string(), later::QUEUE)
            .await?;
    later::migrate(&queue).await?;
    let metrics = Metrics::install()?.observe(&queue);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/metrics", listener.local_addr()?);
    tokio::spawn(metrics.serve(listener));

    let start = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let scraper = tokio::spawn(scrape(url, start, Arc::clone(&samples)));

    let service = ContractService::start().await?;
    let client = ContractClient::new(service.addr());
    scene("-", "a second of healthy coverage checks");
    for claim in [4719, 4720, 4721, 4722] {
        let claim = Claim::new(claim, "customer@example.com");
        check_coverage(&client, &queue, &claim, &IdempotencyKey::new()).await?;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let down = start.elapsed().as_secs_f64();
    scene(
        "5",
        "a long outage: the breaker opens, and the checks wait in the queue",
    );
    long_outage(&service, &client, &queue).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    scraper.abort();
    let samples = samples
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let _ = std::fs::remove_dir_all(&dir);

    // The scene brings the service back right after the last customer's call gave up.
    let back = samples
        .iter()
        .find(|s| s.t > down && s.fallback >= 6.0)
        .map(|s| s.t);
    let last = samples.last().copied().unwrap_or_default();
    println!(
        "\n{} scrapes over {:.1} s: {} calls, {} retries, {} given up to the fallback, {} checks \
         done by the worker, {} dead",
        samples.len(),
        last.t,
        last.calls,
        last.retries,
        last.fallback,
        last.done,
        last.dead
    );
    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        std::fs::write(&path, outage::csv(&samples)?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let charts = outage::charts(&samples, back.map(|back| (down, back)));
        plot::draw(&path, (2100, 800), &charts)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Scrapes `url` every [`EVERY`] until aborted, reading each scrape into a [`Sample`].
async fn scrape(url: String, start: Instant, samples: Arc<Mutex<Vec<Sample>>>) {
    let http = reqwest::Client::new();
    let mut every = tokio::time::interval(EVERY);
    loop {
        every.tick().await;
        let t = start.elapsed().as_secs_f64();
        let Ok(response) = http.get(&url).send().await else {
            continue;
        };
        let Ok(text) = response.text().await else {
            continue;
        };
        samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Sample::read(t, &text));
    }
}
