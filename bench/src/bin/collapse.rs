//! `cargo run --release -p retry-bench --bin collapse -- [--runs 40] [--sweep-runs 4]
//! [--seed 2021] [--csv docs/collapse.csv] [--csv-sweep docs/collapse-sweep.csv]
//! [--plot docs/collapse.png] [--plot-sweep docs/collapse-sweep.png]`
//!
//! Marc Brooker's open-system collapse simulation (`retry_bench::collapse`): a server whose
//! latency grows with its concurrency, clients with a 3 s timeout and 3 attempts, a 5 s spike
//! from 40 to 80 requests a second at t = 20 s, and a ramp to 80 a second; then a sweep of the
//! base load, doubled for 5 s, for the metastable band. His two clients, then this crate's
//! attribute alone, with a budget, with a breaker, and with both.

use plotters::chart::SeriesLabelPosition;
use retry_bench::cli::Flags;
use retry_bench::collapse::{
    self, PEAK, Profile, REFERENCE, REFERENCE_SWEEP, REFERENCE_SWEEP_RUNS, Recovery, Series,
    Strategy, SweepPoint,
};
use retry_bench::gate::{Slots, Tuning};
use retry_bench::plot::{self, Chart, Line};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: collapse [--runs 40] [--sweep-runs 4] [--seed 2021] \
[--csv collapse.csv] [--csv-sweep collapse-sweep.csv] [--plot collapse.png] \
[--plot-sweep collapse-sweep.png] [--only-gates true] [the gate's settings: --throttling-k K \
--throttling-window S --throttling-padding P --rate-fail-fast true --aimd-initial N --aimd-min N \
--aimd-max N --aimd-timeout S --aimd-backoff R --gradient2-initial N --gradient2-min N \
--gradient2-max N --gradient2-tolerance X --gradient2-long-window N]";

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let known: Vec<&str> = [
        "runs",
        "sweep-runs",
        "seed",
        "csv",
        "csv-sweep",
        "plot",
        "plot-sweep",
        "only-gates",
    ]
    .into_iter()
    .chain(Tuning::FLAGS)
    .collect();
    let flags = Flags::parse(&known, USAGE)?;
    let (tuning, tuned) = Tuning::from_flags(&flags)?;
    let only_gates: bool = flags.get("only-gates", false)?;
    let runs: u32 = flags.get("runs", 40)?;
    let sweep_runs: u32 = flags.get("sweep-runs", 4)?;
    let seed: u64 = flags.get("seed", 2021)?;
    let all = Strategy::with_gates();
    let built: Vec<Strategy> = all
        .iter()
        .copied()
        .filter(|s| s.is_built() && (!only_gates || s.mode().is_some()))
        .collect();

    let scenarios = [("spike", Profile::SPIKE), ("ramp", Profile::RAMP)];
    let jobs: Vec<(usize, Strategy)> = (0..scenarios.len())
        .flat_map(|i| built.iter().map(move |&s| (i, s)))
        .collect();
    let results = retry_bench::virtual_time::parallel(&jobs, |&(i, s)| {
        collapse::runs_with(s, scenarios[i].1, seed, runs, &tuning)
    });
    let mut means: Vec<Vec<(Strategy, Series)>> = vec![Vec::new(); scenarios.len()];
    // Spike runs that had collapsed at t = 80 s, per strategy.
    let mut collapsed: Vec<(Strategy, usize)> = Vec::new();
    // How the spike's runs came back, each judged alone.
    let mut recoveries: Vec<(Strategy, Recovery)> = Vec::new();
    for (&(i, s), result) in jobs.iter().zip(results) {
        if let Some(series) = result? {
            if i == 0 {
                collapsed.push((s, series.iter().filter(|r| collapse::collapsed(r)).count()));
                recoveries.push((s, Recovery::of(&series)));
            }
            means[i].push((s, Series::mean(&series)));
        }
    }
    let steady_jobs: Vec<(Strategy, f64)> = built
        .iter()
        .flat_map(|&s| STEADY.map(move |rate| (s, rate)))
        .collect();
    let steady: Vec<(Strategy, f64, Series)> =
        retry_bench::virtual_time::parallel(&steady_jobs, |&(s, rate)| {
            collapse::runs_with(s, Profile::steady(rate), seed, sweep_runs, &tuning)
        })
        .into_iter()
        .zip(&steady_jobs)
        .filter_map(|(result, &(s, rate))| {
            result
                .transpose()
                .map(|runs| runs.map(|runs| (s, rate, Series::mean(&runs))))
        })
        .collect::<std::io::Result<_>>()?;
    let bases: Vec<f64> = (10..=32).map(|b| f64::from(2 * b)).collect();
    let sweep = collapse::sweep_with(&built, &bases, seed, sweep_runs, &tuning)?;

    println!(
        "server latency 1 s + 10 ms × concurrency, network Exp(100 ms) each way, timeout 3 s, \
         3 attempts; mean of {runs} runs per scenario (seeds {seed}..), goodput = answers in \
         time a second"
    );
    println!("{tuned}");
    println!("\nthe spike: 40 a second, 80 for 5 s from t = 20 s\n");
    print!("{}", spike_table(&means[0], &collapsed, &recoveries, runs));
    println!("\nthe ramp: 40 a second at t = 0, 80 at t = 25 s, 0 at t = 75 s\n");
    print!("{}", ramp_table(&means[1]));
    println!(
        "\na steady load, no spike: requests answered in time / requests that arrived, by \
         arrival, over the first 10 s (the gates' limits start at 20) / over 10–70 s (mean of \
         {sweep_runs} runs; the server can answer at most 64.3 a second in time)\n"
    );
    print!("{}", steady_table(&steady, &built));
    println!(
        "\nthe sweep: a base load doubled for 5 s at t = 20 s; runs collapsed at t = 80 s \
         (goodput over the last 10 s under half the arrivals) of {sweep_runs}\n"
    );
    print!("{}", sweep_table(&sweep, &built));
    println!("\nhis simulator beside this run\n");
    print!("{}", versus(&means, &collapsed, runs, &sweep));
    println!("\nthe aims\n");
    print!("{}", aims(&means, &recoveries, &sweep));

    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        let mut rows = collapse::csv(scenarios[0].0, &means[0])?;
        rows.extend(collapse::csv(scenarios[1].0, &means[1])?);
        std::fs::write(
            &path,
            retry_bench::records::csv(&collapse::CSV_HEADER, rows)?,
        )?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("csv-sweep")? {
        std::fs::write(&path, collapse::sweep_csv(&sweep)?)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let charts = [
            over_time(
                "The spike: goodput a second (40 a second, 80 for 5 s)",
                &means[0],
                Some((20.0, 25.0, "spike: 80 a second".to_owned())),
            ),
            over_time(
                "The ramp: goodput a second (up to 80 a second at 25 s)",
                &means[1],
                None,
            ),
        ];
        plot::draw(&path, (2200, 800), &charts)?;
        println!("wrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot-sweep")? {
        let mut lines: Vec<Line> = built
            .iter()
            .map(|&s| Line {
                label: s.name().to_owned(),
                points: sweep
                    .iter()
                    .filter(|p| p.strategy == s)
                    .map(|p| (p.base, 100.0 * p.goodput_ratio))
                    .collect(),
                width: if s.is_reference() { 2 } else { 3 },
            })
            .collect();
        plot::mark_duplicates(&mut lines);
        let chart = Chart {
            title: "A base load doubled for 5 s: goodput over the last 10 s".to_owned(),
            x_label: "base load (requests a second)".to_owned(),
            y_label: "goodput / arrivals over 70–80 s (%)".to_owned(),
            lines,
            band: Some((21.4, 64.3, "derived: both states stable".to_owned())),
            log_y: false,
            legend: SeriesLabelPosition::LowerLeft,
        };
        plot::draw(&path, (1400, 800), &[chart])?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn ratio(goodput: f64, offered: f64) -> String {
    format!("{:.0} %", 100.0 * goodput / offered.max(f64::MIN_POSITIVE))
}

fn recovery(r: Option<usize>) -> String {
    r.map_or_else(|| "not by 80 s".to_owned(), |s| format!("{s} s"))
}

/// The steady loads of the table of that name, requests a second.
const STEADY: [f64; 6] = [40.0, 50.0, 52.0, 56.0, 60.0, 64.0];

/// A run's recovery in the aims' terms: runs back to stay within 10 s, the median and the
/// slowest.
fn stays(r: &Recovery) -> String {
    format!(
        "{}/{} within 10 s; median {}, slowest {}",
        r.within_10_s,
        r.runs,
        r.median
            .map_or_else(|| "never".to_owned(), |s| format!("{s} s")),
        r.slowest
            .map_or_else(|| format!("never ({} runs)", r.never), |s| format!("{s} s")),
    )
}

fn spike_table(
    means: &[(Strategy, Series)],
    collapsed: &[(Strategy, usize)],
    recoveries: &[(Strategy, Recovery)],
    runs: u32,
) -> String {
    let mut out = String::from(
        "| strategy | goodput 10–20 s | goodput 25–35 s | back to 95 % of arrivals and staying (each run) | mean's first 5 s window at 95 % | runs collapsed at 80 s | goodput / arrivals 70–80 s | attempts per request | refused or shed, a run |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (s, m) in means {
        let offered: f64 = m.offered.iter().sum();
        let down = collapsed
            .iter()
            .find(|(x, _)| x == s)
            .map_or(0, |(_, n)| *n);
        let back = recoveries
            .iter()
            .find(|(x, _)| x == s)
            .map_or_else(|| "—".to_owned(), |(_, r)| stays(r));
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {back} | {} | {down}/{runs} | {} | {:.2} | {:.0} |\n",
            s.name(),
            Series::over(&m.goodput, 10, 20),
            Series::over(&m.goodput, 25, 35),
            recovery(collapse::recovery(m)),
            ratio(
                Series::over(&m.goodput, 70, 80),
                Series::over(&m.offered, 70, 80)
            ),
            (offered + m.retries.iter().sum::<f64>()) / offered.max(1.0),
            m.refused.iter().sum::<f64>(),
        ));
    }
    out
}

fn ramp_table(means: &[(Strategy, Series)]) -> String {
    let mut out = String::from(
        "| strategy | goodput 10–20 s | answered / arrived 10–20 s, by arrival | goodput at the peak (24–27 s) | goodput 40–70 s | arrivals 40–70 s | all answers / all requests | refused or shed, a run |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (s, m) in means {
        out.push_str(&format!(
            "| {} | {:.1} | {} | {:.1} | {:.1} | {:.1} | {} | {:.0} |\n",
            s.name(),
            Series::over(&m.goodput, 10, 20),
            ratio(
                Series::over(&m.answered, 10, 20),
                Series::over(&m.offered, 10, 20)
            ),
            Series::over(&m.goodput, PEAK.0, PEAK.1),
            Series::over(&m.goodput, 40, 70),
            Series::over(&m.offered, 40, 70),
            ratio(m.goodput.iter().sum(), m.offered.iter().sum()),
            m.refused.iter().sum::<f64>(),
        ));
    }
    out
}

fn steady_table(steady: &[(Strategy, f64, Series)], strategies: &[Strategy]) -> String {
    let mut out = String::from("| rate |");
    for s in strategies {
        out.push_str(&format!(" {} |", s.name()));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(strategies.len()));
    out.push('\n');
    for rate in STEADY {
        out.push_str(&format!("| {rate} |"));
        for &s in strategies {
            let cell = steady
                .iter()
                .find(|(x, r, _)| *x == s && *r == rate)
                .map_or_else(
                    || "—".to_owned(),
                    |(_, _, m)| {
                        let share = |from, to| {
                            ratio(
                                Series::over(&m.answered, from, to),
                                Series::over(&m.offered, from, to),
                            )
                        };
                        format!("{} / {}", share(0, 10), share(10, 70))
                    },
                );
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

fn sweep_table(sweep: &[SweepPoint], strategies: &[Strategy]) -> String {
    let mut out = String::from("| base load |");
    for s in strategies {
        out.push_str(&format!(" {} |", s.name()));
    }
    out.push_str("\n|---:|");
    out.push_str(&"---:|".repeat(strategies.len()));
    out.push('\n');
    let mut bases: Vec<f64> = sweep.iter().map(|p| p.base).collect();
    bases.sort_by(f64::total_cmp);
    bases.dedup();
    for b in bases {
        out.push_str(&format!("| {b} |"));
        for &s in strategies {
            let cell = sweep
                .iter()
                .find(|p| p.strategy == s && p.base == b)
                .map_or_else(|| "—".to_owned(), |p| format!("{}/{}", p.collapsed, p.runs));
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out.push_str("| collapses from |");
    for &s in strategies {
        let from = collapse::collapses_from(sweep, s)
            .map_or_else(|| "never".to_owned(), |b| format!("{b}"));
        out.push_str(&format!(" {from} |"));
    }
    out.push_str("\n| a run not back to 95 % to stay from |");
    for &s in strategies {
        let from = collapse::not_back_from(sweep, s)
            .map_or_else(|| "never".to_owned(), |b| format!("{b}"));
        out.push_str(&format!(" {from} |"));
    }
    out.push('\n');
    out
}

fn mean_of(means: &[(Strategy, Series)], s: Strategy) -> Option<&Series> {
    means.iter().find(|(x, _)| *x == s).map(|(_, m)| m)
}

/// A row of [`versus`]: its name, his figure, this run's, and the scenario (0 the spike, 1
/// the ramp).
type Figure<'a> = (
    &'a str,
    &'a dyn Fn(&collapse::Reference) -> String,
    &'a dyn Fn(&Series) -> String,
    usize,
);

/// His figures beside this run's, for his two clients and `#[retry]` alone (which must match
/// his plain client).
fn versus(
    means: &[Vec<(Strategy, Series)>],
    collapsed: &[(Strategy, usize)],
    runs: u32,
    sweep: &[SweepPoint],
) -> String {
    let mut out = String::from(
        "| figure | his plain client | this run's | `#[retry(max = 2, timeout = 3s)]` | his backoff and jitter | this run's |\n\
         |---|---:|---:|---:|---:|---:|\n",
    );
    let [plain, backoff] = REFERENCE;
    let ours = |s: Strategy, scenario: usize| mean_of(&means[scenario], s);
    let rows: [Figure<'_>; 5] = [
        (
            "spike: goodput 10–20 s",
            &|r| format!("{:.1}", r.before),
            &|m| format!("{:.1}", Series::over(&m.goodput, 10, 20)),
            0,
        ),
        (
            "spike: goodput 25–35 s",
            &|r| format!("{:.1}", r.after),
            &|m| format!("{:.1}", Series::over(&m.goodput, 25, 35)),
            0,
        ),
        (
            "spike: goodput / arrivals 70–80 s",
            &|r| ratio(r.end.0, r.end.1),
            &|m| {
                ratio(
                    Series::over(&m.goodput, 70, 80),
                    Series::over(&m.offered, 70, 80),
                )
            },
            0,
        ),
        (
            "spike: the mean's first 5 s window at 95 % after",
            &|r| recovery(r.recovery),
            &|m| recovery(collapse::recovery(m)),
            0,
        ),
        (
            "ramp: goodput at the peak / 40–70 s",
            &|r| format!("{:.1} / {:.1}", r.ramp.0, r.ramp.1),
            &|m| {
                format!(
                    "{:.1} / {:.1}",
                    Series::over(&m.goodput, PEAK.0, PEAK.1),
                    Series::over(&m.goodput, 40, 70)
                )
            },
            1,
        ),
    ];
    let down = |s: Strategy| {
        collapsed
            .iter()
            .find(|(x, _)| *x == s)
            .map_or_else(|| "—".to_owned(), |(_, n)| format!("{n}/{runs}"))
    };
    out.push_str(&format!(
        "| spike: runs collapsed at 80 s | {}/{} | {} | {} | {}/{} | {} |\n",
        plain.collapsed.0,
        plain.collapsed.1,
        down(Strategy::NoBackoff),
        down(Strategy::Attribute),
        backoff.collapsed.0,
        backoff.collapsed.1,
        down(Strategy::BackoffAndJitter),
    ));
    for (name, theirs, mine, scenario) in rows {
        let cell = |s: Strategy| ours(s, scenario).map_or_else(|| "—".to_owned(), mine);
        out.push_str(&format!(
            "| {name} | {} | {} | {} | {} | {} |\n",
            theirs(&plain),
            cell(Strategy::NoBackoff),
            cell(Strategy::Attribute),
            theirs(&backoff),
            cell(Strategy::BackoffAndJitter),
        ));
    }
    out.push_str("\nthe sweep, runs collapsed (his of 4 / this run's)\n\n| base load | his plain client | this run's | `#[retry]` | his backoff and jitter | this run's |\n|---:|---:|---:|---:|---:|---:|\n");
    for (base, his_plain, his_backoff) in REFERENCE_SWEEP {
        let cell = |s: Strategy| {
            sweep
                .iter()
                .find(|p| p.strategy == s && p.base == base)
                .map_or_else(|| "—".to_owned(), |p| format!("{}/{}", p.collapsed, p.runs))
        };
        out.push_str(&format!(
            "| {base} | {his_plain}/{REFERENCE_SWEEP_RUNS} | {} | {} | {his_backoff}/{REFERENCE_SWEEP_RUNS} | {} |\n",
            cell(Strategy::NoBackoff),
            cell(Strategy::Attribute),
            cell(Strategy::BackoffAndJitter),
        ));
    }
    out
}

/// The aims of issue 27 for the gate, and where each of this crate's strategies stands.
fn aims(
    means: &[Vec<(Strategy, Series)>],
    recoveries: &[(Strategy, Recovery)],
    sweep: &[SweepPoint],
) -> String {
    let mut out = String::from(
        "| strategy | back to 95 % of arrivals within 10 s of the spike's end, and staying (aim: every run) | lowest base load that collapses (aim: none below 64) | lowest base load with a run not back to stay | goodput at the ramp's peak (aim ≥ 55) |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for (s, r) in recoveries {
        if s.is_reference() {
            continue;
        }
        let peak =
            mean_of(&means[1], *s).map_or(f64::NAN, |m| Series::over(&m.goodput, PEAK.0, PEAK.1));
        let from = collapse::collapses_from(sweep, *s)
            .map_or_else(|| "none up to 64".to_owned(), |b| format!("{b}"));
        let not_back = collapse::not_back_from(sweep, *s)
            .map_or_else(|| "none up to 64".to_owned(), |b| format!("{b}"));
        out.push_str(&format!(
            "| {} | {} | {from} | {not_back} | {peak:.1} |\n",
            s.name(),
            stays(r),
        ));
    }
    out
}

fn over_time(title: &str, means: &[(Strategy, Series)], band: Option<(f64, f64, String)>) -> Chart {
    let offered = means.first().map(|(_, m)| Line {
        label: "arrivals".to_owned(),
        points: steps(&m.offered),
        width: 2,
    });
    let mut lines: Vec<Line> = offered
        .into_iter()
        .chain(means.iter().map(|(s, m)| Line {
            label: format!("goodput: {}", s.name()),
            points: steps(&m.goodput),
            width: if s.is_reference() { 2 } else { 3 },
        }))
        .collect();
    plot::mark_duplicates(&mut lines);
    Chart {
        title: title.to_owned(),
        x_label: "seconds".to_owned(),
        y_label: "requests a second".to_owned(),
        lines,
        band,
        log_y: false,
        legend: SeriesLabelPosition::UpperRight,
    }
}

/// Each second drawn as a flat step.
fn steps(per_second: &[f64]) -> Vec<(f64, f64)> {
    per_second
        .iter()
        .enumerate()
        .flat_map(|(t, &n)| [(t as f64, n), (t as f64 + 1.0, n)])
        .collect()
}
