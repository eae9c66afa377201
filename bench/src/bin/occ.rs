//! `cargo run --release -p retry-bench --bin occ -- [--runs 100] [--csv docs/occ.csv]
//! [--plot docs/occ.png]`
//!
//! The optimistic-concurrency experiment of "Exponential Backoff And Jitter" (AWS Architecture
//! Blog, 2015) for 10, 20, …, 100 clients, with the pauses of `retry_runtime::Policy`.

use plotters::chart::SeriesLabelPosition;
use retry_bench::cli::Flags;
use retry_bench::occ::{self, Point, STRATEGIES};
use retry_bench::plot::{self, Chart, Line};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: occ [--runs 100] [--seed 2015] [--csv occ.csv] [--plot occ.png]";

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(&["runs", "seed", "csv", "plot"], USAGE)?;
    let runs: u32 = flags.get("runs", 100)?;
    let seed: u64 = flags.get("seed", 2015)?;
    let clients: Vec<u32> = (1..=10).map(|i| i * 10).collect();
    // results[s][i]: strategy s at clients[i].
    let results: Vec<Vec<Point>> = STRATEGIES
        .iter()
        .map(|s| {
            clients
                .iter()
                .map(|&n| occ::point(&s.policy, n, runs, seed))
                .collect()
        })
        .collect();

    println!("mean of {runs} runs per point; calls = write attempts at the server\n");
    print!(
        "{}",
        table("mean calls", &results, |p| format!("{:.0}", p.calls))
    );
    println!();
    print!(
        "{}",
        table("mean completion time (ms)", &results, |p| format!(
            "{:.0}",
            p.completion_ms
        ))
    );

    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        std::fs::write(&path, occ::csv(&results)?)?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let charts = [
            chart(
                "Work: write attempts",
                "mean calls per run",
                false,
                &results,
                |p| p.calls,
            ),
            chart(
                "Completion: last client done (log scale)",
                "mean time (ms)",
                true,
                &results,
                |p| p.completion_ms,
            ),
        ];
        plot::draw(&path, (1600, 700), &charts)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A markdown table: one row per client count, one column per strategy.
fn table(what: &str, results: &[Vec<Point>], cell: impl Fn(&Point) -> String) -> String {
    let mut out = format!("| {what} |");
    for s in &STRATEGIES {
        out.push_str(&format!(" {} |", s.name));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(STRATEGIES.len()));
    out.push('\n');
    for i in 0..results.first().map_or(0, Vec::len) {
        out.push_str(&format!("| {} clients |", results[0][i].clients));
        for points in results {
            out.push_str(&format!(" {} |", cell(&points[i])));
        }
        out.push('\n');
    }
    out
}

fn chart(
    title: &str,
    y_label: &str,
    log_y: bool,
    results: &[Vec<Point>],
    y: impl Fn(&Point) -> f64,
) -> Chart {
    Chart {
        title: title.to_owned(),
        x_label: "clients contending for one row".to_owned(),
        y_label: y_label.to_owned(),
        lines: STRATEGIES
            .iter()
            .zip(results)
            .map(|(s, points)| Line {
                label: s.name.to_owned(),
                points: points
                    .iter()
                    .map(|p| (f64::from(p.clients), y(p)))
                    .collect(),
                width: 3,
            })
            .collect(),
        band: None,
        log_y,
        legend: SeriesLabelPosition::UpperLeft,
    }
}
