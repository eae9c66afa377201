//! What an operator's dashboard shows during the portal's long outage (scene 5 of
//! `cargo run --example portal`), drawn from the metrics themselves: the `--bin metrics` binary
//! plays the scene with the Prometheus recorder installed and scrapes `/metrics` over HTTP every
//! 100 ms, and this module reads the series it plots out of each scrape, writes them as CSV and
//! draws them.

use crate::plot::{Chart, Line};
use plotters::prelude::SeriesLabelPosition;
use std::collections::BTreeMap;

/// The series an operator watches, as read from one scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the recording began.
    pub t: f64,
    /// Calls of `check_coverage` that ended, every outcome (the customers' and the worker's).
    pub calls: f64,
    /// Of those, answered at the first try.
    pub first_try: f64,
    /// Of those, given up on and answered by the fallback (the claim saved, its check queued).
    pub fallback: f64,
    /// Retries of `check_coverage`.
    pub retries: f64,
    /// The contract service's breaker: 0 closed, 1 open, 2 half-open.
    pub breaker: f64,
    /// Coverage checks waiting in the queue.
    pub depth: f64,
    /// Checks the worker finished (its attempts with outcome `done`).
    pub done: f64,
    /// Jobs that went dead.
    pub dead: f64,
}

/// The CSV's columns, in [`Sample`]'s order.
pub const HEADER: [&str; 9] = [
    "t_s",
    "calls",
    "first_try",
    "fallback",
    "retries",
    "breaker_state",
    "queue_depth",
    "queue_done",
    "dead_letters",
];

impl Sample {
    /// The series of `scrape` (Prometheus's text format) at time `t`: a series missing from
    /// the scrape (nothing recorded yet) is 0.
    pub fn read(t: f64, scrape: &str) -> Self {
        let mut sample = Sample {
            t,
            ..Sample::default()
        };
        for line in scrape.lines().filter(|line| !line.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = parse(series);
            let label = |key: &str| labels.get(key).map(String::as_str);
            match name {
                "retry_calls_total" if label("function") == Some("check_coverage") => {
                    sample.calls += value;
                    match label("outcome") {
                        Some("first_try") => sample.first_try += value,
                        Some("fallback") => sample.fallback += value,
                        _ => {}
                    }
                }
                "retry_retries_total" if label("function") == Some("check_coverage") => {
                    sample.retries += value;
                }
                "retry_breaker_state" if label("breaker") == Some("contract") => {
                    sample.breaker = value;
                }
                "retry_queue_depth" => sample.depth += value,
                "retry_queue_attempts_total" if label("outcome") == Some("done") => {
                    sample.done += value;
                }
                "retry_queue_dead_letters_total" => sample.dead += value,
                // The gate's slot (issue 27, item 2): once the portal's check has a gate, its
                // local rejections are read here into a field of their own (a column of
                // `HEADER` and a line of the first chart), under the gate's metric name.
                _ => {}
            }
        }
        sample
    }

    fn fields(&self) -> [f64; 9] {
        [
            self.t,
            self.calls,
            self.first_try,
            self.fallback,
            self.retries,
            self.breaker,
            self.depth,
            self.done,
            self.dead,
        ]
    }
}

/// `name{a="x",b="y"}` as the name and its labels.
fn parse(series: &str) -> (&str, BTreeMap<String, String>) {
    let Some((name, rest)) = series.split_once('{') else {
        return (series, BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split("\",")
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.to_owned(), value.trim_matches('"').to_owned()))
        })
        .collect();
    (name, labels)
}

/// The samples as CSV, one row per scrape.
pub fn csv(samples: &[Sample]) -> Result<String, Box<dyn std::error::Error>> {
    let rows = samples.iter().map(|sample| {
        sample
            .fields()
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if i == 0 {
                    format!("{v:.2}")
                } else {
                    format!("{v}")
                }
            })
            .collect::<Vec<_>>()
    });
    crate::records::csv(&HEADER, rows)
}

/// The two panels: the calls, retries and give-ups; the breaker and the queue. `down` is the
/// band where the contract service was down.
pub fn charts(samples: &[Sample], down: Option<(f64, f64)>) -> Vec<Chart> {
    let line = |label: &str, value: fn(&Sample) -> f64, width: u32| Line {
        label: label.to_owned(),
        points: samples.iter().map(|s| (s.t, value(s))).collect(),
        width,
    };
    let band = down.map(|(from, to)| (from, to, "the contract service is down".to_owned()));
    vec![
        Chart {
            title: "check_coverage: calls, retries, give-ups (cumulative)".to_owned(),
            x_label: "seconds".to_owned(),
            y_label: "count since the start".to_owned(),
            lines: vec![
                line("calls (retry_calls_total)", |s| s.calls, 3),
                line("answered at the first try", |s| s.first_try, 2),
                line("gave up, fallback queued the check", |s| s.fallback, 2),
                line("retries (retry_retries_total)", |s| s.retries, 2),
            ],
            band: band.clone(),
            log_y: false,
            legend: SeriesLabelPosition::UpperLeft,
        },
        Chart {
            title: "the breaker and the queue".to_owned(),
            x_label: "seconds".to_owned(),
            y_label: "state / jobs".to_owned(),
            lines: vec![
                line(
                    "breaker state (0 closed, 1 open, 2 half-open)",
                    |s| s.breaker,
                    3,
                ),
                line("queue depth (checks waiting)", |s| s.depth, 3),
                line("checks done by the worker", |s| s.done, 2),
                line("dead letters", |s| s.dead, 2),
            ],
            band,
            log_y: false,
            legend: SeriesLabelPosition::UpperLeft,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = r#"# TYPE retry_calls_total counter
retry_calls_total{function="check_coverage",outcome="first_try"} 4
retry_calls_total{function="check_coverage",outcome="fallback",reason="breaker_open"} 6
retry_calls_total{function="check_coverage",outcome="fallback",reason="exhausted"} 0
retry_calls_total{function="transfer",outcome="first_try"} 9
retry_retries_total{function="check_coverage"} 5
retry_breaker_state{breaker="contract"} 1
retry_queue_depth{queue="coverage-checks"} 6
retry_queue_attempts_total{queue="coverage-checks",outcome="done"} 2
retry_queue_attempts_total{queue="coverage-checks",outcome="dead"} 1
retry_queue_dead_letters_total{queue="coverage-checks"} 1
"#;

    #[test]
    fn a_scrape_is_read_into_the_watched_series() {
        let sample = Sample::read(1.5, SCRAPE);
        assert_eq!(
            sample,
            Sample {
                t: 1.5,
                calls: 10.0,
                first_try: 4.0,
                fallback: 6.0,
                retries: 5.0,
                breaker: 1.0,
                depth: 6.0,
                done: 2.0,
                dead: 1.0,
            }
        );
        assert_eq!(Sample::read(0.0, ""), Sample::default());
    }

    #[test]
    fn the_csv_has_a_row_per_scrape() {
        let text = csv(&[Sample::read(0.0, ""), Sample::read(0.1, SCRAPE)]).unwrap();
        let (header, rows) = crate::records::read(&text).unwrap();
        assert_eq!(header, HEADER);
        assert_eq!(rows[1], ["0.10", "10", "4", "6", "5", "1", "6", "2", "1"]);
    }
}
