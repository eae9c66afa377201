// Every form each hook accepts, and `fallback` as a closure over the parameters: of the last
// error, or with `on_result` of the outcome.
use retry_runtime::{retry, GiveUp, RetryEvent, Verdict};
use std::io;

fn on_error(_: &io::Error, _: &RetryEvent) {}
fn on_outcome(_: Result<&u16, &io::Error>, _: &RetryEvent) {}
fn gave_up(_: &io::Error) {}
fn gave_up_why(_: &io::Error, _: &GiveUp) {}
fn gave_up_outcome(_: Result<&u16, &io::Error>, _: &GiveUp) {}
// The outcome as `Result::as_ref` gives it: one lifetime.
fn on_outcome_as_ref<'a>(_: Result<&'a u16, &'a io::Error>, _: &RetryEvent) {}
fn gave_up_outcome_as_ref<'a>(_: Result<&'a u16, &'a io::Error>, _: &GiveUp) {}
fn by_bool(status: &u16) -> bool {
    *status == 503
}
fn by_verdict(status: &u16) -> Verdict {
    if *status == 503 { Verdict::RetryNow } else { Verdict::Fail }
}
fn save(_: u32, _: io::Error, _: GiveUp) -> io::Result<u16> {
    Ok(202)
}
fn save_outcome(_: u32, _: io::Result<u16>, _: GiveUp) -> io::Result<u16> {
    Ok(202)
}

#[retry(on_result = by_bool, notify = on_error, on_give_up = gave_up, fallback = |outcome, why| save_outcome(claim, outcome, why))]
fn a(claim: u32) -> io::Result<u16> {
    Ok(claim as u16)
}

#[retry(on_result = by_verdict, notify = on_outcome, on_give_up = gave_up_why, log_level = "warn")]
fn b() -> io::Result<u16> {
    Ok(200)
}

#[retry(notify = |_: Result<&u16, &io::Error>, _: &RetryEvent| (), on_give_up = gave_up_outcome, log_level = trace)]
async fn c() -> io::Result<u16> {
    Ok(200)
}

#[retry(fallback = |e, why| async move { save(claim, e, why) })]
async fn d(claim: u32) -> io::Result<u16> {
    Ok(claim as u16)
}

#[retry(fallback = |e, why| save(claim, e, why))]
async fn e(claim: u32) -> io::Result<u16> {
    Ok(claim as u16)
}

#[retry(on_result = by_bool, notify = on_outcome_as_ref, on_give_up = gave_up_outcome_as_ref)]
async fn f() -> io::Result<u16> {
    Ok(200)
}

fn main() {
    let _ = (a(1), b(), c(), d(1), e(1), f());
}
