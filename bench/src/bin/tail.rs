//! `cargo run --release -p retry-bench --bin tail -- [--requests 5000] [--seed 2013]
//! [--csv docs/tail.csv] [--plot docs/tail.png]`
//!
//! "The Tail at Scale" (Dean and Barroso, CACM 2013) with `#[retry(hedge = ...)]`: requests
//! that fan out to 100 and to 1,000 sub-requests of a long-tailed service, without hedging,
//! hedged after 10 ms (about the service's 95th percentile) and after the observed `p95`, and
//! tower's `Hedge` middleware after its own histogram's 95th percentile, in the same run with the
//! same seed; the 99th and 99.9th percentile of request latency and the extra calls, over all
//! requests and over those after tower's first 10 s (its warm-up). See `retry_bench::tail`.

use plotters::chart::SeriesLabelPosition;
use retry_bench::cli::Flags;
use retry_bench::plot::{self, Chart, Line};
use retry_bench::tail::{self, Outcome, Strategy};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: tail [--requests 5000] [--seed 2013] [--csv tail.csv] [--plot tail.png]";

/// The percentiles the plot draws, as "nines" on its x axis: 90 is 1, 99 is 2, 99.9 is 3.
const PLOTTED: [f64; 8] = [50.0, 90.0, 95.0, 99.0, 99.5, 99.8, 99.9, 99.95];

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(&["requests", "seed", "csv", "plot"], USAGE)?;
    let requests: usize = flags.get("requests", 5000)?;
    let seed: u64 = flags.get("seed", 2013)?;

    println!("the service, from 1,000,000 draws:");
    for (p, ms) in tail::service_percentiles(seed, 1_000_000) {
        println!("  p{p}: {ms:.0} ms");
    }
    let mut outcomes = Vec::new();
    for fan_out in [100, 1000] {
        for strategy in Strategy::ALL {
            outcomes.push(tail::run(strategy, fan_out, requests, seed));
        }
    }
    println!("\n{requests} requests per row, seed {seed}\n");
    println!(
        "| fan-out | sub-requests | p50 | p99 | p99.9 | extra calls | after 10 s: requests | p99 | p99.9 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for o in &outcomes {
        println!(
            "| {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} % | {} | {:.0} ms | {:.0} ms |",
            o.fan_out,
            o.strategy.name(),
            o.percentile(50.0),
            o.percentile(99.0),
            o.percentile(99.9),
            o.extra_calls_percent(),
            o.after_warm_up.len(),
            o.percentile_after_warm_up(99.0),
            o.percentile_after_warm_up(99.9),
        );
    }
    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        std::fs::write(&path, tail::csv(&outcomes)?)?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let charts: Vec<Chart> = [100, 1000]
            .iter()
            .map(|&fan_out| chart(fan_out, &outcomes))
            .collect();
        plot::draw(&path, (1600, 700), &charts)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Request latency against its percentile, one line per strategy, for one fan-out.
fn chart(fan_out: usize, outcomes: &[Outcome]) -> Chart {
    Chart {
        title: format!("{fan_out} sub-requests per request (log scale)"),
        x_label: "percentile, in nines (1 = p90, 2 = p99, 3 = p99.9)".to_owned(),
        y_label: "request latency (ms)".to_owned(),
        lines: outcomes
            .iter()
            .filter(|o| o.fan_out == fan_out)
            .map(|o| Line {
                label: o.strategy.name().to_owned(),
                points: PLOTTED
                    .iter()
                    .map(|&p| (-(1.0 - p / 100.0).log10(), o.percentile(p)))
                    .collect(),
                width: 3,
            })
            .collect(),
        band: None,
        log_y: true,
        legend: SeriesLabelPosition::UpperLeft,
    }
}
