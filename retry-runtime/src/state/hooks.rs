//! The hooks of a loop (`on`, `on_result`, `notify`, `on_give_up`): each user-supplied callable
//! as a [`Hook`] in its slot, and [`Hooks`], which holds them all and the fallback as one slot
//! of the options. The forms the hooks accept are the public [`hooks`](crate::hooks)' traits.
//!
//! A hook that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing. The
//! builders that fill the slots store what they are given and do nothing else.

use super::fallback::{Fallback, FallbackScope, IntoFinish};
use super::observe::{Panics, Sink, contained_future, made};
use super::{GiveUp, Pause, RetryEvent, Unset};
use crate::Verdict;
use crate::context::KeySlot;
use crate::hooks::Hears;
pub use crate::hooks::{ErrorForm, GiveUpHook, IntoVerdict, NotifyHook, OutcomeForm};
use crate::timer::Sleeper;
use std::future::{Future, poll_fn};
use std::marker::PhantomData;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

/// A callable the user named (`on`, `on_result`, `notify`, `on_give_up`), with the pointer that
/// calls it with what the loop hands over (`&A`, and `&B` for a hook that hears two things).
///
/// The pointer is made where the callable's bound is checked (in `start` and the builders), so
/// the loop calls it without a bound of its own, and the pointer can adapt the user's form to
/// the loop's.
///
/// `TIMED`: whether the hook hears the time since the first attempt started, for which the loop
/// reads the clock; all do but `on_give_up = f` with `f: Fn(&E)`.
pub struct Hook<F, A, B = (), R = (), const TIMED: bool = true> {
    f: F,
    call: fn(&F, &A, &B) -> R,
}

impl<F, A, B, R, const TIMED: bool> Hook<F, A, B, R, TIMED> {
    pub(crate) fn new(f: F, call: fn(&F, &A, &B) -> R) -> Self {
        Hook { f, call }
    }

    pub(crate) fn call(&self, a: &A, b: &B) -> R {
        (self.call)(&self.f, a, b)
    }
}

/// The classifier: the error, and its verdict.
pub(crate) type Classify<C, E> = Hook<C, E, (), Verdict>;
/// `on_result = f`: an `Ok` value, and whether to retry it after all.
pub(crate) type OnResult<F, T> = Hook<F, T, (), Verdict>;

/// An async hook (`notify`, `on_give_up`) of the form `M`: what it hears is kept here until the
/// loop awaits it (before the pause it announces, or before the call returns).
pub struct Awaited<F, M, A, B> {
    f: F,
    held: Held<A, B>,
    form: PhantomData<fn() -> M>,
}

impl<F, M, A, B> Awaited<F, M, A, B> {
    pub(crate) fn new(f: F) -> Self {
        Awaited {
            f,
            held: Held::default(),
            form: PhantomData,
        }
    }
}

/// A hook's slot: [`Unset`], or a [`Hook`] that hears `&A` and `&B` and answers `R`.
pub trait Slot<A, B = (), R = ()> {
    /// Whether a hook is there. A constant, so that what only a hook would hear (the
    /// [`RetryEvent`], the elapsed time) is made only when one is.
    const SET: bool;
    /// Whether the hook hears the time since the first attempt started, for which the loop
    /// reads the clock as the call starts.
    const TIMED: bool = Self::SET;
    /// Whether a hook is there, for a slot filled at run time; [`SET`](Slot::SET) for one
    /// filled by a builder.
    fn is_set(&self) -> bool {
        Self::SET
    }
    /// Whether a hook that hears the time is there (at run time).
    fn is_timed(&self) -> bool {
        Self::TIMED && self.is_set()
    }
    /// Calls the hook, if there is one.
    fn call(&self, a: &A, b: &B) -> Option<R>;
    /// Whether the hook is async: the loop keeps what it hears ([`keep`](Slot::keep)) and
    /// awaits it later.
    const AWAITS: bool = false;
    /// Tells the hook, which keeps what it hears if it is async.
    #[inline]
    fn keep(&mut self, a: A, b: B) {
        self.call(&a, &b);
    }
    /// The pause of an async loop (`pause`, when it is slept), after an async hook that heard
    /// it is awaited, bounded by the deadline (`deadline`: when the first attempt started, and
    /// the deadline): see [`Retry::pause`](super::Retry::pause). A panic of the hook is
    /// contained and reported to `panics`.
    #[inline]
    fn pause<'s, S: Sleeper>(
        &'s mut self,
        sleeper: &'s S,
        pause: Option<Duration>,
        deadline: Option<(Instant, Duration)>,
        clock: fn() -> Instant,
        panics: Panics<'s>,
    ) -> impl Future<Output = ()> + 's {
        let _ = (deadline, clock, panics);
        Pause(pause.map(|pause| Box::pin(sleeper.sleep(pause))))
    }
    /// As the `on_result` slot (`A` is `T`), what the fallback takes: the error `E` when it is
    /// empty ([`Unset`]), since only an error can end the loop then; with a hook, the outcome
    /// `Result<T, E>`, since a rejected `Ok` can end it too, and a fallback never misses the
    /// end of a loop.
    type Takes<E>;
    /// The outcome the loop gave up on, as what the fallback takes; the `Ok` value back if that
    /// cannot hold it (an empty `on_result`, where no `Ok` ends the loop).
    fn takes<E>(outcome: Result<A, E>) -> Result<Self::Takes<E>, A>;
}

impl<A, B, R> Slot<A, B, R> for Unset {
    const SET: bool = false;
    type Takes<E> = E;
    fn call(&self, _: &A, _: &B) -> Option<R> {
        None
    }
    fn takes<E>(outcome: Result<A, E>) -> Result<E, A> {
        match outcome {
            Err(error) => Ok(error),
            Ok(value) => Err(value),
        }
    }
}

impl<F, A, B, R, const TIMED: bool> Slot<A, B, R> for Hook<F, A, B, R, TIMED> {
    const SET: bool = true;
    const TIMED: bool = TIMED;
    type Takes<E> = Result<A, E>;
    fn call(&self, a: &A, b: &B) -> Option<R> {
        Some(Hook::call(self, a, b))
    }
    fn takes<E>(outcome: Result<A, E>) -> Result<Result<A, E>, A> {
        Ok(outcome)
    }
}

/// What an async hook heard, until the pause: only ever reached through `&mut`, in a `Mutex`
/// that is never locked, so that the hooks stay `Sync` (a hedged attempt shares them across
/// its copies) whatever the outcome's type is, when it is `Send`.
pub(crate) struct Held<A, B>(std::sync::Mutex<Option<(A, B)>>);

impl<A, B> Default for Held<A, B> {
    fn default() -> Self {
        Held(std::sync::Mutex::new(None))
    }
}

impl<A, B> Held<A, B> {
    /// What is held.
    pub(crate) fn get(&mut self) -> &mut Option<(A, B)> {
        // Never locked, so never poisoned; `into_inner` would give the same either way.
        match self.0.get_mut() {
            Ok(held) => held,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// An async hook's slot: the hook's future for what it heard, and where it keeps that until
/// the loop awaits it.
pub trait Heard<A, B> {
    /// The hook's future for `a` and `b`.
    fn hear<'s>(&'s self, a: &'s A, b: &'s B) -> impl Future<Output = ()> + 's;
    /// What the hook heard, kept until the pause.
    fn held(&mut self) -> &mut Option<(A, B)>;
    /// The door's sink, which hears the hook's contained panic: a door's slot has it.
    fn sink(&self) -> Option<&(dyn Sink + Sync)> {
        None
    }
}

impl<F: Hears<A, B, M>, M, A, B> Heard<A, B> for Awaited<F, M, A, B> {
    fn hear<'s>(&'s self, a: &'s A, b: &'s B) -> impl Future<Output = ()> + 's {
        self.f.hear(a, b)
    }
    fn held(&mut self) -> &mut Option<(A, B)> {
        self.held.get()
    }
}

impl<F: Hears<A, B, M>, M, A, B> Slot<A, B> for Awaited<F, M, A, B> {
    const SET: bool = true;
    const AWAITS: bool = true;
    type Takes<E> = Result<A, E>;
    fn call(&self, _: &A, _: &B) -> Option<()> {
        None
    }
    fn takes<E>(outcome: Result<A, E>) -> Result<Result<A, E>, A> {
        Ok(outcome)
    }
    fn keep(&mut self, a: A, b: B) {
        *self.held.get() = Some((a, b));
    }
    fn pause<'s, S: Sleeper>(
        &'s mut self,
        sleeper: &'s S,
        pause: Option<Duration>,
        deadline: Option<(Instant, Duration)>,
        clock: fn() -> Instant,
        panics: Panics<'s>,
    ) -> impl Future<Output = ()> + 's {
        heard_then_pause(self, sleeper, pause, deadline, clock, panics)
    }
}

/// The pause after an async hook: the hook's time is taken out of the pause, so the next
/// attempt starts when the pause ends, or when the hook does if it ran longer; and never past
/// the deadline (`deadline`: when the first attempt started, and the deadline), where a hook
/// still running is dropped. A panic of the hook ends it: reported to `panics`, the pause
/// goes on.
pub(crate) async fn heard_then_pause<H: Heard<A, B>, A, B, S: Sleeper>(
    slot: &mut H,
    sleeper: &S,
    pause: Option<Duration>,
    deadline: Option<(Instant, Duration)>,
    clock: fn() -> Instant,
    panics: Panics<'_>,
) {
    let mut spent = Duration::ZERO;
    if let Some((a, b)) = slot.held().take() {
        let started = clock();
        let left = deadline.map(|(first, deadline)| {
            deadline.saturating_sub(started.saturating_duration_since(first))
        });
        let hook = made(|| slot.hear(&a, &b));
        let hook = async move {
            if contained_future(hook).await {
                panics.report("notify");
            }
        };
        bounded(hook, left.map(|left| sleeper.sleep(left))).await;
        spent = clock().saturating_duration_since(started);
    }
    if let Some(rest) = pause.and_then(|pause| pause.checked_sub(spent)) {
        if !rest.is_zero() {
            sleeper.sleep(rest).await;
        }
    }
}

/// Awaits `hook`, or `limit` if it ends first (and drops `hook` then).
async fn bounded(hook: impl Future<Output = ()>, limit: Option<impl Future<Output = ()>>) {
    let mut hook = pin!(hook);
    let mut limit = pin!(limit);
    poll_fn(|cx| {
        if hook.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        match limit.as_mut().as_pin_mut() {
            Some(limit) => limit.poll(cx),
            None => Poll::Pending,
        }
    })
    .await
}

/// An `on_give_up` slot: how the end of a loop that gave up is made, with the fallback `F`. A
/// sync hook is called at once, and the fallback's result (or its future) is the end; an async
/// hook makes the end a future that awaits it first ([`HeardFirst`]).
pub trait GiveUpSlot<T, E>: Slot<Result<T, E>, GiveUp> {
    /// What the loop ends with.
    type End<F: Fallback<T, E>, K: KeySlot>: From<Result<T, E>>;
    /// Tells the hook (or keeps what it hears, for the end to await), then the fallback; a
    /// sync hook's panic is contained and reported to `panics`.
    fn end<F: Fallback<T, E>, K: KeySlot>(
        self,
        fallback: F,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
        panics: Panics<'_>,
    ) -> Self::End<F, K>;
}

/// The end of a sync `on_give_up`'s loop: the hook is told, then the fallback runs.
macro_rules! told_at_once {
    () => {
        type End<Fb: Fallback<T, E>, K: KeySlot> = Fb::Output<K>;
        #[inline]
        fn end<Fb: Fallback<T, E>, K: KeySlot>(
            self,
            fallback: Fb,
            outcome: Result<T, E>,
            why: GiveUp,
            scope: FallbackScope<K>,
            panics: $crate::state::observe::Panics<'_>,
        ) -> Fb::Output<K> {
            if $crate::state::observe::contained(|| {
                <Self as Slot<Result<T, E>, GiveUp>>::call(&self, &outcome, &why);
            }) {
                panics.report("on_give_up");
            }
            fallback.call(outcome, why, scope)
        }
    };
}
pub(crate) use told_at_once;

/// The end of an async `on_give_up`'s loop: a future that awaits it first.
macro_rules! heard_first {
    () => {
        type End<Fb: Fallback<T, E>, K: KeySlot> = HeardFirst<Self, Fb, K, T, E>;
        fn end<Fb: Fallback<T, E>, K: KeySlot>(
            self,
            fallback: Fb,
            outcome: Result<T, E>,
            why: GiveUp,
            scope: FallbackScope<K>,
            _: $crate::state::observe::Panics<'_>,
        ) -> Self::End<Fb, K> {
            HeardFirst::Hook {
                hook: self,
                fallback,
                outcome,
                why,
                scope,
            }
        }
    };
}
pub(crate) use heard_first;

impl<T, E> GiveUpSlot<T, E> for Unset {
    told_at_once!();
}

impl<F, T, E, const TIMED: bool> GiveUpSlot<T, E> for Hook<F, Result<T, E>, GiveUp, (), TIMED> {
    told_at_once!();
}

impl<F: Hears<Result<T, E>, GiveUp, M>, M, T, E> GiveUpSlot<T, E>
    for Awaited<F, M, Result<T, E>, GiveUp>
{
    heard_first!();
}

/// The end of a loop with an async `on_give_up`: the result, or the hook to await before the
/// fallback runs (and before the call returns).
pub enum HeardFirst<G, F, K, T, E> {
    /// The result, which needs no hook (an `Ok`, a permanent error).
    Ready(Result<T, E>),
    /// The hook, what it hears, and the fallback after it.
    Hook {
        /// The hook's slot.
        hook: G,
        /// The fallback, run after the hook.
        fallback: F,
        /// The outcome the loop gave up on.
        outcome: Result<T, E>,
        /// Why.
        why: GiveUp,
        /// Where the fallback runs.
        scope: FallbackScope<K>,
    },
}

impl<G, F, K, T, E> From<Result<T, E>> for HeardFirst<G, F, K, T, E> {
    fn from(result: Result<T, E>) -> Self {
        HeardFirst::Ready(result)
    }
}

impl<G, Fb, K, T, E> IntoFinish<T, E> for HeardFirst<G, Fb, K, T, E>
where
    G: Heard<Result<T, E>, GiveUp>,
    Fb: Fallback<T, E>,
    K: KeySlot,
    Fb::Output<K>: IntoFinish<T, E>,
{
    async fn into_finish(self) -> Result<T, E> {
        match self {
            HeardFirst::Ready(result) => result,
            HeardFirst::Hook {
                hook,
                fallback,
                outcome,
                why,
                scope,
            } => {
                let heard = made(|| hook.hear(&outcome, &why));
                if contained_future(heard).await {
                    Panics::new(why.function, hook.sink()).report("on_give_up");
                }
                fallback.call(outcome, why, scope).into_finish().await
            }
        }
    }
}

/// The hooks of a loop, one slot each, and its fallback: one slot of the options for all of
/// them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks<R = Unset, N = Unset, G = Unset, F = Unset> {
    pub(crate) on_result: R,
    pub(crate) notify: N,
    pub(crate) on_give_up: G,
    pub(crate) fallback: F,
}

/// What the loop asks of [`Hooks`], and how a builder replaces one of its slots: a trait, so
/// that the options' impl needs one parameter for all four slots. Sealed: public only because
/// the options' types name it, in a module no one outside can reach.
pub trait HookSet<T, E>: Sized {
    /// `on_result` is there.
    const ON_RESULT: bool;
    /// `notify` is there.
    const NOTIFY: bool;
    /// `on_give_up` or `fallback` hears why the loop gave up.
    const HEARS_GIVE_UP: bool;
    /// `fallback` is there.
    const FALLBACK: bool;
    /// A hook hears the time since the first attempt started.
    const TIMED: bool;
    /// `notify` is async: the loop awaits it in the pause.
    const AWAITS: bool;
    /// What the fallback takes: `E`, or with `on_result` the outcome.
    type Input;
    /// The `on_result` slot, which says what the fallback takes.
    type OnResult: Slot<T, (), Verdict, Takes<E> = Self::Input>;
    /// What the loop ends with: the `Result`, or an async fallback's future of it.
    type Finish<K: KeySlot>;
    /// The hooks with `on_result`'s slot replaced.
    type WithOnResult<R2: Slot<T, (), Verdict>>: HookSet<T, E>;
    /// The hooks with `notify`'s slot replaced.
    type WithNotify<N2: Slot<Result<T, E>, RetryEvent>>: HookSet<T, E>;
    /// The hooks with `on_give_up`'s slot replaced.
    type WithGiveUp<G2: GiveUpSlot<T, E>>: HookSet<T, E>;
    /// The hooks with the fallback's slot replaced.
    type WithFallback<F2: Fallback<T, E>>: HookSet<T, E>;
    /// `on_result`'s slot replaced; a fallback set before keeps what it takes (the expansion
    /// writes `on_result` first, so that the fallback hears a rejected `Ok`).
    fn with_on_result<R2: Slot<T, (), Verdict>>(self, slot: R2) -> Self::WithOnResult<R2>;
    /// `notify`'s slot replaced.
    fn with_notify<N2: Slot<Result<T, E>, RetryEvent>>(self, slot: N2) -> Self::WithNotify<N2>;
    /// `on_give_up`'s slot replaced.
    fn with_give_up<G2: GiveUpSlot<T, E>>(self, slot: G2) -> Self::WithGiveUp<G2>;
    /// The fallback's slot replaced.
    fn with_fallback<F2: Fallback<T, E>>(self, slot: F2) -> Self::WithFallback<F2>;
    /// Whether a hook that hears the time is there (at run time: a slot filled at run time may
    /// be empty).
    fn timed(&self) -> bool;
    /// Whether `notify` is there (at run time).
    fn notifies(&self) -> bool;
    /// Whether a hook or a fallback hears why the loop gave up (at run time).
    fn hears_give_up(&self) -> bool;
    /// `on_result`'s verdict on an `Ok` value: [`Verdict::Fail`] (return it) without one.
    fn judge(&self, value: &T) -> Verdict;
    /// Tells `notify` (an async one keeps what it hears for the pause): whether a sync hook
    /// panicked (the panic is contained).
    fn notify(&mut self, outcome: Result<T, E>, event: RetryEvent) -> bool;
    /// The pause, after an async `notify` (see [`Slot::pause`]).
    fn pause<'s, S: Sleeper>(
        &'s mut self,
        sleeper: &'s S,
        pause: Option<Duration>,
        deadline: Option<(Instant, Duration)>,
        clock: fn() -> Instant,
        panics: Panics<'s>,
    ) -> impl Future<Output = ()> + 's;
    /// A result that needs no fallback, as what the loop ends with.
    fn ready<K: KeySlot>(result: Result<T, E>) -> Self::Finish<K>;
    /// Tells `on_give_up` (or, async, makes the end await it), then runs the fallback (if any)
    /// on the outcome the loop gave up on.
    fn gave_up<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
        panics: Panics<'_>,
    ) -> Self::Finish<K>;
}

impl<T, E, R, N, G, F> HookSet<T, E> for Hooks<R, N, G, F>
where
    R: Slot<T, (), Verdict>,
    N: Slot<Result<T, E>, RetryEvent>,
    G: GiveUpSlot<T, E>,
    F: Fallback<T, E>,
{
    const ON_RESULT: bool = R::SET;
    const NOTIFY: bool = N::SET;
    const HEARS_GIVE_UP: bool = G::SET || F::SET;
    const FALLBACK: bool = F::SET;
    const TIMED: bool = N::TIMED || G::TIMED || F::SET;
    const AWAITS: bool = N::AWAITS;
    type Input = R::Takes<E>;
    type OnResult = R;
    type Finish<K: KeySlot> = G::End<F, K>;
    type WithOnResult<R2: Slot<T, (), Verdict>> = Hooks<R2, N, G, F>;
    type WithNotify<N2: Slot<Result<T, E>, RetryEvent>> = Hooks<R, N2, G, F>;
    type WithGiveUp<G2: GiveUpSlot<T, E>> = Hooks<R, N, G2, F>;
    type WithFallback<F2: Fallback<T, E>> = Hooks<R, N, G, F2>;

    fn with_on_result<R2: Slot<T, (), Verdict>>(self, on_result: R2) -> Hooks<R2, N, G, F> {
        Hooks {
            on_result,
            notify: self.notify,
            on_give_up: self.on_give_up,
            fallback: self.fallback,
        }
    }

    fn with_notify<N2: Slot<Result<T, E>, RetryEvent>>(self, notify: N2) -> Hooks<R, N2, G, F> {
        Hooks {
            on_result: self.on_result,
            notify,
            on_give_up: self.on_give_up,
            fallback: self.fallback,
        }
    }

    fn with_give_up<G2: GiveUpSlot<T, E>>(self, on_give_up: G2) -> Hooks<R, N, G2, F> {
        Hooks {
            on_result: self.on_result,
            notify: self.notify,
            on_give_up,
            fallback: self.fallback,
        }
    }

    fn with_fallback<F2: Fallback<T, E>>(self, fallback: F2) -> Hooks<R, N, G, F2> {
        Hooks {
            on_result: self.on_result,
            notify: self.notify,
            on_give_up: self.on_give_up,
            fallback,
        }
    }

    fn timed(&self) -> bool {
        self.notify.is_timed() || self.on_give_up.is_timed() || F::SET
    }

    fn notifies(&self) -> bool {
        N::SET && self.notify.is_set()
    }

    fn hears_give_up(&self) -> bool {
        (G::SET && self.on_give_up.is_set()) || F::SET
    }

    // RESULTS §3 "happy async": 74 -> 90 without it and `ready`'s (one failure async 238 -> 257).
    #[inline]
    fn judge(&self, value: &T) -> Verdict {
        self.on_result.call(value, &()).unwrap_or(Verdict::Fail)
    }

    fn notify(&mut self, outcome: Result<T, E>, event: RetryEvent) -> bool {
        super::observe::contained(|| self.notify.keep(outcome, event))
    }

    #[inline]
    fn pause<'s, S: Sleeper>(
        &'s mut self,
        sleeper: &'s S,
        pause: Option<Duration>,
        deadline: Option<(Instant, Duration)>,
        clock: fn() -> Instant,
        panics: Panics<'s>,
    ) -> impl Future<Output = ()> + 's {
        self.notify.pause(sleeper, pause, deadline, clock, panics)
    }

    // RESULTS §3 "happy async": 74 -> 77 without it (one failure async 238 -> 241).
    #[inline]
    fn ready<K: KeySlot>(result: Result<T, E>) -> G::End<F, K> {
        result.into()
    }

    fn gave_up<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
        panics: Panics<'_>,
    ) -> G::End<F, K> {
        self.on_give_up
            .end(self.fallback, outcome, why, scope, panics)
    }
}
