//! Each injected fault in the logs: one `INFO` event with the function, the attempt, the fault
//! and `injected = true`, told apart from the real failure's "attempt failed; retrying". A binary
//! of its own: tracing's callsites met by other tests' threads at the same time kept the
//! interest they were given without this test's subscriber, and the event went unseen.

use retry_chaos::{Attempts, Injected, Rule, Site};
use retry_runtime::{Transient, attempt, retry};
use std::fmt;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::subscriber::Interest;

#[derive(Debug, PartialEq)]
enum CallError {
    Unavailable,
    Injected(u32),
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<Injected> for CallError {
    fn from(injected: Injected) -> Self {
        CallError::Injected(injected.attempt())
    }
}

/// Every event, as `LEVEL message field=value ...`.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0.insert_str(0, &format!("{value:?}"));
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl tracing::Subscriber for Capture {
    // Asked again at every event: a callsite first met on another test's thread, while this
    // subscriber was not in place, would otherwise keep the interest it was given then.
    fn register_callsite(&self, _: &'static tracing::Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        let entry = format!("{} {}", event.metadata().level(), line.0);
        self.0.lock().expect("not poisoned").push(entry);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn logged() -> Result<u32, CallError> {
    match attempt().number() {
        1 => Err(CallError::Unavailable),
        n => Ok(n),
    }
}

#[test]
fn an_injected_fault_is_an_info_event_that_says_it_was_injected() {
    let site = Site::new("logged")
        .seed(51)
        .rule(Rule::error().attempts(Attempts::Only(2)))
        .install();
    let capture = Capture::default();
    let answer = tracing::subscriber::with_default(capture.clone(), logged);
    site.remove();
    assert_eq!(answer, Ok(3));
    let lines = capture.0.lock().expect("not poisoned").clone();
    let injected: Vec<&String> = lines.iter().filter(|l| l.contains("injected")).collect();
    assert_eq!(
        injected,
        [&"INFO a fault was injected into the attempt (a rehearsal, not a real failure) function=\"logged\" attempt=2 fault=Error injected=true".to_owned()],
        "{lines:#?}"
    );
    // The two failures are also the loop's own events: one real, one injected.
    let retrying = lines
        .iter()
        .filter(|l| l.starts_with("INFO attempt failed; retrying"))
        .count();
    assert_eq!(retrying, 2, "{lines:#?}");
}
