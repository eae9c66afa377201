//! The run-time face of the options: [`Settings`] and [`DynHooks`], filled at run time, so that
//! one loop type serves every configuration of a door that is configured at run time (an HTTP
//! layer, a gRPC channel), and the loop behind [`engine::drive`](crate::engine::drive).
//!
//! Each hook is a reference to a `dyn Fn` (no allocation: the door keeps the callables where
//! its call runs), behind an `Option` in its slot; the slot answers at run time whether it is
//! there, so that a call without a hook that hears the time reads no clock for it.

use super::extras::{Deciding, Extras, Guard, Shedder, Timeout};
use super::fallback::{Fallback, FallbackScope};
use super::hooks::{
    GiveUpSlot, Heard, HeardFirst, Held, Slot, heard_first, heard_then_pause, told_at_once,
};
use super::observe::Sink;
use super::options::{Classifier, Head};
use super::seam::{Failure, Next, NextCopy};
use super::{Decide, GiveUp, Hooks, LogLevel, Opts, RetryEvent, Unset};
use crate::context::KeySlot;
use crate::overload::aws2026_call::Aws2026Call;
use crate::timer::Elapsed;
use crate::timer::Sleeper;
use crate::{
    AdmissionGate, Aws2026Standard, CircuitBreaker, CircuitOpen, Hedge, Policy, Rejected,
    RetryBudget, Verdict,
};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;
use std::time::Instant;

/// What a call of a door configured at run time does besides its hooks: the [`Policy`], the
/// name its events and metrics carry, and `budget`, `breaker`, `timeout`, `nested`,
/// `log_level` and `hedge`, as the attribute's options of the same names.
///
/// Borrowed for the call: a door keeps its configuration (in an `Arc`, a `static`) and makes
/// one of these per call, which costs a few words.
///
/// ```
/// use retry_runtime::engine::Settings;
/// use retry_runtime::{Policy, RetryBudget};
/// use std::time::Duration;
///
/// static BUDGET: RetryBudget = RetryBudget::new();
/// let policy = Policy::new().max(2);
/// let settings = Settings::new(&policy)
///     .name("payments")
///     .budget(Some(&BUDGET))
///     .timeout(Some(Duration::from_secs(2)));
/// # let _ = settings;
/// ```
///
/// A gate ([`AdmissionGate`]) is given with the hooks ([`DynHooks::gate`]), which know the
/// call's error type: its rejection becomes the call's error through `From<Rejected>`, asked only
/// of a door that gives one. A breaker's refusal and a timed-out attempt become the error through
/// `From<CircuitOpen>` and `From<Elapsed>`, which [`drive`](crate::engine::drive) always asks.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    pub(crate) policy: &'a Policy,
    pub(crate) name: &'static str,
    pub(crate) budget: Option<&'a RetryBudget>,
    pub(crate) breaker: Option<&'a CircuitBreaker>,
    pub(crate) aws: Option<&'a Aws2026Standard>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) nested_retry: bool,
    pub(crate) level: LogLevel,
    pub(crate) hedge: Option<&'a Hedge>,
    pub(crate) sink: DoorSink<'a>,
}

/// The door's sink in [`Settings`] ([`Settings::sink`]), if any: shown by `Debug` as whether
/// there is one (a [`Sink`] need not be `Debug`).
#[derive(Clone, Copy)]
pub(crate) struct DoorSink<'a>(pub(crate) Option<&'a (dyn Sink + Sync)>);

impl fmt::Debug for DoorSink<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

impl<'a> Settings<'a> {
    /// The settings of a call with `policy`'s timings, named `"retry"`, and every other option
    /// at its default (none).
    pub const fn new(policy: &'a Policy) -> Self {
        Settings {
            policy,
            name: "retry",
            budget: None,
            breaker: None,
            aws: None,
            timeout: None,
            nested_retry: false,
            level: LogLevel::Error,
            hedge: None,
            sink: DoorSink(None),
        }
    }

    setters! {
        /// The name the events give ([`RetryEvent::function`], [`GiveUp::function`]), and the
        /// metrics' `function` label. A `&'static str`, because the events carry it as one to
        /// the hooks and the fallback, and the metrics find the function's handles by its
        /// address. A name read at run time (from configuration) is made one, once, by
        /// [`interned`](crate::engine::interned), which keeps one copy of each distinct name.
        pub fn name(name: &'static str) => self.name;

        /// `budget = B`: retries (and hedges) draw from a shared [`RetryBudget`]; each call's first
        /// attempt deposits into it.
        pub fn budget(budget: Option<&'a RetryBudget>) => self.budget;

        /// `breaker = B`: while the [`CircuitBreaker`] is open, an attempt fails at once with
        /// [`CircuitOpen`] (converted into the call's error) without running; every attempt feeds
        /// it.
        pub fn breaker(breaker: Option<&'a CircuitBreaker>) => self.breaker;

        /// `aws2026 = AWS`: the AWS SDKs' updated standard mode decides after each failure, in
        /// place of the policy's `max` and pauses: see [`Aws2026Standard`].
        pub fn aws2026(aws: Option<&'a Aws2026Standard>) => self.aws;

        /// `timeout = limit`: each attempt is cut off after `limit` (clipped to the time left
        /// before the deadline): its future is dropped (see
        /// [`Operation`](crate::engine::Operation), "Cancellation"), and the attempt's outcome is
        /// [`Elapsed`] converted into the call's error (`E::from`), which the door's classifier
        /// judges like any other error. So whether a timed-out attempt is retried is the
        /// classifier's to say: one that answers [`Verdict::Fail`] for it (a request that may
        /// not be sent again, which may have reached the server) ends the call after that one
        /// attempt, with that error. (The attribute and the [`Retrier`](crate::Retrier), which
        /// judge errors by `on` or `Transient`, count a timed-out attempt as a transient
        /// failure without asking.)
        pub fn timeout(limit: Option<Duration>) => self.timeout;

        /// `nested = retry`: keep retrying even inside another retrying function.
        pub fn nested_retry(retry: bool) => self.nested_retry;

        /// `log_level`: the level of the one event that ends a call that failed.
        pub fn log_level(level: LogLevel) => self.level;

        /// `hedge = ...`: copies of an attempt that is slow, raced. Only
        /// [`drive_hedged`](crate::engine::drive_hedged) can make copies, and honours it; the
        /// other drivers make one attempt at a time.
        pub fn hedge(hedge: Option<&'a Hedge>) => self.hedge;
    }

    /// The door's sink: the loop reports its own events to `sink` as
    /// [`Event`](crate::engine::Event)s, once each, beside the logs and the metrics it tells
    /// itself: each retry as its pause is decided
    /// ([`Event::Retry`](crate::engine::Event::Retry)), each hedged copy it starts
    /// ([`Event::HedgedCopy`](crate::engine::Event::HedgedCopy), with
    /// [`drive_hedged`](crate::engine::drive_hedged)), each attempt the [`gate`](DynHooks::gate)
    /// sheds ([`Event::GateRejected`](crate::engine::Event::GateRejected)). A door hands its
    /// [`Counters`](crate::engine::Counters) here, and reports only its own events
    /// ([`report`](crate::engine::report)): a call, a request sent once, ... Without a sink (the
    /// default) the loop reports to none; a call of the attribute or of `retry_block!` has none.
    ///
    /// ```
    /// use retry_runtime::engine::{self, Counters, DynHooks, Settings, TokioTimer};
    /// use retry_runtime::{CircuitOpen, Elapsed, Jitter, Policy, Verdict};
    ///
    /// #[derive(Debug)]
    /// enum CallError { Busy, Timeout(Elapsed), Open(CircuitOpen) }
    /// impl From<Elapsed> for CallError { fn from(e: Elapsed) -> Self { CallError::Timeout(e) } }
    /// impl From<CircuitOpen> for CallError { fn from(o: CircuitOpen) -> Self { CallError::Open(o) } }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let counters = Counters::default();
    /// let policy = Policy::new().max(3).jitter(Jitter::None);
    /// let settings = Settings::new(&policy).name("quotes").sink(&counters);
    /// let classify = |_: &CallError| Verdict::Retry;
    /// let answer: Result<(), _> = engine::drive(
    ///     &settings,
    ///     DynHooks::new(&classify),
    ///     TokioTimer,
    ///     || async { Err(CallError::Busy) },
    /// )
    /// .await;
    /// assert!(answer.is_err());
    /// // Four attempts, three retries: each counted once, by the loop.
    /// assert_eq!(counters.retries(), 3);
    /// # }
    /// ```
    pub const fn sink(mut self, sink: &'a (dyn Sink + Sync)) -> Self {
        self.sink = DoorSink(Some(sink));
        self
    }

    /// The policy.
    pub const fn policy(&self) -> &'a Policy {
        self.policy
    }
}

/// A classifier of errors, `on = ...` at run time.
pub(crate) type ClassifyFn<'a, E> = &'a (dyn Fn(&E) -> Verdict + Sync);
/// A judge of `Ok` values, `on_result = ...` at run time.
pub(crate) type OnResultFn<'a, T> = &'a (dyn Fn(&T) -> Verdict + Sync);
/// `notify = ...` at run time: the outcome (an error, or an `Ok` that `on_result` rejected) and
/// the pause about to be taken.
pub(crate) type NotifyFn<'a, T, E> = &'a (dyn Fn(Result<&T, &E>, &RetryEvent) + Sync);
/// `on_give_up = ...` at run time: the last outcome and why the loop gave up.
pub(crate) type GiveUpFn<'a, T, E> = &'a (dyn Fn(Result<&T, &E>, &GiveUp) + Sync);

/// The hooks of a call of a door configured at run time: how its errors and `Ok` values are
/// judged, and who hears its pauses and its end, each a reference to a callable the door keeps
/// (no allocation), as the attribute's `on`, `on_result`, `notify` and `on_give_up`.
///
/// The callables are `Sync`, so that the call's future is `Send` when the door's attempts are.
///
/// ```
/// use retry_runtime::engine::DynHooks;
/// use retry_runtime::{RetryEvent, Verdict};
/// use std::io;
///
/// let classify = |error: &io::Error| Verdict::from(error.kind() == io::ErrorKind::TimedOut);
/// let notify = |outcome: Result<&u16, &io::Error>, event: &RetryEvent| {
///     eprintln!("attempt {} failed ({outcome:?}); again in {:?}", event.attempt, event.pause)
/// };
/// let hooks = DynHooks::<u16, io::Error>::new(&classify).notify(Some(&notify));
/// # let _ = hooks;
/// ```
pub struct DynHooks<'a, T, E> {
    pub(crate) classify: ClassifyFn<'a, E>,
    pub(crate) on_result: Option<OnResultFn<'a, T>>,
    pub(crate) notify: Option<NotifyFn<'a, T, E>>,
    /// `notify` hears the time since the first attempt (`RetryEvent::elapsed`).
    pub(crate) notify_timed: bool,
    pub(crate) on_give_up: Option<GiveUpFn<'a, T, E>>,
    /// An async `notify` ([`notify_async`](DynHooks::notify_async)).
    pub(crate) notify_async: Option<AsyncHookFn<'a, T, E, RetryEvent>>,
    /// An async `on_give_up` ([`on_give_up_async`](DynHooks::on_give_up_async)).
    pub(crate) give_up_async: Option<AsyncHookFn<'a, T, E, GiveUp>>,
    /// The call's decider, if the door has one ([`decide`](DynHooks::decide)).
    pub(crate) decider: Option<&'a mut (dyn Decide<E> + Send)>,
    /// The call's gate, and how its rejection becomes `E` ([`gate`](DynHooks::gate)).
    pub(crate) gate: Option<Shedder<'a, E>>,
    /// How an injected error becomes `E` ([`injectable`](DynHooks::injectable); feature
    /// `faults`).
    pub(crate) maker: crate::faults::Maker<E>,
}

impl<T, E> fmt::Debug for DynHooks<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynHooks")
            .field("on_result", &self.on_result.is_some())
            .field("notify", &self.notify.is_some())
            .field("notify_timed", &self.notify_timed)
            .field("on_give_up", &self.on_give_up.is_some())
            .field("notify_async", &self.notify_async.is_some())
            .field("on_give_up_async", &self.give_up_async.is_some())
            .field("decider", &self.decider.is_some())
            .field("gate", &self.gate.map(|shedder| shedder.gate.get_name()))
            .finish_non_exhaustive()
    }
}

impl<'a, T, E> DynHooks<'a, T, E> {
    /// Hooks that judge errors with `classify`, accept every `Ok`, and tell nobody.
    pub fn new(classify: ClassifyFn<'a, E>) -> Self {
        DynHooks {
            classify,
            on_result: None,
            notify: None,
            notify_timed: true,
            on_give_up: None,
            notify_async: None,
            give_up_async: None,
            decider: None,
            gate: None,
            maker: crate::faults::Maker::NONE,
        }
    }

    /// Fault injection (feature `faults`): an error fault injected into this door's attempts
    /// is an `E`, made by `E::from(Injected)`. Without it the door's attempts get only the
    /// injected latencies. See [`faults`](crate::faults).
    #[cfg(feature = "faults")]
    pub fn injectable(mut self) -> Self
    where
        E: From<crate::faults::Injected>,
    {
        self.maker = crate::faults::Maker::from_impl();
        self
    }

    /// How an injected error becomes `E`, if it can.
    pub(crate) fn maker(&self) -> crate::faults::Maker<E> {
        self.maker
    }

    /// `on_result = f`: an `Ok` value `f` rejects (a [`Verdict`] that retries) is a transient
    /// failure; when the loop gives up, the last one is returned.
    pub fn on_result(mut self, f: Option<OnResultFn<'a, T>>) -> Self {
        self.on_result = f;
        self
    }

    /// `notify = f`: called before each pause.
    pub fn notify(mut self, f: Option<NotifyFn<'a, T, E>>) -> Self {
        self.notify = f;
        self.notify_timed = true;
        self
    }

    /// `notify = f` for an `f` that does not read [`RetryEvent::elapsed`] (which is then zero):
    /// a counter of retries, say. The loop then reads no clock for it: a call without a deadline,
    /// a breaker or another hook that hears the time reads none.
    pub fn notify_untimed(mut self, f: Option<NotifyFn<'a, T, E>>) -> Self {
        self.notify = f;
        self.notify_timed = false;
        self
    }

    /// `on_give_up = f`: called once when the loop gives up on a failure it could have retried.
    pub fn on_give_up(mut self, f: Option<GiveUpFn<'a, T, E>>) -> Self {
        self.on_give_up = f;
        self
    }

    /// `notify = f` with an async `f`, which returns its future boxed ([`HookFuture`]): the
    /// loop awaits it before the pause it announces, inside that pause and the deadline, as
    /// the attribute's async `notify` (see
    /// [`guide::attempts`](crate::guide::attempts), "Hooks that await"). In place of a sync
    /// [`notify`](DynHooks::notify). Only [`drive`](crate::engine::drive) and
    /// [`drive_hedged`](crate::engine::drive_hedged) await it; a blocking call
    /// ([`drive_blocking`](crate::engine::drive_blocking)) cannot, and does not call it.
    pub fn notify_async(mut self, f: Option<AsyncHookFn<'a, T, E, RetryEvent>>) -> Self {
        self.notify_async = f;
        self
    }

    /// `on_give_up = f` with an async `f`: awaited before the call returns, as
    /// [`notify_async`](DynHooks::notify_async)'s (and not by a blocking call). In place of a
    /// sync [`on_give_up`](DynHooks::on_give_up).
    pub fn on_give_up_async(mut self, f: Option<AsyncHookFn<'a, T, E, GiveUp>>) -> Self {
        self.give_up_async = f;
        self
    }

    /// Whether an async hook was given, which only an async loop with the slots of
    /// [`DynAsync`] awaits.
    pub(crate) fn awaits(&self) -> bool {
        self.notify_async.is_some() || self.give_up_async.is_some()
    }

    /// The call's decider: what follows each attempt that did not end in an accepted answer is
    /// asked of `decider` in place of the policy's `max` and pauses (see [`Decide`]: the budget,
    /// the breaker, the gate, the deadline and the hooks still hold). Per call: it may keep
    /// what it learns from one attempt for the next.
    ///
    /// ```
    /// use retry_runtime::engine::{Decide, DynHooks, Failure, Next};
    /// use retry_runtime::Verdict;
    /// use std::io;
    /// use std::time::Duration;
    ///
    /// /// Three attempts, a second apart.
    /// struct Steady;
    /// impl Decide<io::Error> for Steady {
    ///     fn next(&mut self, failure: &Failure<'_, io::Error>) -> Next {
    ///         match failure.verdict.is_retry() && failure.attempt < 3 {
    ///             true => Next::Retry(Duration::from_secs(1)),
    ///             false => Next::Return,
    ///         }
    ///     }
    /// }
    ///
    /// let classify = |error: &io::Error| Verdict::from(error.kind() == io::ErrorKind::TimedOut);
    /// let mut steady = Steady;
    /// let hooks = DynHooks::<u16, io::Error>::new(&classify).decide(&mut steady);
    /// # let _ = hooks;
    /// ```
    pub fn decide(mut self, decider: &'a mut (dyn Decide<E> + Send)) -> Self {
        self.decider = Some(decider);
        self
    }

    /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; one it
    /// sheds fails at once with [`Rejected`], made the call's error with `E::from`, without
    /// running, and the loop gives up
    /// ([`GiveUpReason::GateRejected`](crate::GiveUpReason::GateRejected)). Every attempt that
    /// runs reports its answer to the gate: a throttling verdict ([`Verdict::Throttled`]) as
    /// shed load, a timeout as such, anything else as handled. `None` (a gate chosen at run
    /// time, and not chosen) asks no gate.
    ///
    /// Only a door that calls this needs `E: From<Rejected>`.
    ///
    /// ```
    /// use retry_runtime::engine::DynHooks;
    /// use retry_runtime::{AdaptiveThrottling, AdmissionGate, Rejected, Verdict};
    ///
    /// #[derive(Debug)]
    /// enum CallError { Busy, Shed(Rejected) }
    /// impl From<Rejected> for CallError { fn from(r: Rejected) -> Self { CallError::Shed(r) } }
    ///
    /// static GATE: AdmissionGate =
    ///     AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()).name("payments");
    /// let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy));
    /// let hooks = DynHooks::<u16, CallError>::new(&classify).gate(Some(&GATE));
    /// # let _ = hooks;
    /// ```
    pub fn gate(mut self, gate: Option<&'a AdmissionGate>) -> Self
    where
        E: From<Rejected>,
    {
        self.gate = gate.map(|gate| Shedder::new(gate, E::from));
        self
    }
}

/// A slot filled at run time: a reference to a hook, or none, and whether it hears the time.
/// Also the [`Retrier`](crate::Retrier)'s, whose hooks are boxed: `F` is `&Box<dyn Fn ...>`
/// there.
pub struct DynSlot<F> {
    pub(crate) f: Option<F>,
    pub(crate) timed: bool,
}

impl<F> DynSlot<F> {
    /// The slot of `f`, which hears the time if `timed`.
    pub(crate) const fn new(f: Option<F>, timed: bool) -> Self {
        DynSlot { f, timed }
    }
}

// Each impl is for any callable behind the reference, of any lifetime, not the one of the
// aliases: the future of a call erases them apart, and an impl for one lifetime would not hold
// for it (an async function's future is checked for `Send` with its lifetimes erased).
impl<T, F: Fn(&T) -> Verdict + ?Sized> Slot<T, (), Verdict> for DynSlot<&F> {
    const SET: bool = true;
    type Takes<E> = Result<T, E>;
    #[inline]
    fn takes<E>(outcome: Result<T, E>) -> Result<Result<T, E>, T> {
        Ok(outcome)
    }
    #[inline]
    fn is_set(&self) -> bool {
        self.f.is_some()
    }
    #[inline]
    fn call(&self, value: &T, _: &()) -> Option<Verdict> {
        self.f.map(|f| f(value))
    }
}

/// `notify` (`B` is [`RetryEvent`]) and `on_give_up` (`B` is [`GiveUp`]).
impl<T, E, B, F: Fn(Result<&T, &E>, &B) + ?Sized> Slot<Result<T, E>, B> for DynSlot<&F> {
    const SET: bool = true;
    type Takes<E2> = Result<Result<T, E>, E2>;
    #[inline]
    fn takes<E2>(outcome: Result<Result<T, E>, E2>) -> Result<Self::Takes<E2>, Result<T, E>> {
        Ok(outcome)
    }
    #[inline]
    fn is_set(&self) -> bool {
        self.f.is_some()
    }
    #[inline]
    fn is_timed(&self) -> bool {
        self.timed && self.f.is_some()
    }
    #[inline]
    fn call(&self, outcome: &Result<T, E>, b: &B) -> Option<()> {
        self.f.map(|f| f(outcome.as_ref(), b))
    }
}

impl<T, E, F: Fn(Result<&T, &E>, &GiveUp) + ?Sized> GiveUpSlot<T, E> for DynSlot<&F> {
    told_at_once!();
}

/// An async hook's future, boxed: what an async hook given at run time returns
/// ([`DynHooks::notify_async`], [`DynHooks::on_give_up_async`]). `Send`, so that the call's
/// future is.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// An async `notify` (`B` is [`RetryEvent`]) or `on_give_up` (`B` is [`GiveUp`]) at run time:
/// a function that returns the hook's future, boxed, which owns what it needs (an `Arc` of what
/// it shares, a copy of the event): a `'static` future, so that the call's future is `Send`
/// whatever lifetimes the door's references have.
pub type AsyncHookFn<'a, T, E, B> =
    &'a (dyn Fn(Result<&T, &E>, &B) -> HookFuture<'static> + Sync + 'a);

/// An async hook at run time, as its slot holds it: a type of its own, whose lifetime is its
/// only parameter (the `'static` of its future is written here, not in a bound, which the
/// future of a call, whose lifetimes are erased apart, could not meet).
pub struct AsyncHook<'a, T, E, B>(
    pub(crate) &'a (dyn Fn(Result<&T, &E>, &B) -> HookFuture<'static> + Sync + 'a),
);

impl<T, E, B> Clone for AsyncHook<'_, T, E, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, E, B> Copy for AsyncHook<'_, T, E, B> {}

/// A slot filled at run time with a hook that may be async: the sync one (`S`), called at
/// once, or the async one (`F`), whose future the loop awaits in the pause (or before the end).
/// A loop whose hooks may be async at run time holds the outcome across the pause, so only a
/// loop given an async hook takes these slots (`engine::drive`, `Retrier::run_async`).
pub struct DynAsync<S, F, A, B> {
    pub(crate) sync: DynSlot<S>,
    pub(crate) awaits: Option<F>,
    held: Held<A, B>,
}

impl<S, F, A, B> DynAsync<S, F, A, B> {
    /// The slot of the sync hook `sync` (which hears the time if `timed`) or the async `awaits`.
    pub(crate) fn new(sync: Option<S>, timed: bool, awaits: Option<F>) -> Self {
        DynAsync {
            sync: DynSlot::new(sync, timed),
            awaits,
            held: Held::default(),
        }
    }
}

impl<T, E, B, S> Heard<Result<T, E>, B> for DynAsync<&S, AsyncHook<'_, T, E, B>, Result<T, E>, B>
where
    S: Fn(Result<&T, &E>, &B) + ?Sized,
{
    fn hear<'s>(&'s self, a: &'s Result<T, E>, b: &'s B) -> impl Future<Output = ()> + 's {
        let future = match self.awaits {
            Some(AsyncHook(f)) => Some(f(a.as_ref(), b)),
            None => {
                self.sync.call(a, b);
                None
            }
        };
        async move {
            if let Some(future) = future {
                future.await
            }
        }
    }
    fn held(&mut self) -> &mut Option<(Result<T, E>, B)> {
        self.held.get()
    }
}

impl<T, E, B, S> Slot<Result<T, E>, B> for DynAsync<&S, AsyncHook<'_, T, E, B>, Result<T, E>, B>
where
    S: Fn(Result<&T, &E>, &B) + ?Sized,
{
    const SET: bool = true;
    const AWAITS: bool = true;
    type Takes<E2> = Result<Result<T, E>, E2>;
    fn takes<E2>(outcome: Result<Result<T, E>, E2>) -> Result<Self::Takes<E2>, Result<T, E>> {
        Ok(outcome)
    }
    fn is_set(&self) -> bool {
        self.sync.is_set() || self.awaits.is_some()
    }
    fn is_timed(&self) -> bool {
        self.sync.is_timed() || self.awaits.is_some()
    }
    fn call(&self, a: &Result<T, E>, b: &B) -> Option<()> {
        self.sync.call(a, b)
    }
    fn keep(&mut self, a: Result<T, E>, b: B) {
        match self.awaits {
            Some(_) => *self.held.get() = Some((a, b)),
            None => {
                self.sync.call(&a, &b);
            }
        }
    }
    fn pause<'s, Sl: Sleeper>(
        &'s mut self,
        sleeper: &'s Sl,
        pause: Option<Duration>,
        deadline: Option<(Instant, Duration)>,
        clock: fn() -> Instant,
    ) -> impl Future<Output = ()> + 's {
        heard_then_pause(self, sleeper, pause, deadline, clock)
    }
}

impl<T, E, S> GiveUpSlot<T, E> for DynAsync<&S, AsyncHook<'_, T, E, GiveUp>, Result<T, E>, GiveUp>
where
    S: Fn(Result<&T, &E>, &GiveUp) + ?Sized,
{
    heard_first!();
}

/// The classifier of a door configured at run time.
pub struct DynClassify<'a, 'b, E>(&'a (dyn Fn(&E) -> Verdict + Sync + 'b));

#[diagnostic::do_not_recommend] // so that a missing `Transient` reads as `Classifier` says
impl<E> Classifier<E> for DynClassify<'_, '_, E> {
    #[inline]
    fn verdict(&self, error: &E) -> Verdict {
        (self.0)(error)
    }

    /// A door's classifier judges its timed-out attempts too: its error is the door's own
    /// (made from [`Elapsed`]), and a request that may not be sent again is not resent after a
    /// timeout, which it may have outlived on the server.
    #[inline]
    fn timed_out(&self, error: &E) -> Verdict {
        (self.0)(error)
    }
}

/// The options of a loop configured at run time: one type for every configuration of sync
/// hooks (`N` and `G` the slots of `notify` and `on_give_up`; with an async hook,
/// [`DynAsyncOptions`]).
pub type DynOptions<'a, T, E, S, N = DynSlot<NotifyFn<'a, T, E>>, G = DynSlot<GiveUpFn<'a, T, E>>> =
    Opts<
        Head<DynClassify<'a, 'a, E>, S>,
        Hooks<DynSlot<OnResultFn<'a, T>>, N, G, Unset>,
        Extras<'a, E, Deciding<DynDecider<'a, E>, T, E>>,
    >;

/// The options of a loop configured at run time with an async hook.
pub type DynAsyncOptions<'a, T, E, S> = DynOptions<
    'a,
    T,
    E,
    S,
    DynAsync<NotifyFn<'a, T, E>, AsyncHook<'a, T, E, RetryEvent>, Result<T, E>, RetryEvent>,
    DynAsync<GiveUpFn<'a, T, E>, AsyncHook<'a, T, E, GiveUp>, Result<T, E>, GiveUp>,
>;

/// The decider of a door configured at run time: the door's own ([`DynHooks::decide`]), or
/// `aws2026`'s for [`Settings::aws2026`].
pub enum DynDecider<'a, E> {
    /// The door's.
    Door(&'a mut (dyn Decide<E> + Send)),
    /// `aws2026`'s, per call.
    Aws2026(Aws2026Call<'a>),
}

impl<E> DynDecider<'_, E> {
    /// The decider, whichever it is.
    #[inline]
    fn get(&mut self) -> &mut dyn Decide<E> {
        match self {
            DynDecider::Door(decider) => &mut **decider,
            DynDecider::Aws2026(call) => call,
        }
    }
}

impl<E> Decide<E> for DynDecider<'_, E> {
    fn next(&mut self, failure: &Failure<'_, E>) -> Next {
        self.get().next(failure)
    }
    fn accepted(&mut self, attempts: u32) {
        self.get().accepted(attempts);
    }
    fn copy_failed(&mut self, failure: &Failure<'_, E>) -> NextCopy {
        self.get().copy_failed(failure)
    }
    fn copy_due(&mut self, hedge: u16) -> bool {
        self.get().copy_due(hedge)
    }
}

impl<'a, T, E> DynHooks<'a, T, E> {
    /// The options of a loop with these hooks, `settings`' extras and the timer `sleeper`.
    pub(crate) fn options<S>(self, settings: &Settings<'a>, sleeper: S) -> DynOptions<'a, T, E, S>
    where
        E: From<Elapsed> + From<CircuitOpen>,
    {
        let notify = DynSlot::new(self.notify, self.notify_timed);
        let on_give_up = DynSlot::new(self.on_give_up, true);
        self.options_with(settings, sleeper, notify, on_give_up)
    }

    /// [`options`](DynHooks::options) with slots that await an async hook.
    pub(crate) fn options_async<S>(
        self,
        settings: &Settings<'a>,
        sleeper: S,
    ) -> DynAsyncOptions<'a, T, E, S>
    where
        E: From<Elapsed> + From<CircuitOpen>,
    {
        let notify = DynAsync::new(
            self.notify,
            self.notify_timed,
            self.notify_async.map(AsyncHook),
        );
        let on_give_up = DynAsync::new(self.on_give_up, true, self.give_up_async.map(AsyncHook));
        self.options_with(settings, sleeper, notify, on_give_up)
    }

    /// The options with the slots `notify` and `on_give_up`.
    fn options_with<S, N, G>(
        self,
        settings: &Settings<'a>,
        sleeper: S,
        notify: N,
        on_give_up: G,
    ) -> DynOptions<'a, T, E, S, N, G>
    where
        E: From<Elapsed> + From<CircuitOpen>,
    {
        Opts {
            head: Head {
                classify: DynClassify(self.classify),
                sleeper,
                marks: PhantomData,
            },
            hooks: Hooks {
                on_result: DynSlot::new(self.on_result, false),
                notify,
                on_give_up,
                fallback: Unset,
            },
            extras: Extras {
                timeout: settings.timeout.map(|limit| Timeout::new(limit, E::from)),
                budget: settings.budget,
                breaker: settings.breaker.map(|breaker| Guard::new(breaker, E::from)),
                gate: self.gate,
                nested_retry: settings.nested_retry,
                sink: settings.sink.0,
                ..Extras::default()
            }
            // The door's decider, else `aws2026`'s, else none: the policy decides.
            .deciding(match self.decider {
                Some(decider) => Some(DynDecider::Door(decider)),
                None => settings
                    .aws
                    .map(|aws| DynDecider::Aws2026(Aws2026Call::new(aws))),
            }),
        }
    }
}
