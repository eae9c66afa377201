//! `cargo run --release -p retry-bench --bin amplification -- [--runs 5] [--seed 2022]
//! [--csv docs/amplification.csv] [--plot docs/amplification.png]
//! [--plot-clients docs/amplification-clients.png]`
//!
//! Marc Brooker's retry simulation ("Fixing retries with token buckets and circuit breakers",
//! 2022): 100 clients × 10 calls a second for 10 s against a server that fails a share `x` of
//! attempts, for his four strategies and this crate's budget and breaker (`retry_bench::
//! amplification`); then 10, 100 and 1,000 clients at the same total rate.

use plotters::chart::SeriesLabelPosition;
use retry_bench::amplification::{
    self, Config, FAILURE_RATES, Point, REFERENCE, REFERENCE_RATES, Strategy,
};
use retry_bench::cli::Flags;
use retry_bench::gate::{Slots, Tuning};
use retry_bench::plot::{self, Chart, Line};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: amplification [--runs 5] [--seed 2022] [--csv amplification.csv] \
[--plot amplification.png] [--plot-clients amplification-clients.png] [--only-gates true] \
[--only-budget true] [--budget-reserve 10] \
[the gate's settings, as `collapse --help` lists them]";

/// The client counts of the post's second experiment.
const CLIENTS: [u32; 3] = [10, 100, 1000];

/// The strategies of the second experiment: those with per-client state.
const PER_CLIENT: [Strategy; 6] = [
    Strategy::TokenBucket,
    Strategy::RetryBreaker,
    Strategy::Budget,
    Strategy::BudgetNoReserve,
    Strategy::Breaker,
    Strategy::BudgetAndBreaker,
];

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let known: Vec<&str> = [
        "runs",
        "seed",
        "csv",
        "plot",
        "plot-clients",
        "only-gates",
        "only-budget",
        "budget-reserve",
    ]
    .into_iter()
    .chain(Tuning::FLAGS)
    .collect();
    let flags = Flags::parse(&known, USAGE)?;
    let (tuning, tuned) = Tuning::from_flags(&flags)?;
    let only_gates: bool = flags.get("only-gates", false)?;
    let only_budget: bool = flags.get("only-budget", false)?;
    let runs: u32 = flags.get("runs", 5)?;
    let base = Config {
        seed: flags.get("seed", Config::POST.seed)?,
        gate: tuning,
        budget_reserve: flags.get("budget-reserve", Config::POST.budget_reserve)?,
        ..Config::POST
    };
    let all: Vec<Strategy> = Strategy::with_gates()
        .into_iter()
        .filter(|s| !only_gates || s.mode().is_some() || *s == Strategy::ThreeRetries)
        .filter(|s| !only_budget || matches!(s, Strategy::Budget | Strategy::ThreeRetries))
        .collect();
    let first = amplification::sweep(&all, &[base.clients], base, runs)?;
    let per_client: Vec<Strategy> = PER_CLIENT
        .into_iter()
        .filter(|s| !only_gates && (!only_budget || *s == Strategy::Budget))
        .chain(
            all.iter()
                .copied()
                .filter(|s| matches!(s, Strategy::Gate(_))),
        )
        .collect();
    let others: Vec<u32> = CLIENTS.into_iter().filter(|&n| n != base.clients).collect();
    let second = amplification::sweep(&per_client, &others, base, runs)?;
    let mut points = first.clone();
    points.extend(second);

    let built: Vec<Strategy> = all.iter().copied().filter(|s| s.is_built()).collect();
    println!(
        "{} clients, {} calls a second in all, for {} s; sum of {runs} runs per point \
         (seeds {}..); load = attempts per call, success = calls that succeeded",
        base.clients,
        base.total_rate,
        base.duration.as_secs_f64(),
        base.seed,
    );
    println!("{tuned}");
    if base.budget_reserve != Config::POST.budget_reserve {
        println!(
            "the `budget` row: RetryBudget::new().min_per_second({}), not the default",
            base.budget_reserve
        );
    }
    println!("\nload, {} clients\n", base.clients);
    print!(
        "{}",
        by_rate(&first, &built, base.clients, |p| format!("{:.3}", p.load()))
    );
    println!("\nsuccess (%), {} clients\n", base.clients);
    print!(
        "{}",
        by_rate(&first, &built, base.clients, |p| format!(
            "{:.3}",
            100.0 * p.success()
        ))
    );
    for &n in &CLIENTS {
        let strategies: Vec<Strategy> = per_client
            .iter()
            .copied()
            .filter(|s| s.is_built())
            .collect();
        println!(
            "\n{n} clients × {} calls a second: load / success (%)\n",
            base.total_rate / f64::from(n)
        );
        print!(
            "{}",
            by_rate(&points, &strategies, n, |p| format!(
                "{:.3} / {:.2}",
                p.load(),
                100.0 * p.success()
            ))
        );
    }
    println!("\nhis figures beside this run's\n\n{}", versus(&points));
    println!("the aims\n\n{}", aims(&points, base.clients));

    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        std::fs::write(&path, amplification::csv(&points)?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        // `#[retry(max = 3)]` is drawn under "three retries": it makes the same calls.
        let drawn: Vec<Strategy> = built
            .iter()
            .copied()
            .filter(|&s| s != Strategy::Attribute)
            .collect();
        let n = base.clients;
        let charts = [
            chart(
                &format!("Load, {n} clients"),
                "attempts per 100 calls",
                &first,
                &drawn,
                n,
                1.0,
                |p| 100.0 * p.load(),
            ),
            chart(
                &format!("Success, {n} clients"),
                "calls that succeeded (%)",
                &first,
                &drawn,
                n,
                1.0,
                |p| 100.0 * p.success(),
            ),
            chart(
                "Retries, failure rate up to 10 %",
                "retries per 100 calls",
                &first,
                &drawn,
                n,
                0.1,
                |p| 100.0 * (p.load() - 1.0),
            ),
            chart(
                "Failed calls, failure rate up to 10 %",
                "calls that failed (%)",
                &first,
                &drawn,
                n,
                0.1,
                |p| 100.0 * (1.0 - p.success()),
            ),
        ];
        plot::draw_grid(&path, (1800, 1400), 2, &charts)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot-clients")? {
        let strategies: Vec<Strategy> = per_client
            .iter()
            .copied()
            .filter(|s| s.is_built())
            .collect();
        let mut charts: Vec<Chart> = CLIENTS
            .iter()
            .map(|&n| {
                chart(
                    &format!("Load, {n} clients"),
                    "attempts per 100 calls",
                    &points,
                    &strategies,
                    n,
                    1.0,
                    |p| 100.0 * p.load(),
                )
            })
            .collect();
        charts.extend(CLIENTS.iter().map(|&n| {
            chart(
                &format!("Success, {n} clients"),
                "calls that succeeded (%)",
                &points,
                &strategies,
                n,
                1.0,
                |p| 100.0 * p.success(),
            )
        }));
        plot::draw_grid(&path, (2400, 1400), 2, &charts)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A markdown table: one row per failure rate, one column per strategy, at `clients`.
fn by_rate(
    points: &[Point],
    strategies: &[Strategy],
    clients: u32,
    cell: impl Fn(&Point) -> String,
) -> String {
    let mut out = String::from("| failure rate |");
    for s in strategies {
        out.push_str(&format!(" {} |", s.name()));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(strategies.len()));
    out.push('\n');
    for x in FAILURE_RATES {
        out.push_str(&format!("| {} % |", 100.0 * x));
        for &s in strategies {
            let p = find(points, s, clients, x);
            out.push_str(&format!(" {} |", p.map_or_else(|| "—".to_owned(), &cell)));
        }
        out.push('\n');
    }
    out
}

fn find(points: &[Point], s: Strategy, clients: u32, x: f64) -> Option<&Point> {
    points
        .iter()
        .find(|p| p.strategy == s && p.clients == clients && p.failure_rate == x)
}

/// This run beside his simulator's figures and the derived ones, at the rates the post
/// discusses, and the largest relative difference over all his rates.
fn versus(points: &[Point]) -> String {
    const SHOWN: [f64; 6] = [0.001, 0.01, 0.05, 0.1, 0.2, 0.5];
    let mut out = String::from(
        "| strategy | clients | failure rate | load: his / ours | success (%): his / ours |\n\
         |---|---:|---:|---:|---:|\n",
    );
    let mut worst = String::new();
    let series = REFERENCE
        .iter()
        .map(|r| (r.strategy, r.clients, "his simulator"))
        .chain([
            (Strategy::ThreeRetries, 100, "derived"),
            (Strategy::Attribute, 100, "derived"),
        ]);
    for (strategy, clients, source) in series {
        let theirs = |x: f64| match source {
            "derived" => amplification::derived(strategy, x),
            _ => amplification::reference(strategy, clients, x),
        };
        let (mut load_gap, mut success_gap) = (0.0f64, 0.0f64);
        for x in REFERENCE_RATES {
            let (Some((load, success)), Some(p)) = (theirs(x), find(points, strategy, clients, x))
            else {
                continue;
            };
            load_gap = load_gap.max((p.load() / load - 1.0).abs());
            success_gap = success_gap.max((p.success() / success - 1.0).abs());
            if SHOWN.contains(&x) {
                out.push_str(&format!(
                    "| {} | {clients} | {} % | {load:.3} / {:.3} | {:.2} / {:.2} |\n",
                    strategy.name(),
                    100.0 * x,
                    p.load(),
                    100.0 * success,
                    100.0 * p.success(),
                ));
            }
        }
        worst.push_str(&format!(
            "{} ({clients} clients) against {source}: largest difference {:.2} % in load, {:.2} % in success\n",
            strategy.name(),
            100.0 * load_gap,
            100.0 * success_gap,
        ));
    }
    format!("{out}\n{worst}")
}

/// The aims of issue 27 for this crate's strategies, met or missed by how much.
fn aims(points: &[Point], clients: u32) -> String {
    let ours: Vec<Strategy> = [
        Strategy::ThreeRetries,
        Strategy::Budget,
        Strategy::BudgetNoReserve,
        Strategy::Breaker,
        Strategy::BudgetAndBreaker,
    ]
    .into_iter()
    .chain(retry_bench::gate::GateMode::ALL.map(Strategy::Gate))
    .filter(|&s| find(points, s, clients, 0.5).is_some())
    .collect();
    let mut out = String::from("| aim |");
    for &s in &ours {
        out.push_str(&format!(" {} |", s.name()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(ours.len()));
    let cell = |s: Strategy, n: u32, x: f64, f: &dyn Fn(&Point) -> f64| {
        find(points, s, n, x).map_or_else(|| "—".to_owned(), |p| format!("{:.3}", f(p)))
    };
    out.push_str(&format!(
        "\n| load at x = 50 %, {clients} clients (aim ≤ 1.12) |"
    ));
    for &s in &ours {
        out.push_str(&format!(" {} |", cell(s, clients, 0.5, &|p| p.load())));
    }
    out.push_str(&format!(
        "\n| largest success gap to three retries below x = 1 %, {clients} clients, points (aim ≤ 0.1) |"
    ));
    for &s in &ours {
        let gap = FAILURE_RATES
            .iter()
            .filter(|&&x| x < 0.01)
            .filter_map(|&x| {
                Some(
                    100.0
                        * (find(points, Strategy::ThreeRetries, clients, x)?.success()
                            - find(points, s, clients, x)?.success()),
                )
            })
            .fold(f64::NEG_INFINITY, f64::max);
        out.push_str(&format!(" {gap:.3} |"));
    }
    out.push_str("\n| load at x = 50 %, 1,000 clients (aim ≤ 1.3) |");
    for &s in &ours {
        // Three retries keep no per-client state, so their load does not depend on the client
        // count: the 100 clients' figure stands for it.
        let n = if s == Strategy::ThreeRetries {
            clients
        } else {
            1000
        };
        out.push_str(&format!(" {} |", cell(s, n, 0.5, &|p| p.load())));
    }
    out.push('\n');
    out
}

#[allow(clippy::too_many_arguments)]
fn chart(
    title: &str,
    y_label: &str,
    points: &[Point],
    strategies: &[Strategy],
    clients: u32,
    up_to: f64,
    y: impl Fn(&Point) -> f64,
) -> Chart {
    let mut lines: Vec<Line> = strategies
        .iter()
        .map(|&s| Line {
            label: s.name().to_owned(),
            points: FAILURE_RATES
                .iter()
                .filter(|&&x| x <= up_to)
                .filter_map(|&x| find(points, s, clients, x))
                .map(|p| (100.0 * p.failure_rate, y(p)))
                .collect(),
            width: if s.is_reference() { 2 } else { 3 },
        })
        .collect();
    plot::mark_duplicates(&mut lines);
    Chart {
        title: title.to_owned(),
        x_label: "server-side failure rate (%)".to_owned(),
        y_label: y_label.to_owned(),
        lines,
        band: None,
        log_y: false,
        legend: SeriesLabelPosition::UpperLeft,
    }
}
