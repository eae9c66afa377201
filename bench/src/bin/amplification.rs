//! `cargo run --release -p retry-bench --bin amplification -- [--runs 5] [--seed 2022]
//! [--csv docs/amplification.csv] [--plot docs/amplification.png]
//! [--plot-clients docs/amplification-clients.png]`
//!
//! Marc Brooker's retry simulation ("Fixing retries with token buckets and circuit breakers",
//! 2022): 100 clients × 10 calls a second for 10 s against a server that fails a share `x` of
//! attempts, for his four strategies and this crate's budget and breaker (`retry_bench::
//! amplification`); then 10, 100 and 1,000 clients sharing 100 calls a second (his simulator's
//! `run_sims_clients` as published now) and sharing 1,000 (an earlier revision of it).

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

/// The calls a second of all clients together in the second experiment: 100 in his
/// `run_sims_clients` as published now, 1,000 in an earlier revision of it (from which
/// this experiment's first figures were taken).
const CLIENTS_RATES: [f64; 2] = [100.0, 1000.0];

/// The published rate of the second experiment, the one `--plot-clients` draws.
const PUBLISHED: f64 = 100.0;

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
    let main = (base.clients, base.total_rate);
    let first = amplification::sweep(&all, &[main], base, runs)?;
    let per_client: Vec<Strategy> = PER_CLIENT
        .into_iter()
        .filter(|s| !only_gates && (!only_budget || *s == Strategy::Budget))
        .chain(
            all.iter()
                .copied()
                .filter(|s| matches!(s, Strategy::Gate(_))),
        )
        .collect();
    let others: Vec<(u32, f64)> = CLIENTS_RATES
        .into_iter()
        .flat_map(|rate| CLIENTS.map(|n| (n, rate)))
        .filter(|&e| e != main)
        .collect();
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
        by_rate(&first, &built, main, |p| format!("{:.3}", p.load()))
    );
    println!("\nsuccess (%), {} clients\n", base.clients);
    print!(
        "{}",
        by_rate(&first, &built, main, |p| format!(
            "{:.3}",
            100.0 * p.success()
        ))
    );
    for (n, rate) in CLIENTS_RATES
        .into_iter()
        .flat_map(|rate| CLIENTS.map(|n| (n, rate)))
    {
        let strategies: Vec<Strategy> = per_client
            .iter()
            .copied()
            .filter(|s| s.is_built())
            .collect();
        println!(
            "\n{n} clients × {} calls a second ({rate} in all): load / success (%)\n",
            rate / f64::from(n)
        );
        print!(
            "{}",
            by_rate(&points, &strategies, (n, rate), |p| format!(
                "{:.3} / {:.2}",
                p.load(),
                100.0 * p.success()
            ))
        );
    }
    println!("\nhis figures beside this run's\n\n{}", versus(&points));
    println!("the aims\n\n{}", aims(&points, main));

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
        let (n, _) = main;
        let charts = [
            chart(
                &format!("Load, {n} clients"),
                "attempts per 100 calls",
                &first,
                &drawn,
                main,
                1.0,
                |p| 100.0 * p.load(),
            ),
            chart(
                &format!("Success, {n} clients"),
                "calls that succeeded (%)",
                &first,
                &drawn,
                main,
                1.0,
                |p| 100.0 * p.success(),
            ),
            chart(
                "Retries, failure rate up to 10 %",
                "retries per 100 calls",
                &first,
                &drawn,
                main,
                0.1,
                |p| 100.0 * (p.load() - 1.0),
            ),
            chart(
                "Failed calls, failure rate up to 10 %",
                "calls that failed (%)",
                &first,
                &drawn,
                main,
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
                    &format!("Load, {n} clients, {PUBLISHED} calls a second in all"),
                    "attempts per 100 calls",
                    &points,
                    &strategies,
                    (n, PUBLISHED),
                    1.0,
                    |p| 100.0 * p.load(),
                )
            })
            .collect();
        charts.extend(CLIENTS.iter().map(|&n| {
            chart(
                &format!("Success, {n} clients, {PUBLISHED} calls a second in all"),
                "calls that succeeded (%)",
                &points,
                &strategies,
                (n, PUBLISHED),
                1.0,
                |p| 100.0 * p.success(),
            )
        }));
        plot::draw_grid(&path, (2400, 1400), 2, &charts)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// An experiment: a client count and the calls a second of all of them together.
type Experiment = (u32, f64);

/// A markdown table: one row per failure rate, one column per strategy, in `experiment`.
fn by_rate(
    points: &[Point],
    strategies: &[Strategy],
    experiment: Experiment,
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
            let p = find(points, s, experiment, x);
            out.push_str(&format!(" {} |", p.map_or_else(|| "—".to_owned(), &cell)));
        }
        out.push('\n');
    }
    out
}

fn find(points: &[Point], s: Strategy, (clients, rate): Experiment, x: f64) -> Option<&Point> {
    points.iter().find(|p| {
        p.strategy == s && p.clients == clients && p.total_rate == rate && p.failure_rate == x
    })
}

/// This run beside his simulator's figures and the derived ones, at the rates the post
/// discusses, and the largest relative difference over all his rates.
fn versus(points: &[Point]) -> String {
    const SHOWN: [f64; 6] = [0.001, 0.01, 0.05, 0.1, 0.2, 0.5];
    let mut out = String::from(
        "| strategy | clients | calls a second in all | failure rate | load: his / ours | success (%): his / ours |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    let mut worst = String::new();
    let series = REFERENCE
        .iter()
        .map(|r| (r.strategy, (r.clients, r.total_rate), "his simulator"))
        .chain([
            (Strategy::ThreeRetries, (100, 1000.0), "derived"),
            (Strategy::Attribute, (100, 1000.0), "derived"),
        ]);
    for (strategy, experiment, source) in series {
        let (clients, rate) = experiment;
        let theirs = |x: f64| match source {
            "derived" => amplification::derived(strategy, x),
            _ => amplification::reference(strategy, clients, rate, x),
        };
        let (mut load_gap, mut success_gap) = (0.0f64, 0.0f64);
        for x in REFERENCE_RATES {
            let (Some((load, success)), Some(p)) =
                (theirs(x), find(points, strategy, experiment, x))
            else {
                continue;
            };
            load_gap = load_gap.max((p.load() / load - 1.0).abs());
            success_gap = success_gap.max((p.success() / success - 1.0).abs());
            if SHOWN.contains(&x) {
                out.push_str(&format!(
                    "| {} | {clients} | {rate} | {} % | {load:.3} / {:.3} | {:.2} / {:.2} |\n",
                    strategy.name(),
                    100.0 * x,
                    p.load(),
                    100.0 * success,
                    100.0 * p.success(),
                ));
            }
        }
        worst.push_str(&format!(
            "{} ({clients} clients, {rate} calls a second in all) against {source}: largest difference {:.2} % in load, {:.2} % in success\n",
            strategy.name(),
            100.0 * load_gap,
            100.0 * success_gap,
        ));
    }
    format!("{out}\n{worst}")
}

/// The aims of issue 27 for this crate's strategies, met or missed by how much, as written:
/// the loads at x = 50 % with 100 and 1,000 clients, and the success gap to three retries at
/// every failure rate up to 1 %, the rate the aim names included.
fn aims(points: &[Point], main: Experiment) -> String {
    let ours: Vec<Strategy> = [
        Strategy::ThreeRetries,
        Strategy::Budget,
        Strategy::BudgetNoReserve,
        Strategy::Breaker,
        Strategy::BudgetAndBreaker,
    ]
    .into_iter()
    .chain(retry_bench::gate::GateMode::ALL.map(Strategy::Gate))
    .filter(|&s| find(points, s, main, 0.5).is_some())
    .collect();
    let mut out = String::from("| aim |");
    for &s in &ours {
        out.push_str(&format!(" {} |", s.name()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(ours.len()));
    // Three retries keep no per-client state, so their figures do not depend on the client
    // count: the first experiment's stand for every experiment.
    let at = |s: Strategy, e: Experiment| if s == Strategy::ThreeRetries { main } else { e };
    let cell = |s: Strategy, e: Experiment, x: f64, f: &dyn Fn(&Point) -> f64| {
        find(points, s, at(s, e), x).map_or_else(|| "—".to_owned(), |p| format!("{:.3}", f(p)))
    };
    let (clients, rate) = main;
    out.push_str(&format!(
        "\n| load at x = 50 %, {clients} clients, {rate} a second (aim ≤ 1.12) |"
    ));
    for &s in &ours {
        out.push_str(&format!(" {} |", cell(s, main, 0.5, &|p| p.load())));
    }
    let mut experiments = vec![main];
    experiments.extend(CLIENTS_RATES.map(|rate| (1000, rate)));
    for e in experiments {
        for (name, below) in [("below x = 1 %", true), ("at x = 1 %", false)] {
            out.push_str(&format!(
                "\n| success gap to three retries {name}, {} clients, {} a second, points (aim ≤ 0.1) |",
                e.0, e.1
            ));
            for &s in &ours {
                let gap = FAILURE_RATES
                    .iter()
                    .filter(|&&x| if below { x < 0.01 } else { x == 0.01 })
                    .filter_map(|&x| {
                        Some(
                            100.0
                                * (find(points, Strategy::ThreeRetries, main, x)?.success()
                                    - find(points, s, at(s, e), x)?.success()),
                        )
                    })
                    .fold(f64::NEG_INFINITY, f64::max);
                out.push_str(&format!(" {gap:.3} |"));
            }
        }
    }
    for rate in CLIENTS_RATES {
        out.push_str(&format!(
            "\n| load at x = 50 %, 1,000 clients, {rate} a second (aim ≤ 1.3) |"
        ));
        for &s in &ours {
            out.push_str(&format!(" {} |", cell(s, (1000, rate), 0.5, &|p| p.load())));
        }
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
    experiment: Experiment,
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
                .filter_map(|&x| find(points, s, experiment, x))
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
