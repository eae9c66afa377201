//! `attempt-spans` (with `tracing`): one span per call, `retry`, and one child span per attempt,
//! `attempt`, as gRPC's tracing shows a call and its attempts. Without the feature every type
//! here is zero-sized and every method does nothing, so the loop carries no span and makes none.

/// The span of one call, made as its first attempt starts (none before: a call refused by its
/// breaker before any attempt ran has none).
#[derive(Default)]
pub(crate) struct CallSpan {
    #[cfg(feature = "attempt-spans")]
    span: Option<tracing::Span>,
}

/// The span of one attempt, entered around its body: a guard for a sync body, or what an async
/// body is instrumented with.
pub(crate) struct AttemptSpan {
    #[cfg(feature = "attempt-spans")]
    span: tracing::Span,
}

/// The future of an async attempt's body: instrumented with its span, or the body itself.
#[cfg(feature = "attempt-spans")]
pub type Body<F> = tracing::instrument::Instrumented<F>;
/// The future of an async attempt's body: instrumented with its span, or the body itself.
#[cfg(not(feature = "attempt-spans"))]
pub type Body<F> = F;

/// An `attempt` span under the call's span `call`: the attempt's function, number (from 1),
/// resends (from 0) and the pause before it, then any more fields given.
#[cfg(feature = "attempt-spans")]
macro_rules! attempt_span {
    ($call:expr, $function:expr, $retries:expr, $pause:expr $(, $($more:tt)*)?) => {
        tracing::info_span!(
            parent: $call,
            "attempt",
            function = $function,
            attempt = $retries + 1,
            resend_count = $retries,
            pause = ?std::time::Duration::from_nanos($pause),
            $($($more)*)?
        )
    };
}

impl CallSpan {
    /// The call's span, made with its first attempt.
    #[cfg(feature = "attempt-spans")]
    fn call(&mut self, function: &'static str) -> &tracing::Span {
        self.span
            .get_or_insert_with(|| tracing::info_span!("retry", function = function))
    }

    /// The span of the attempt about to start, after `retries` retries and a pause of
    /// `pause` nanoseconds; the call's span is made with the first.
    #[inline]
    pub(crate) fn attempt(
        &mut self,
        _function: &'static str,
        _retries: u32,
        _pause: u64,
    ) -> AttemptSpan {
        AttemptSpan {
            #[cfg(feature = "attempt-spans")]
            span: attempt_span!(self.call(_function), _function, _retries, _pause),
        }
    }

    /// An attempt the admission gate shed: a span of its own under the call's (made if this
    /// was the first attempt), with the fields of an attempt's and the gate's `shed` and
    /// `gate_mode`, closed at once, since the body never ran.
    #[cold]
    pub(crate) fn shed(
        &mut self,
        _function: &'static str,
        _retries: u32,
        _pause: u64,
        _rejected: &crate::Rejected,
    ) {
        #[cfg(feature = "attempt-spans")]
        let _ = attempt_span!(
            self.call(_function),
            _function,
            _retries,
            _pause,
            shed = _rejected.gate(),
            gate_mode = _rejected.mode().as_str(),
        );
    }
}

impl AttemptSpan {
    /// Entered until the guard it returns drops: around a sync body.
    #[inline]
    pub(crate) fn entered(self) -> impl Sized {
        #[cfg(feature = "attempt-spans")]
        self.span.entered()
    }

    /// `body`, entering the span on each of its polls.
    pub(crate) fn instrument<F: Future>(self, body: F) -> Body<F> {
        #[cfg(feature = "attempt-spans")]
        {
            tracing::Instrument::instrument(body, self.span)
        }
        #[cfg(not(feature = "attempt-spans"))]
        body
    }
}

// `cargo test -p retry-runtime --features attempt-spans --lib spans` (in `.ci/run`): the
// workspace's build leaves the feature off, as users do by default.
#[cfg(all(test, feature = "attempt-spans", not(loom)))]
mod tests {
    use crate::__private::{ASYNC, Shape, Unset};
    use crate::{Jitter, Policy};
    use std::collections::BTreeMap;
    use std::fmt;
    use std::ops::ControlFlow;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Event, Metadata};

    /// A span as the subscriber saw it made: its name, its parent's index, its fields.
    #[derive(Clone, Debug, PartialEq)]
    struct Made {
        name: &'static str,
        parent: Option<u64>,
        fields: BTreeMap<String, String>,
    }

    /// Records every span made, and the spans entered now (innermost last).
    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<Vec<Made>>>, Arc<Mutex<Vec<u64>>>);

    impl Spans {
        /// The span entered innermost now.
        fn current(&self) -> Option<u64> {
            self.1.lock().expect("not poisoned").last().copied()
        }
    }

    struct Fields<'a>(&'a mut BTreeMap<String, String>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
    }

    impl tracing::Subscriber for Spans {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::sometimes()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, attributes: &Attributes<'_>) -> Id {
            let mut fields = BTreeMap::new();
            attributes.record(&mut Fields(&mut fields));
            let mut made = self.0.lock().expect("not poisoned");
            made.push(Made {
                name: attributes.metadata().name(),
                parent: attributes.parent().map(Id::into_u64),
                fields,
            });
            Id::from_u64(made.len() as u64)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, id: &Id) {
            self.1.lock().expect("not poisoned").push(id.into_u64());
        }
        fn exit(&self, id: &Id) {
            let mut entered = self.1.lock().expect("not poisoned");
            assert_eq!(entered.pop(), Some(id.into_u64()), "spans exit in order");
        }
    }

    /// Runs `f` with `spans` as this thread's subscriber, one such test at a time, with every
    /// callsite's interest asked again of it first. tracing caches a callsite's interest for the
    /// whole process: a test of this binary that reaches the loop's span callsites on another
    /// thread, or another subscriber that comes and goes beside this one, could otherwise leave
    /// a callsite disabled while this test runs (it happened once in CI: an attempt span missing).
    fn captured<R>(spans: Spans, f: impl FnOnce() -> R) -> R {
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _one = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tracing::subscriber::with_default(spans, || {
            tracing::callsite::rebuild_interest_cache();
            f()
        })
    }

    fn made(name: &'static str, parent: Option<u64>, fields: &[(&str, &str)]) -> Made {
        Made {
            name,
            parent,
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn attempt(n: &str, resends: &str, pause: &str) -> Made {
        made(
            "attempt",
            Some(1),
            &[
                ("function", "check"),
                ("attempt", n),
                ("resend_count", resends),
                ("pause", pause),
            ],
        )
    }

    impl Spans {
        /// Asserts the spans of a call of `check` that made three attempts, with the pauses
        /// before them.
        fn assert_three_attempts(&self, pauses: [&str; 3]) {
            assert_eq!(
                *self.0.lock().expect("not poisoned"),
                [
                    made("retry", None, &[("function", "check")]),
                    attempt("1", "0", pauses[0]),
                    attempt("2", "1", pauses[1]),
                    attempt("3", "2", pauses[2]),
                ]
            );
        }
    }

    #[test]
    fn a_sync_call_is_one_span_with_a_child_per_attempt() {
        let spans = Spans::default();
        let policy = Policy::new()
            .max(3)
            .base(Duration::ZERO)
            .jitter(Jitter::None);
        let mut current = Vec::new();
        let subscriber = spans.clone();
        captured(subscriber, || {
            let mut state =
                Shape::<Result<u32, &str>>::new().start(&policy, "check", |_: &&str| true, Unset);
            let mut calls = 0;
            loop {
                let attempted = state.attempt(|| {
                    calls += 1;
                    current.push(spans.current());
                    if calls < 3 { Err("busy") } else { Ok(calls) }
                });
                state = match state.next(attempted) {
                    ControlFlow::Break(result) => return assert_eq!(result, Ok(3)),
                    ControlFlow::Continue(state) => state,
                };
                state.pause_blocking();
            }
        });
        spans.assert_three_attempts(["0ns", "0ns", "0ns"]);
        // Each body ran inside its attempt's span.
        assert_eq!(current, [Some(2), Some(3), Some(4)]);
    }

    #[test]
    fn an_attempt_the_gate_shed_has_a_span_that_says_so() {
        use crate::{AdmissionGate, Aimd, Rejected};
        static GATE: AdmissionGate =
            AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1)).name("stock");
        #[derive(Debug, PartialEq)]
        struct Shed;
        impl From<Rejected> for Shed {
            fn from(_: Rejected) -> Self {
                Shed
            }
        }
        let spans = Spans::default();
        let policy = Policy::new().max(3).jitter(Jitter::None);
        // Another call holds the only slot.
        let _held = GATE.admit(std::time::Instant::now()).expect("the first");
        let subscriber = spans.clone();
        captured(subscriber, || {
            let mut state = Shape::<Result<u32, Shed>>::new()
                .start(&policy, "check", |_: &Shed| false, Unset)
                .gate(&GATE);
            let attempted = state.attempt(|| unreachable!("the gate sheds it"));
            match state.next(attempted) {
                ControlFlow::Break(result) => assert_eq!(result, Err(Shed)),
                ControlFlow::Continue(_) => panic!("a shed attempt ends the call"),
            }
        });
        assert_eq!(
            *spans.0.lock().expect("not poisoned"),
            [
                made("retry", None, &[("function", "check")]),
                made(
                    "attempt",
                    Some(1),
                    &[
                        ("function", "check"),
                        ("attempt", "1"),
                        ("resend_count", "0"),
                        ("pause", "0ns"),
                        ("shed", "stock"),
                        ("gate_mode", "aimd"),
                    ]
                ),
            ]
        );
    }

    #[test]
    fn an_async_attempt_runs_in_its_span_and_carries_the_pause_before_it() {
        let spans = Spans::default();
        let policy = Policy::new()
            .max(3)
            .base(Duration::from_millis(100))
            .jitter(Jitter::None);
        let mut current = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let subscriber = spans.clone();
        captured(subscriber, || {
            runtime.block_on(async {
                let mut state = Shape::<Result<u32, &str>>::new().start(
                    &policy,
                    "check",
                    |_: &&str| true,
                    ASYNC,
                );
                let mut calls = 0;
                loop {
                    let attempted = state
                        .run(async {
                            calls += 1;
                            tokio::task::yield_now().await;
                            current.push(spans.current());
                            if calls < 3 { Err("busy") } else { Ok(calls) }
                        })
                        .await;
                    state = match state.next(attempted) {
                        ControlFlow::Break(result) => return assert_eq!(result, Ok(3)),
                        ControlFlow::Continue(state) => state,
                    };
                    state.pause().await;
                }
            })
        });
        spans.assert_three_attempts(["0ns", "100ms", "200ms"]);
        assert_eq!(current, [Some(2), Some(3), Some(4)]);
    }
}
