//! `cargo run --release -p retry-bench --bin storm -- [--customers 1000] [--outage 5]
//! [--capacity N] [--plot docs/storm.png] [--csv docs/storm.csv]`
//!
//! 1,000 customers' checks hit a contract service that is overloaded for the first 5 s, through
//! `#[retry(max = 3, base = "1s")]` with each jitter form in turn, on tokio's paused clock.

use plotters::chart::SeriesLabelPosition;
use retry_bench::cli::Flags;
use retry_bench::plot::{self, Chart, Line};
use retry_bench::storm::{self, BUCKET, Config, Form, Outcome};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: storm [--customers 1000] [--outage 5 (seconds)] \
[--capacity CALLS_PER_100MS] [--plot storm.png] [--csv storm.csv]";

fn main() -> ExitCode {
    retry_bench::cli::exit_code(run)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let flags = Flags::parse(&["customers", "outage", "capacity", "plot", "csv"], USAGE)?;
    let outage: f64 = flags.get("outage", 5.0)?;
    let config = Config {
        customers: flags.get("customers", 1000)?,
        outage: Duration::try_from_secs_f64(outage).map_err(|e| format!("`--outage`: {e}"))?,
        capacity: flags.optional("capacity")?,
    };
    let outcomes = Form::ALL
        .into_iter()
        .map(|form| storm::run(form, config))
        .collect::<Result<Vec<_>, _>>()?;
    let capacity = config
        .capacity
        .map_or_else(|| "unlimited".to_owned(), |c| format!("{c} calls / 100 ms"));
    println!(
        "{} customers at t = 0, service overloaded for {outage} s, capacity {capacity}; \
         #[retry(max = 3, base = \"1s\", jitter = ...)]\n",
        config.customers
    );
    print!("{}", storm::table(&outcomes));
    if let Some(path) = flags.optional::<PathBuf>("csv")? {
        std::fs::write(&path, storm::csv(&outcomes))?;
        println!("\nwrote {}", path.display());
    }
    if let Some(path) = flags.optional::<PathBuf>("plot")? {
        let title = format!(
            "{} customers, service overloaded for the first {outage} s: calls per 100 ms",
            config.customers
        );
        let mut chart = chart(title, &outcomes);
        chart.band = Some((0.0, outage, "outage: every call fails".to_owned()));
        plot::draw(&path, (1600, 800), &[chart])?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn chart(title: String, outcomes: &[Outcome]) -> Chart {
    let lines = outcomes
        .iter()
        .map(|o| Line {
            label: format!("jitter = {}", o.form.name()),
            // Each bucket drawn as a flat step, so a one-bucket spike reads as a bar.
            points: o
                .calls
                .iter()
                .enumerate()
                .flat_map(|(b, &n)| {
                    let t = b as f64 * BUCKET.as_secs_f64();
                    [(t, f64::from(n)), (t + BUCKET.as_secs_f64(), f64::from(n))]
                })
                .collect(),
            width: if o.form == Form::None { 3 } else { 2 },
        })
        .collect();
    Chart {
        title,
        x_label: "seconds since the outage began".to_owned(),
        y_label: "calls to the service per 100 ms".to_owned(),
        lines,
        band: None,
        log_y: false,
        legend: SeriesLabelPosition::UpperRight,
    }
}
