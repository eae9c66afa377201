//! The options of a macro's loop as one type, [`Opts`], what the expansion's builders build.
//! (The [`Retrier`](crate::Retrier) holds its options as values, and fills these slots at run
//! time.)
//!
//! Every option lives in a slot of [`Opts`] that is the zero-sized [`Unset`] when the option is
//! not written: the classifier and the timer ([`Head`]), the hooks and the fallback
//! ([`Hooks`]), and `timeout`, `budget`, `breaker` and `nested` ([`Extras`]). A builder (in
//! `state/mod.rs`) replaces one slot, and so the type: the options are known when the code is
//! compiled, and one that is not written costs no code and no check (`PERFORMANCE.md` §1).

use super::Unset;
use super::extras::{Extras, MaybeExtras};
use super::hooks::{Classify, Hooks};
use super::log::ByDebug;
use crate::{Transient, Verdict};
use std::marker::PhantomData;

/// How a loop judges its errors: a classifier that `on` named (`Fn(&E) -> bool` or
/// `Fn(&E) -> Verdict`), or [`ByTransient`], the error type's [`Transient`] impl.
// The one classifier that can be missing is a `Retrier`'s without `on` (`ByTransient`, whose impl
// is not recommended, so that this message is the error): it says what to do there.
#[diagnostic::on_unimplemented(
    message = "this `Retrier` cannot tell which `{E}` errors are worth retrying",
    label = "the closure's error type `{E}` does not implement `retry_runtime::Transient`",
    note = "either name a classifier, which works for any error type: `.on(is_transient)` with `fn is_transient(error: &{E}) -> bool`",
    note = "or, if `{E}` is defined in your crate, implement `retry_runtime::Transient` for it; a type from another crate cannot implement it in yours (E0117), so wrap such a type in an error type of your own"
)]
pub trait Classifier<E> {
    /// The verdict on one error.
    #[doc(hidden)]
    fn verdict(&self, error: &E) -> Verdict;
    /// The verdict on an attempt that `timeout` cut off, with its error: a transient failure,
    /// unless the classifier says otherwise (a door configured at run time asks its own, which
    /// refuses to resend a request that may have reached the server).
    #[doc(hidden)]
    fn timed_out(&self, _error: &E) -> Verdict {
        Verdict::Retry
    }
}

#[diagnostic::do_not_recommend] // so that a missing `Transient` reads as `Classifier` says
impl<C, E> Classifier<E> for Classify<C, E> {
    fn verdict(&self, error: &E) -> Verdict {
        self.call(error, &())
    }
}

/// The classifier of a [`Retrier`](crate::Retrier) without `on`: the error type's [`Transient`]
/// impl, with its server-suggested pause.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByTransient;

#[diagnostic::do_not_recommend]
impl<E: Transient> Classifier<E> for ByTransient {
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
    /// The same options with the hooks `f` makes of these.
    pub(crate) fn map_hooks<H2>(self, f: impl FnOnce(H) -> H2) -> Opts<K, H2, X> {
        Opts {
            head: self.head,
            hooks: f(self.hooks),
            extras: self.extras,
        }
    }

    /// The same options with the extras `f` makes of these.
    pub(crate) fn map_extras<X2>(self, f: impl FnOnce(X) -> X2) -> Opts<K, H, X2> {
        Opts {
            head: self.head,
            hooks: self.hooks,
            extras: f(self.extras),
        }
    }

    /// The same options with the extras (made if none were yet) as `set` leaves them: what the
    /// builders of `timeout`, `budget`, `breaker`, `gate` and `nested = retry` do.
    #[inline]
    pub(crate) fn with_extras<'p, E>(
        self,
        set: impl FnOnce(&mut Extras<'p, E, X::Hold>),
    ) -> Opts<K, H, Extras<'p, E, X::Hold>>
    where
        X: MaybeExtras<E> + 'p,
    {
        self.map_extras(|extras| {
            let mut extras = extras.into_extras();
            set(&mut extras);
            extras
        })
    }
}
