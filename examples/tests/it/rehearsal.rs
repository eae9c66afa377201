//! The portal's rehearsal (issue 41): `claims-portal rehearse`, the storm of `cargo run --example
//! portal -- --rehearse`, with faults injected by retry-chaos into `check_coverage` while the
//! contract service answers normally. Each test runs the process (the site, the switch and the
//! breaker are statics of a process) on a fresh SQLite file and reads what it printed.
//!
//! "Apart from timings": [`story`] replaces the two times the output prints, each attempt's
//! `at 0.46 s` and the breaker's `refused for another 1997 ms`, by placeholders; everything else
//! must match byte for byte.

use crate::common::{Database, Engine};
use retry_examples::portal::ClaimId;
use retry_examples::portal::contract::record;
use std::process::Command;

/// `claims-portal rehearse --seed SEED` to its end: its stdout (the seed's line on stderr is
/// not part of the story).
async fn rehearse(test: String, seed: u64) -> String {
    let database = Database::fresh(Engine::Sqlite, &test)
        .await
        .expect("SQLite needs no server");
    let seed = seed.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_claims-portal"))
            .args(["rehearse", "--database", &database.url, "--seed", &seed])
            // The switch and the seed are the command line's here, not the environment's.
            .env_remove("RETRY_CHAOS")
            .env_remove("RETRY_CHAOS_SEED")
            .output()
            .expect("claims-portal runs")
    })
    .await
    .expect("the process is waited for");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "claims-portal rehearse failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The output with its timings replaced: ` at 0.46 s` by ` at T s`, `another 1997 ms` by
/// `another N ms`.
fn story(output: &str) -> String {
    output.lines().map(|line| untimed(line) + "\n").collect()
}

fn untimed(line: &str) -> String {
    let mut line = line.to_owned();
    for (before, after, placeholder) in [(" at ", " s", "T"), ("another ", " ms", "N")] {
        if let Some(start) = line.find(before).map(|i| i + before.len()) {
            let rest = &line[start..];
            let number = rest.trim_start_matches(' ');
            let digits = number
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(number.len());
            if digits > 0 && number[digits..].starts_with(after) {
                let end = start + (rest.len() - number.len()) + digits;
                line.replace_range(start..end, placeholder);
            }
        }
    }
    line
}

/// The figures of the line `injected: E errors and L latencies, in A attempts asked; checks
/// that reached the service: R`.
fn injected(output: &str) -> (u64, u64, u64, u64) {
    let line = output
        .lines()
        .find(|line| line.trim_start().starts_with("injected: "))
        .unwrap_or_else(|| panic!("no `injected:` line:\n{output}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|word| !word.is_empty())
        .map(|word| word.parse().expect("a count"))
        .collect();
    assert_eq!(numbers.len(), 4, "{line}");
    (numbers[0], numbers[1], numbers[2], numbers[3])
}

/// The storm's part of the output: up to the switch.
fn storm(output: &str) -> &str {
    let end = output
        .find("the faults are switched off")
        .unwrap_or_else(|| panic!("no switch:\n{output}"));
    &output[..end]
}

/// The same seed tells the same story, twice, apart from the timings; another seed another one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_tells_the_same_story() {
    let test = "the_same_seed_tells_the_same_story";
    let (first, again, other) = tokio::join!(
        rehearse(format!("{test}-a"), 42),
        rehearse(format!("{test}-b"), 42),
        rehearse(format!("{test}-c"), 2),
    );
    assert!(
        first.contains("seed 42: `--seed 42` (or RETRY_CHAOS_SEED=42) tells this story again"),
        "the seed is printed:\n{first}"
    );
    assert_eq!(story(&first), story(&again), "seed 42, twice");
    assert_ne!(story(&first), story(&other), "seeds 42 and 2");
    // Not only the seed's line: the injected faults differ.
    assert_ne!(injected(&first), injected(&other));
}

/// Seed 42's story: five failures in a row open the breaker, which refuses the next customers at
/// once; every deferred check waits in the queue (one more after each such customer), and the
/// worker drains them all once the faults are switched off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_opens_and_the_queue_fills() {
    let output = rehearse("the_breaker_opens_and_the_queue_fills".to_owned(), 42).await;
    let storm = storm(&output);
    let states: Vec<(&str, usize)> = storm
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("breaker "))
        .map(|rest| {
            let (state, queued) = rest
                .split_once("; queued checks: ")
                .unwrap_or_else(|| panic!("{rest}"));
            (state, queued.parse().expect("a count"))
        })
        .collect();
    assert_eq!(
        states,
        [
            ("closed", 0),
            ("closed", 0),
            ("closed", 0),
            ("closed", 1),
            ("open", 2),
            ("open", 3),
            ("open", 4),
            ("open", 5),
        ],
        "{output}"
    );
    // Refused at once: the breaker's own error, no pause announced after it opened.
    let after_open = &storm[storm
        .find("giving up: the circuit breaker is open")
        .unwrap_or_else(|| panic!("the breaker never refused:\n{output}"))..];
    assert_eq!(
        after_open.matches("not called: circuit open").count(),
        3,
        "{output}"
    );
    assert!(!after_open.contains("next attempt in"), "{output}");
    assert!(
        output.contains("drained: 5 done, 0 dead, 0 retried"),
        "{output}"
    );
    assert!(
        output.contains("injected after the switch: 0 errors, 0 latencies"),
        "{output}"
    );
}

/// Every injected error is counted by the site, and each is one the customers' loops met: an
/// attempt the site was asked about either got an injected error or reached the service, and
/// each injected error is announced as the service's "overloaded" (a pause, or the give-up it
/// ended with). No customer is told "not covered" but those whose claim the service's records
/// do not cover: an injected failure ends in "your details are saved", over several seeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults_are_counted_and_never_told_not_covered() {
    let test = "injected_faults_are_counted_and_never_told_not_covered";
    let seeds = [1, 3, 7, 42];
    let outputs = futures_util::future::join_all(
        seeds
            .iter()
            .map(|seed| rehearse(format!("{test}-{seed}"), *seed)),
    )
    .await;
    let mut deferred = 0;
    for (seed, output) in seeds.iter().zip(&outputs) {
        let (errors, latencies, asked, reached) = injected(output);
        assert!(errors > 0, "seed {seed}:\n{output}");
        assert_eq!(asked, errors + reached, "seed {seed}:\n{output}");
        let storm = storm(output);
        let announced = storm
            .matches("the contract service is overloaded (transient)")
            .count()
            + storm
                .matches("the contract service is overloaded; giving up")
                .count();
        assert_eq!(announced as u64, errors, "seed {seed}:\n{output}");
        let _ = latencies;
        for line in storm.lines() {
            let Some(rest) = line.trim_start().strip_prefix("Portal (") else {
                continue;
            };
            let (claim, told) = rest.split_once("): ").expect("`Portal (N): ...`");
            let claim = ClaimId(claim.parse().expect("a claim number"));
            if told.contains("not covered") {
                assert_eq!(record(claim), Some("NOT_COVERED"), "seed {seed}: {line}");
            } else if told.contains("is covered") {
                assert_eq!(record(claim), Some("COVERED"), "seed {seed}: {line}");
            } else {
                assert!(
                    told.starts_with(
                        "The coverage check is not possible right now; your details are saved"
                    ),
                    "seed {seed}: {line}"
                );
                deferred += 1;
            }
        }
    }
    assert!(deferred > 0, "no seed deferred a check");
}

/// The guide's worked example ("Rehearsing a policy in staging", retry-chaos/docs/guide.md) is
/// what the portal prints: each line of its excerpt, in order, apart from the timings (a line
/// `...` stands for lines left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guide_shows_what_the_rehearsal_prints() {
    let guide = include_str!("../../../retry-chaos/docs/guide.md");
    let command = "cargo run --example portal -- --rehearse --seed 42";
    let from = guide
        .find(command)
        .unwrap_or_else(|| panic!("the guide shows `{command}`"));
    let block = &guide[from..];
    let start = block.find("```text\n").expect("the excerpt's block") + "```text\n".len();
    let excerpt = &block[start..start + block[start..].find("```").expect("its end")];
    let output = story(&rehearse("the_guide_shows_what_the_rehearsal_prints".to_owned(), 42).await);
    let mut lines = output.lines();
    for line in excerpt.lines().filter(|line| line.trim() != "...") {
        let line = untimed(line);
        assert!(
            lines.any(|printed| printed == line),
            "the guide's line {line:?} is not printed (in this order):\n{output}"
        );
    }
}
