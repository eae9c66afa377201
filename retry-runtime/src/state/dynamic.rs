//! The run-time face of the options: [`Settings`] and [`DynHooks`], filled at run time, so that
//! one loop type serves every configuration of a door that is configured at run time (an HTTP
//! layer, a gRPC channel), and the loop behind [`engine::drive`](crate::engine::drive).
//!
//! Each hook is a reference to a `dyn Fn` (no allocation: the door keeps the callables where
//! its call runs), behind an `Option` in its slot; the slot answers at run time whether it is
//! there, so that a call without a hook that hears the time reads no clock for it.

use super::extras::{Deciding, Extras, Guard, Shedder, Timeout};
use super::fallback::FallbackInput;
use super::hooks::Slot;
use super::options::{Classifier, Head};
use super::seam::{Failure, Next, NextCopy};
use super::{Decide, GiveUp, Hooks, LogLevel, Opts, RetryEvent, Unset};
use crate::overload::aws2026_call::Aws2026Call;
use crate::timer::Elapsed;
use crate::{
    AdmissionGate, Aws2026Standard, CircuitBreaker, CircuitOpen, Hedge, Policy, Rejected,
    RetryBudget, Verdict,
};
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

/// What a call of a door configured at run time does besides its hooks: the [`Policy`], the
/// name its events and metrics carry, and `budget`, `breaker`, `gate`, `timeout`, `nested`,
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
/// `G` says whether the door gives a [`gate`](Settings::gate): [`NoGate`] as
/// [`new`](Settings::new) makes them, so that the call's error needs no `From<Rejected>`, or
/// [`Gate`] once `gate` is called (even with `None`: a gate chosen at run time may be there),
/// and then the call's error turns a rejection into itself with `From<Rejected>`. A breaker's
/// refusal and a timed-out attempt become the error through `From<CircuitOpen>` and
/// `From<Elapsed>`, which [`drive`](crate::engine::drive) always asks.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a, G = Gate<'a>> {
    pub(crate) policy: &'a Policy,
    pub(crate) name: &'static str,
    pub(crate) budget: Option<&'a RetryBudget>,
    pub(crate) breaker: Option<&'a CircuitBreaker>,
    pub(crate) gate: G,
    pub(crate) aws: Option<&'a Aws2026Standard>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) nested_retry: bool,
    pub(crate) level: LogLevel,
    pub(crate) hedge: Option<&'a Hedge>,
}

/// The `gate` of [`Settings`] that [`new`](Settings::new) makes: none, so that the call's error
/// needs no `From<Rejected>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoGate;

/// The `gate` of [`Settings`] after [`gate`](Settings::gate): the door's
/// [`AdmissionGate`], or `None`, chosen at run time. The call's error needs `From<Rejected>`.
#[derive(Clone, Copy, Debug)]
pub struct Gate<'a>(Option<&'a AdmissionGate>);

/// What [`Settings`]' gate slot holds ([`NoGate`] or [`Gate`]): the gate, if any.
pub trait GateSlot<'a>: Copy {
    /// The gate the call asks before each attempt, if any.
    fn get(&self) -> Option<&'a AdmissionGate>;
}

/// A gate slot that can turn its gate's rejection into the call's error `E`: [`NoGate`] for any
/// error type (it rejects nothing), [`Gate`] for one with `From<Rejected>`.
#[diagnostic::on_unimplemented(
    message = "a call with `Settings::gate` needs its error type `{E}` to implement `From<Rejected>`",
    label = "the settings have a gate slot (`Settings::gate` was called), whose rejection becomes a `{E}`",
    note = "a gate chosen at run time may shed an attempt: implement `From<retry_runtime::Rejected> for {E}` (a variant that keeps the `Rejected`), or leave out `Settings::gate` if the door has no gate"
)]
pub trait GateFor<'a, E>: GateSlot<'a> {
    /// The gate, and how its rejection becomes `E`.
    fn rejection(&self) -> Option<GateAndError<'a, E>>;
}

/// A gate, and how its rejection becomes the call's error `E`.
pub(crate) type GateAndError<'a, E> = (&'a AdmissionGate, fn(Rejected) -> E);

impl<'a> GateSlot<'a> for NoGate {
    #[inline]
    fn get(&self) -> Option<&'a AdmissionGate> {
        None
    }
}

impl<'a, E> GateFor<'a, E> for NoGate {
    #[inline]
    fn rejection(&self) -> Option<GateAndError<'a, E>> {
        None
    }
}

impl<'a> GateSlot<'a> for Gate<'a> {
    #[inline]
    fn get(&self) -> Option<&'a AdmissionGate> {
        self.0
    }
}

#[diagnostic::do_not_recommend]
impl<'a, E: From<Rejected>> GateFor<'a, E> for Gate<'a> {
    #[inline]
    fn rejection(&self) -> Option<GateAndError<'a, E>> {
        self.0.map(|gate| (gate, E::from as fn(Rejected) -> E))
    }
}

impl<'a> Settings<'a, NoGate> {
    /// The settings of a call with `policy`'s timings, named `"retry"`, and every other option
    /// at its default (none).
    pub const fn new(policy: &'a Policy) -> Self {
        Settings {
            policy,
            name: "retry",
            budget: None,
            breaker: None,
            gate: NoGate,
            aws: None,
            timeout: None,
            nested_retry: false,
            level: LogLevel::Error,
            hedge: None,
        }
    }
}

impl<'a, G: Copy> Settings<'a, G> {
    /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; one it
    /// sheds fails at once with [`Rejected`] (converted into the call's error) without running,
    /// and the loop gives up
    /// ([`GiveUpReason::GateRejected`](crate::GiveUpReason::GateRejected)). Every attempt that
    /// runs reports its answer to the gate: a throttling verdict ([`Verdict::Throttled`]) as
    /// shed load, a timeout as such, anything else as handled.
    ///
    /// The settings then have a [`Gate`], with this gate or `None`, and the call's error needs
    /// `From<Rejected>`; a door without a gate leaves this out, and its error needs none.
    ///
    /// ```
    /// use retry_runtime::engine::Settings;
    /// use retry_runtime::{AdaptiveThrottling, AdmissionGate, Policy};
    ///
    /// static GATE: AdmissionGate =
    ///     AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()).name("payments");
    /// let policy = Policy::new();
    /// let settings = Settings::new(&policy).gate(Some(&GATE));
    /// # let _ = settings;
    /// ```
    pub const fn gate(self, gate: Option<&'a AdmissionGate>) -> Settings<'a, Gate<'a>> {
        Settings {
            policy: self.policy,
            name: self.name,
            budget: self.budget,
            breaker: self.breaker,
            gate: Gate(gate),
            aws: self.aws,
            timeout: self.timeout,
            nested_retry: self.nested_retry,
            level: self.level,
            hedge: self.hedge,
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

        /// `hedge = ...`: copies of an attempt that is slow, raced
        /// ([`drive_hedged`](crate::engine::drive_hedged) honours it).
        pub fn hedge(hedge: Option<&'a Hedge>) => self.hedge;
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
    /// The call's decider, if the door has one ([`decide`](DynHooks::decide)).
    pub(crate) decider: Option<&'a mut (dyn Decide<E> + Send)>,
}

impl<T, E> fmt::Debug for DynHooks<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynHooks")
            .field("on_result", &self.on_result.is_some())
            .field("notify", &self.notify.is_some())
            .field("notify_timed", &self.notify_timed)
            .field("on_give_up", &self.on_give_up.is_some())
            .field("decider", &self.decider.is_some())
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
            decider: None,
        }
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
}

/// A slot filled at run time: a hook, or none.
pub struct DynSlot<F>(Option<F>);

// Each impl is for any two lifetimes of the reference and of the callable behind it, not the one
// of the aliases: the future of a call erases them apart, and an impl for one lifetime would not
// hold for it (an async function's future is checked for `Send` with its lifetimes erased).
impl<T> Slot<T, (), Verdict> for DynSlot<&(dyn Fn(&T) -> Verdict + Sync + '_)> {
    const SET: bool = true;
    #[inline]
    fn is_set(&self) -> bool {
        self.0.is_some()
    }
    #[inline]
    fn call(&self, value: &T, _: &()) -> Option<Verdict> {
        self.0.map(|f| f(value))
    }
}

impl<T, E> FallbackInput<T, E> for DynSlot<&(dyn Fn(&T) -> Verdict + Sync + '_)> {
    type Input = Result<T, E>;
    #[inline]
    fn input(outcome: Result<T, E>) -> Result<Result<T, E>, T> {
        Ok(outcome)
    }
}

/// `notify`'s slot filled at run time, and whether it hears the time.
pub struct DynNotify<F> {
    f: Option<F>,
    timed: bool,
}

impl<T, E> Slot<Result<T, E>, RetryEvent>
    for DynNotify<&(dyn Fn(Result<&T, &E>, &RetryEvent) + Sync + '_)>
{
    const SET: bool = true;
    #[inline]
    fn is_set(&self) -> bool {
        self.f.is_some()
    }
    #[inline]
    fn is_timed(&self) -> bool {
        self.timed && self.f.is_some()
    }
    #[inline]
    fn call(&self, outcome: &Result<T, E>, event: &RetryEvent) -> Option<()> {
        self.f.map(|f| f(outcome.as_ref(), event))
    }
}

impl<T, E> Slot<Result<T, E>, GiveUp> for DynSlot<&(dyn Fn(Result<&T, &E>, &GiveUp) + Sync + '_)> {
    const SET: bool = true;
    #[inline]
    fn is_set(&self) -> bool {
        self.0.is_some()
    }
    #[inline]
    fn call(&self, outcome: &Result<T, E>, why: &GiveUp) -> Option<()> {
        self.0.map(|f| f(outcome.as_ref(), why))
    }
}

/// The classifier of a door configured at run time.
pub struct DynClassify<'a, 'b, E>(&'a (dyn Fn(&E) -> Verdict + Sync + 'b));

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

/// The options of a loop configured at run time: one type for every configuration.
pub type DynOptions<'a, T, E, S> = Opts<
    Head<DynClassify<'a, 'a, E>, S>,
    Hooks<
        DynSlot<OnResultFn<'a, T>>,
        DynNotify<NotifyFn<'a, T, E>>,
        DynSlot<GiveUpFn<'a, T, E>>,
        Unset,
    >,
    Extras<'a, E, Deciding<DynDecider<'a, E>, T, E>>,
>;

/// The decider of a door configured at run time: the door's own ([`DynHooks::decide`]), or
/// `aws2026`'s for [`Settings::aws2026`].
pub enum DynDecider<'a, E> {
    /// The door's.
    Door(&'a mut (dyn Decide<E> + Send)),
    /// `aws2026`'s, per call.
    Aws2026(Aws2026Call<'a>),
}

impl<E> Decide<E> for DynDecider<'_, E> {
    #[inline]
    fn next(&mut self, failure: &Failure<'_, E>) -> Next {
        match self {
            DynDecider::Door(decider) => decider.next(failure),
            DynDecider::Aws2026(call) => call.next(failure),
        }
    }
    #[inline]
    fn accepted(&mut self, attempts: u32) {
        match self {
            DynDecider::Door(decider) => decider.accepted(attempts),
            DynDecider::Aws2026(call) => Decide::<E>::accepted(call, attempts),
        }
    }
    #[inline]
    fn copy_failed(&mut self, failure: &Failure<'_, E>) -> NextCopy {
        match self {
            DynDecider::Door(decider) => decider.copy_failed(failure),
            DynDecider::Aws2026(call) => call.copy_failed(failure),
        }
    }
    #[inline]
    fn copy_due(&mut self, hedge: u16) -> bool {
        match self {
            DynDecider::Door(decider) => decider.copy_due(hedge),
            DynDecider::Aws2026(call) => Decide::<E>::copy_due(call, hedge),
        }
    }
}

impl<'a, T, E> DynHooks<'a, T, E> {
    /// The options of a loop with these hooks, `settings`' extras and the timer `sleeper`.
    pub(crate) fn options<S, G>(
        self,
        settings: &Settings<'a, G>,
        sleeper: S,
    ) -> DynOptions<'a, T, E, S>
    where
        E: From<Elapsed> + From<CircuitOpen>,
        G: GateFor<'a, E>,
    {
        Opts {
            head: Head {
                classify: DynClassify(self.classify),
                sleeper,
                marks: PhantomData,
            },
            hooks: Hooks {
                on_result: DynSlot(self.on_result),
                notify: DynNotify {
                    f: self.notify,
                    timed: self.notify_timed,
                },
                on_give_up: DynSlot(self.on_give_up),
                fallback: Unset,
            },
            extras: Extras {
                timeout: settings.timeout.map(|limit| Timeout::new(limit, E::from)),
                budget: settings.budget,
                breaker: settings.breaker.map(|breaker| Guard::new(breaker, E::from)),
                admission: None,
                gate: settings
                    .gate
                    .rejection()
                    .map(|(gate, error)| Shedder::new(gate, error)),
                permit: None,
                decider: Unset,
                nested_retry: settings.nested_retry,
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
