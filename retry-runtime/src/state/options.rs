//! The options of a macro's loop as one type: [`Options`], the trait the loop state's options
//! parameter `O` implements, and [`Opts`], what the expansion's builders build. (The
//! [`Retrier`](crate::Retrier) holds its options as values, and fills these slots at run time.)
//!
//! Every option lives in a slot of [`Opts`] that is the zero-sized [`Unset`] when the option is
//! not written: the classifier and the timer ([`Head`]), the hooks and the fallback
//! ([`Hooks`]), and `timeout`, `budget`, `breaker` and `nested` ([`Extras`]). A method that sets
//! an option replaces one slot, and so the type: the options are known when the code is
//! compiled, and one that is not written costs no code and no check (`PERFORMANCE.md` §1).

use super::extras::{Deciding, Extras, IntoExtras, MaybeExtras, Timeout};
use super::fallback::{FallbackArgument, FallbackOutput};
use super::hooks::{
    Classify, GiveUpHook, HookSet, Hooks, IntoVerdict, Notify, NotifyHook, OnResult,
};
use super::log::ByDebug;
use super::{GiveUp, Unset};
use crate::overload::aws2026_call::Aws2026Call;
use crate::timer::Sleeper;
use crate::{Aws2026Standard, Transient, Verdict};
use std::marker::PhantomData;

/// The options a macro's loop carries, as a type: each builder the expansion calls (`sleep`,
/// `notify`, ...) gives back a loop state whose options have that option in its place.
///
/// Sealed, and named only in the signatures of those builders, where each associated type
/// below says what the builder changes.
pub trait Options<'p, T, E>: Sized {
    /// The timer of the pauses of an async run: tokio's (with the `tokio` feature) until
    /// `sleep` names another.
    type Sleeper;
    /// What a `fallback` takes: the error `E`, or with `on_result` the outcome
    /// `Result<T, E>` (a rejected `Ok` can end the loop too).
    type Input;
    /// These options with the timer `S` (`sleep`).
    type WithSleeper<S: Sleeper>: Options<'p, T, E>;
    /// These options with `J` judging `Ok` values (`on_result`).
    type WithOnResult<J>: Options<'p, T, E>;
    /// These options with `J` hearing each pause (`notify`).
    type WithNotify<J>: Options<'p, T, E>;
    /// These options with `J` hearing the loop give up (`on_give_up`), in its form `M`.
    type WithGiveUp<J: GiveUpHook<T, E, M>, M>: Options<'p, T, E>;
    /// These options with the fallback `J` returning `Out` (`fallback`), in its form `M`.
    type WithFallback<J, Out: FallbackOutput<T, E, M>, M>: Options<'p, T, E>;
    /// These options with `budget`, `breaker`, `gate` or `nested` in place.
    type WithExtras: Options<'p, T, E>;
    /// These options with `aws2026` in place.
    type WithAws2026: Options<'p, T, E>;
    /// These options with `timeout` in place.
    type WithTimeout: Options<'p, T, E>;
    /// Where the extras hold a long-polling call's outcome over its last pause.
    #[doc(hidden)]
    type Hold;

    #[doc(hidden)]
    fn with_sleeper<S: Sleeper>(self, sleeper: S) -> Self::WithSleeper<S>;
    #[doc(hidden)]
    fn with_on_result<J, V>(self, on_result: J) -> Self::WithOnResult<J>
    where
        J: Fn(&T) -> V,
        V: IntoVerdict;
    #[doc(hidden)]
    fn with_notify<J, M>(self, notify: J) -> Self::WithNotify<J>
    where
        J: NotifyHook<T, E, M>;
    #[doc(hidden)]
    fn with_give_up<J: GiveUpHook<T, E, M>, M>(self, on_give_up: J) -> Self::WithGiveUp<J, M>;
    #[doc(hidden)]
    fn with_fallback<J, A, Out, M>(self, fallback: J) -> Self::WithFallback<J, Out, M>
    where
        J: FnOnce(A, GiveUp) -> Out,
        A: FallbackArgument<Self::Input>,
        Out: FallbackOutput<T, E, M>;
    #[doc(hidden)]
    fn with_extras(self, set: impl FnOnce(&mut Extras<'p, E, Self::Hold>)) -> Self::WithExtras;
    #[doc(hidden)]
    fn with_aws2026(self, aws: &'p Aws2026Standard) -> Self::WithAws2026;
    #[doc(hidden)]
    fn with_timeout(self, timeout: Timeout<E>) -> Self::WithTimeout;
}

/// How a loop judges its errors: a classifier that `on` named (`Fn(&E) -> bool` or
/// `Fn(&E) -> Verdict`), or [`ByTransient`], the error type's [`Transient`] impl.
pub trait Classifier<E> {
    /// The verdict on one error.
    #[doc(hidden)]
    fn verdict(&self, error: &E) -> Verdict;
    /// The verdict on an attempt that `timeout` cut off, with its error: a transient failure,
    /// unless the classifier says otherwise (a door configured at run time asks its own, which
    /// refuses to resend a request that may have reached the server).
    #[doc(hidden)]
    #[inline]
    fn timed_out(&self, _error: &E) -> Verdict {
        Verdict::Retry
    }
}

impl<C, E> Classifier<E> for Classify<C, E> {
    #[inline]
    fn verdict(&self, error: &E) -> Verdict {
        self.call(error, &())
    }
}

/// The classifier of a [`Retrier`](crate::Retrier) without `on`: the error type's [`Transient`]
/// impl, with its server-suggested pause.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByTransient;

/// A [`Transient`] error of a [`Retrier`](crate::Retrier) without `on`: its message names the
/// method.
#[diagnostic::on_unimplemented(
    message = "this `Retrier` cannot tell which `{Self}` errors are worth retrying",
    label = "the closure's error type `{Self}` does not implement `retry_runtime::Transient`",
    note = "either name a classifier, which works for any error type: `.on(is_transient)` with `fn is_transient(error: &{Self}) -> bool`",
    note = "or, if `{Self}` is defined in your crate, implement `retry_runtime::Transient` for it; a type from another crate cannot implement it in yours (E0117), so wrap such a type in an error type of your own"
)]
pub(crate) trait TransientInRetrier: Transient {}

#[diagnostic::do_not_recommend]
impl<E: Transient + ?Sized> TransientInRetrier for E {}

#[allow(private_bounds)]
impl<E: TransientInRetrier> Classifier<E> for ByTransient {
    #[inline]
    fn verdict(&self, error: &E) -> Verdict {
        error.verdict()
    }
}

/// The classifier and the timer of a loop, and how its events show an error (`D`: by its
/// `Debug`, or by its type name): one slot of [`Opts`].
#[derive(Clone, Copy, Debug)]
pub struct Head<C = ByTransient, S = DefaultSleeper, D = ByDebug> {
    pub(crate) classify: C,
    pub(crate) sleeper: S,
    pub(crate) marks: PhantomData<fn() -> D>,
}

impl<C: Default, S: Default> Default for Head<C, S> {
    fn default() -> Self {
        Head {
            classify: C::default(),
            sleeper: S::default(),
            marks: PhantomData,
        }
    }
}

/// The timer of a [`Retrier`](crate::Retrier)'s async run until `sleep` names another: tokio's
/// with the `tokio` feature, none without (an async run then needs `sleep`).
#[cfg(feature = "tokio")]
pub type DefaultSleeper = crate::timer::TokioTimer;
/// The timer of a [`Retrier`](crate::Retrier)'s async run until `sleep` names another: tokio's
/// with the `tokio` feature, none without (an async run then needs `sleep`).
#[cfg(not(feature = "tokio"))]
pub type DefaultSleeper = crate::timer::NoTimer;

/// The options of a loop, slot by slot: the classifier and the timer (`K`, a [`Head`]), the
/// hooks and the fallback (`H`, a [`Hooks`]) and the options that have no hook (`X`, [`Unset`]
/// or an [`Extras`]). The options' methods build it; nothing else names its parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opts<K = Head, H = Hooks, X = Unset> {
    pub(crate) head: K,
    pub(crate) hooks: H,
    pub(crate) extras: X,
}

impl<K, H, X> Opts<K, H, X> {
    /// The same options with the head `f` makes of this one.
    #[inline]
    fn map_head<K2>(self, f: impl FnOnce(K) -> K2) -> Opts<K2, H, X> {
        Opts {
            head: f(self.head),
            hooks: self.hooks,
            extras: self.extras,
        }
    }

    /// The same options with the hooks `f` makes of these.
    #[inline]
    fn map_hooks<H2>(self, f: impl FnOnce(H) -> H2) -> Opts<K, H2, X> {
        Opts {
            head: self.head,
            hooks: f(self.hooks),
            extras: self.extras,
        }
    }
}

impl<'p, T, E, C, S, D, H, X> Options<'p, T, E> for Opts<Head<C, S, D>, H, X>
where
    H: HookSet<T, E>,
    X: MaybeExtras<E> + IntoExtras<'p, E>,
{
    type Sleeper = S;
    type Input = H::Input;
    type WithSleeper<S2: Sleeper> = Opts<Head<C, S2, D>, H, X>;
    type WithOnResult<J> = Opts<Head<C, S, D>, H::WithOnResult<OnResult<J, T>>, X>;
    type WithNotify<J> = Opts<Head<C, S, D>, H::WithNotify<Notify<J, T, E>>, X>;
    type WithGiveUp<J: GiveUpHook<T, E, M>, M> = Opts<Head<C, S, D>, H::WithGiveUp<J::Slot>, X>;
    type WithFallback<J, Out: FallbackOutput<T, E, M>, M> =
        Opts<Head<C, S, D>, H::WithFallback<Out::Slot<J>>, X>;
    type WithExtras = Opts<Head<C, S, D>, H, Extras<'p, E, X::Hold>>;
    type WithAws2026 = Opts<Head<C, S, D>, H, Extras<'p, E, Deciding<Aws2026Call<'p>, T, E>>>;
    type WithTimeout = Opts<Head<C, S, D>, H, Extras<'p, E, X::Hold>>;
    type Hold = X::Hold;

    #[inline]
    fn with_sleeper<S2: Sleeper>(self, sleeper: S2) -> Self::WithSleeper<S2> {
        self.map_head(|head| Head {
            classify: head.classify,
            sleeper,
            marks: PhantomData,
        })
    }

    #[inline]
    fn with_on_result<J, V>(self, on_result: J) -> Self::WithOnResult<J>
    where
        J: Fn(&T) -> V,
        V: IntoVerdict,
    {
        let slot = OnResult::new(on_result, |f, value, ()| f(value).into_verdict());
        self.map_hooks(|hooks| hooks.with_on_result(slot))
    }

    #[inline]
    fn with_notify<J, M>(self, notify: J) -> Self::WithNotify<J>
    where
        J: NotifyHook<T, E, M>,
    {
        self.map_hooks(|hooks| hooks.with_notify(notify.into_slot()))
    }

    #[inline]
    fn with_give_up<J: GiveUpHook<T, E, M>, M>(self, on_give_up: J) -> Self::WithGiveUp<J, M> {
        self.map_hooks(|hooks| hooks.with_give_up(on_give_up.into_slot()))
    }

    #[inline]
    fn with_fallback<J, A, Out, M>(self, fallback: J) -> Self::WithFallback<J, Out, M>
    where
        J: FnOnce(A, GiveUp) -> Out,
        A: FallbackArgument<H::Input>,
        Out: FallbackOutput<T, E, M>,
    {
        self.map_hooks(|hooks| hooks.with_fallback(Out::slot::<H::OnResult, J, A>(fallback)))
    }

    #[inline]
    fn with_extras(self, set: impl FnOnce(&mut Extras<'p, E, X::Hold>)) -> Self::WithExtras {
        let mut extras = self.extras.into_extras();
        set(&mut extras);
        Opts {
            head: self.head,
            hooks: self.hooks,
            extras,
        }
    }

    #[inline]
    fn with_aws2026(self, aws: &'p Aws2026Standard) -> Self::WithAws2026 {
        let extras = self
            .extras
            .into_extras()
            .deciding(Some(Aws2026Call::new(aws)));
        Opts {
            head: self.head,
            hooks: self.hooks,
            extras,
        }
    }

    #[inline]
    fn with_timeout(self, timeout: Timeout<E>) -> Self::WithTimeout {
        let mut extras = self.extras.into_extras();
        extras.timeout = Some(timeout);
        Opts {
            head: self.head,
            hooks: self.hooks,
            extras,
        }
    }
}
