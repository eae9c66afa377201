//! The global switch: the API turned while calls run, and the environment (`RETRY_CHAOS`,
//! `RETRY_CHAOS_SEED`) read at run time, in child processes of this test binary. A binary of its
//! own: the global switch would turn the other tests' sites off too.

use retry_chaos::{ENV_SEED, ENV_SWITCH, Injected, Rule, Site, Switch};
use retry_runtime::{Transient, retry};
use std::process::Command;
use std::time::Duration;

#[derive(Debug)]
struct Down;

impl Transient for Down {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<Injected> for Down {
    fn from(_: Injected) -> Self {
        Down
    }
}

#[retry(max = 0)]
fn once() -> Result<(), Down> {
    Ok(())
}

#[retry(max = 0)]
async fn once_async() -> Result<(), Down> {
    Ok(())
}

/// `switch(Off)` and `switch(On)` while a task calls every 100 ms: the calls between fail none.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_global_switch_turns_every_site_while_calls_run() {
    let site = Site::new("once_async")
        .seed(1)
        .rule(Rule::error())
        .install();
    let calls = tokio::spawn(async {
        let mut failed = Vec::new();
        for _ in 0..30 {
            failed.push(once_async().await.is_err());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        failed
    });
    tokio::time::sleep(Duration::from_millis(950)).await;
    retry_chaos::switch(Switch::Off);
    assert!(!retry_chaos::enabled());
    tokio::time::sleep(Duration::from_secs(1)).await;
    retry_chaos::switch(Switch::On);
    let failed = calls.await.expect("the calls ran");
    retry_chaos::switch(Switch::FromEnv);
    site.remove();
    // Calls at 0, 0.1, ..., 2.9 s: on before 0.95 s, off until 1.95 s, on after.
    let expected: Vec<bool> = (0..30).map(|i| !(10..20).contains(&i)).collect();
    assert_eq!(failed, expected);
}

/// What the child process runs: ten calls of `once` at a site of rate 0.5 (seed from the
/// environment), printing which failed.
#[test]
#[ignore = "run in a child process by the tests below"]
fn child() {
    let _site = Site::new("once").rule(Rule::error().rate(0.5)).install();
    let failed: String = (0..10)
        .map(|_| if once().is_err() { 'x' } else { '.' })
        .collect();
    println!("failed={failed}");
}

/// Runs [`child`] with `env`; its stdout and stderr.
fn run_child(env: &[(&str, &str)]) -> (String, String) {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command.args([
        "--exact",
        "child",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    command.env_remove(ENV_SWITCH).env_remove(ENV_SEED);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().expect("the child runs");
    assert!(output.status.success(), "{output:?}");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn failed(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|line| line.split("failed=").nth(1))
        .map(str::trim)
        .expect("the child's line")
}

/// `RETRY_CHAOS=off` (or `0`, `false`) turns every site off without a rebuild; `on` or unset
/// leaves them on. The seed is printed, and `RETRY_CHAOS_SEED` replays the same faults.
#[test]
fn the_environment_switches_and_seeds_without_a_rebuild() {
    for off in ["off", "0", "false", "OFF"] {
        let (stdout, _) = run_child(&[(ENV_SWITCH, off), (ENV_SEED, "7")]);
        assert_eq!(failed(&stdout), "..........", "RETRY_CHAOS={off}");
    }
    let (on, stderr) = run_child(&[(ENV_SWITCH, "on"), (ENV_SEED, "7")]);
    assert!(
        stderr.contains("site `once` installed with seed 7"),
        "the seed is printed: {stderr}"
    );
    let (unset, _) = run_child(&[(ENV_SEED, "7")]);
    assert_eq!(
        failed(&on),
        failed(&unset),
        "unset is on, and the same seed replays"
    );
    assert!(
        failed(&on).contains('x') && failed(&on).contains('.'),
        "{on}"
    );
    // Without a seed, one is drawn and printed; the printed one replays the run.
    let (first, stderr) = run_child(&[]);
    let seed = stderr
        .split("installed with seed ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the printed seed");
    let (replayed, _) = run_child(&[(ENV_SEED, seed)]);
    assert_eq!(failed(&first), failed(&replayed));
}
