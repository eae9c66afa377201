//! Fault injection's one point in the loop (feature `faults`): before each attempt of every door
//! (the attribute and `retry_block!` by the function's or the block's name, the `Retrier` and the
//! doors on `engine` by their `name`), the loop asks the installed `Inject` whether to fail the
//! attempt with an error of the call's own type (`Fault::Error`: the classifier then judges it as
//! it would a real one) or to add a latency to it (`Fault::Latency`: inside the attempt's
//! `timeout`, so that a latency longer than the timeout times the attempt out). A hedged attempt
//! takes the latency on each of its copies.
//!
//! Nothing here chooses faults: the crate `retry-chaos` does (rates, attempt filters, seeds, a
//! switch), and installs itself with `install`. Without the feature nothing of this is compiled
//! in. With it and no injector installed, each attempt reads one relaxed atomic, but the call
//! that may follow changes the code around it: `bench/RESULTS.md` §3 has the rows, several times
//! the rows without the feature. A build for production leaves the feature off.
//!
//! An error fault needs the error type to say what an injected error is, as it says what a
//! timed-out attempt is (`From<Elapsed>`): `impl From<Injected> for MyError`. The attribute and
//! `retry_block!` see that impl where they are written; a `Retrier` is told with
//! `Retrier::injectable`, a door on `engine` with `DynHooks::injectable`. An error type without
//! it gets latencies only.
//!
//! Every fault injected here is an `Event::Injected`: logged (`INFO`), counted on
//! `retry_door_events_total{event="injected_error"}` (or `injected_latency`) with the `metrics`
//! feature, and handed to the door's sink.
//!
//! ```
//! # #[cfg(not(feature = "faults"))] fn main() {}
//! # #[cfg(feature = "faults")] fn main() {
//! use retry_runtime::faults::{self, Fault, Inject, Injected};
//! use retry_runtime::{retry, Transient};
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! #[derive(Debug)]
//! enum QuoteError { Unavailable }
//! impl Transient for QuoteError { fn is_transient(&self) -> bool { true } }
//! // What an injected error is, in this error type.
//! impl From<Injected> for QuoteError { fn from(_: Injected) -> Self { QuoteError::Unavailable } }
//!
//! /// Fails the first attempt of `quote`, and nothing else.
//! struct FirstAttemptFails;
//! impl Inject for FirstAttemptFails {
//!     fn before(&self, site: &'static str, attempt: u32) -> Option<Fault> {
//!         (site == "quote" && attempt == 1).then_some(Fault::Error)
//!     }
//! }
//!
//! static BODY_RAN: AtomicU32 = AtomicU32::new(0);
//!
//! #[retry(max = 2, base = "1ms")]
//! fn quote() -> Result<u32, QuoteError> {
//!     BODY_RAN.fetch_add(1, Ordering::Relaxed);
//!     Ok(7)
//! }
//!
//! faults::install(Arc::new(FirstAttemptFails));
//! assert_eq!(quote().unwrap(), 7);
//! faults::uninstall();
//! // The first attempt failed before its body ran; the retry ran it once.
//! assert_eq!(BODY_RAN.load(Ordering::Relaxed), 1);
//! # }
//! ```

use std::fmt;
use std::marker::PhantomData;

/// An error injected into attempt [`attempt`](Injected::attempt) of the call site
/// [`site`](Injected::site): what an error type that can be injected makes its own error of
/// (`impl From<Injected> for MyError`), as it makes one of a timed-out attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Injected {
    site: &'static str,
    attempt: u32,
}

impl Injected {
    /// The fault of attempt `attempt` of `site` (for an injector's own tests).
    pub const fn new(site: &'static str, attempt: u32) -> Self {
        Injected { site, attempt }
    }

    /// The call site's name: the function's, the block's `name`, the door's.
    pub const fn site(&self) -> &'static str {
        self.site
    }

    /// The attempt that fails (1 for the first).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a fault injected into attempt {} of `{}`",
            self.attempt, self.site
        )
    }
}

impl std::error::Error for Injected {}

/// What the loop carries for its `Result<T, E>`: with the feature `faults`, how an injected
/// error becomes an `E` (if `E: From<Injected>`); without it, nothing.
pub struct Carried<T, E> {
    #[cfg(feature = "faults")]
    pub(crate) make: Option<fn(Injected) -> E>,
    marks: PhantomData<fn() -> Result<T, E>>,
}

impl<T, E> Clone for Carried<T, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, E> Copy for Carried<T, E> {}

impl<T, E> Carried<T, E> {
    /// Nothing carried: an injected error fault is skipped (latencies still apply).
    pub(crate) const NONE: Self = Carried {
        #[cfg(feature = "faults")]
        make: None,
        marks: PhantomData,
    };

    /// With `make`, if the feature is on.
    #[cfg_attr(not(feature = "faults"), allow(unused_variables))]
    pub(crate) fn with(self, make: Maker<E>) -> Self {
        Carried {
            #[cfg(feature = "faults")]
            make: make.0,
            marks: PhantomData,
        }
    }
}

/// How an injected error becomes the call's `E`, if it can: what the attribute's and
/// `retry_block!`'s probe finds, handed to the loop's `faults` builder.
pub struct Maker<E>(
    #[cfg(feature = "faults")] Option<fn(Injected) -> E>,
    PhantomData<fn() -> E>,
);

impl<E> Clone for Maker<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Maker<E> {}

impl<E> Maker<E> {
    /// No maker: error faults are skipped for this site.
    pub const NONE: Self = Maker(
        #[cfg(feature = "faults")]
        None,
        PhantomData,
    );

    /// `E::from(Injected)`.
    #[cfg_attr(not(feature = "faults"), allow(dead_code))]
    pub(crate) fn from_impl() -> Self
    where
        E: From<Injected>,
    {
        Maker(
            #[cfg(feature = "faults")]
            Some(E::from),
            PhantomData,
        )
    }
}

/// The probe the expansion writes where the function's `Result` type is known (the loop's state
/// makes it: `state.probe().maker()`): `maker()` is `E::from` if `E: From<Injected>` (and the
/// feature `faults` is on), else no maker, without a bound on the function: the method is looked
/// up on `Probe` first, then on what it derefs to ([`NoProbe`]), as `Shape`'s `start`.
pub struct Probe<R>(NoProbe<R>);

/// What [`Probe`] derefs to: the maker of an error type that cannot be injected (none).
pub struct NoProbe<R>(PhantomData<fn() -> R>);

impl<R> Probe<R> {
    /// The probe of a function that returns `R`.
    pub const fn new() -> Self {
        Probe(NoProbe(PhantomData))
    }
}

impl<R> Default for Probe<R> {
    fn default() -> Self {
        Probe::new()
    }
}

impl<R> std::ops::Deref for Probe<R> {
    type Target = NoProbe<R>;
    fn deref(&self) -> &NoProbe<R> {
        &self.0
    }
}

#[cfg(feature = "faults")]
impl<T, E: From<Injected>> Probe<Result<T, E>> {
    /// `E::from`: an error fault at this site is an `E`.
    pub fn maker(&self) -> Maker<E> {
        Maker::from_impl()
    }
}

impl<T, E> NoProbe<Result<T, E>> {
    /// No maker: `E` has no `From<Injected>` (or the feature `faults` is off).
    pub fn maker(&self) -> Maker<E> {
        Maker::NONE
    }
}

/// Whether this build compiles the injection point in (the feature `faults`, which `retry-chaos`
/// turns on; cargo turns it on for every crate of a build that has `retry-chaos` in it). A test
/// that measures what a production build pays (a future's size, instructions) reads it to know
/// which build it measures.
pub const COMPILED_IN: bool = cfg!(feature = "faults");

#[cfg(feature = "faults")]
pub use point::{Fault, Inject, install, installed, uninstall};

#[cfg(feature = "faults")]
pub(crate) use point::{Faulty, Planned, plan, sleep, sleep_blocking};

/// An injector is installed (feature `faults`): then a door's first attempt is the loop's too
/// ([`FirstAttempt::new`](crate::engine::first::FirstAttempt::new) says `None`), so that it
/// meets the point.
#[inline]
pub(crate) fn active() -> bool {
    #[cfg(feature = "faults")]
    return installed();
    #[cfg(not(feature = "faults"))]
    false
}

/// An injected latency an async attempt waits out before its body is polled, outside the
/// attempt's context (so that a body that does not read it keeps the context out of its code):
/// with the feature, the injector's sleep, if any; without it, nothing.
#[cfg(feature = "faults")]
pub(crate) type Delay = Option<std::pin::Pin<Box<dyn Future<Output = ()> + Send>>>;
/// An injected latency an async attempt waits out before its body is polled: with the feature,
/// the injector's sleep, if any; without it, nothing.
#[cfg(not(feature = "faults"))]
pub(crate) type Delay = ();

/// Whether `delay` is still running (and its waker registered); `false` once it is over, or
/// for none.
#[inline]
#[cfg_attr(not(feature = "faults"), allow(unused_variables))]
pub(crate) fn delaying(delay: &mut Delay, cx: &mut std::task::Context<'_>) -> bool {
    #[cfg(feature = "faults")]
    if let Some(sleep) = delay {
        if sleep.as_mut().poll(cx).is_pending() {
            return true;
        }
        *delay = None;
    }
    false
}

/// An injected error an async attempt's future holds until it is polled, not yet made (so that
/// the future is `Send` whatever `E` is, as without the feature): with the feature, how to make
/// it; without it, a type with no value (the future has no room for it).
pub(crate) type Held<E> = <E as Holder>::Held;

/// The type of [`Held`].
pub(crate) trait Holder: Sized {
    type Held: Holds<Self>;
}

/// Gives its error up, once.
pub(crate) trait Holds<E> {
    fn take(&mut self) -> Option<E>;
}

#[cfg(feature = "faults")]
impl<E> Holder for E {
    type Held = Option<point::Unmade<E>>;
}

#[cfg(feature = "faults")]
impl<E> Holds<E> for Option<point::Unmade<E>> {
    fn take(&mut self) -> Option<E> {
        Option::take(self).map(point::Unmade::make)
    }
}

#[cfg(not(feature = "faults"))]
impl<E> Holder for E {
    type Held = Nothing;
}

/// No injected error: the feature `faults` is off.
#[cfg(not(feature = "faults"))]
pub(crate) enum Nothing {}

#[cfg(not(feature = "faults"))]
impl<E> Holds<E> for Nothing {
    fn take(&mut self) -> Option<E> {
        match *self {}
    }
}

#[cfg(feature = "faults")]
mod point {
    use super::{Carried, Injected};
    use crate::engine::{Event, Injection};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, PoisonError, RwLock};
    use std::task::{Context, Poll};
    use std::time::Duration;

    /// What an [`Inject`] decided for one attempt.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Fault {
        /// Fail the attempt before its body runs, with the call's error made of an
        /// [`Injected`] (`E: From<Injected>`); an error type without that impl is not failed.
        Error,
        /// Run the body after this latency, inside the attempt's `timeout`.
        Latency(Duration),
    }

    /// Who decides, before each attempt, whether a fault is injected into it: installed once for
    /// the process with [`install`] (the crate `retry-chaos` is one).
    pub trait Inject: Send + Sync {
        /// Before attempt `attempt` (1 for the first) of the call site `site`: a fault, or
        /// `None` (the attempt runs as it would without an injector).
        fn before(&self, site: &'static str, attempt: u32) -> Option<Fault>;

        /// An async pause of `latency` on the injector's timer: tokio's by default (feature
        /// `tokio`), so that a test on tokio's paused clock sees it exactly.
        fn sleep(&self, latency: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
            #[cfg(feature = "tokio")]
            return Box::pin(tokio::time::sleep(latency));
            #[cfg(not(feature = "tokio"))]
            {
                let _ = latency;
                Box::pin(std::future::ready(()))
            }
        }
    }

    static INSTALLED: AtomicBool = AtomicBool::new(false);
    static INJECTOR: RwLock<Option<Arc<dyn Inject>>> = RwLock::new(None);

    /// Installs `injector` for every call of the process that starts an attempt from now on,
    /// in place of the one installed before.
    pub fn install(injector: Arc<dyn Inject>) {
        *INJECTOR.write().unwrap_or_else(PoisonError::into_inner) = Some(injector);
        INSTALLED.store(true, Ordering::Release);
    }

    /// Removes the injector: the attempts that start from now on run without one. Returns it.
    pub fn uninstall() -> Option<Arc<dyn Inject>> {
        INSTALLED.store(false, Ordering::Release);
        INJECTOR
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// An injector is installed.
    #[inline]
    pub fn installed() -> bool {
        INSTALLED.load(Ordering::Relaxed)
    }

    fn injector() -> Option<Arc<dyn Inject>> {
        INJECTOR
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// An injected error not yet made: `Send` and `Copy` whatever `E` is.
    pub(crate) struct Unmade<E> {
        make: fn(Injected) -> E,
        injected: Injected,
    }

    impl<E> Unmade<E> {
        /// The error.
        pub(crate) fn make(self) -> E {
            (self.make)(self.injected)
        }
    }

    /// What the point decided for one attempt.
    pub(crate) enum Planned<E> {
        /// Fail with this error (made when it is taken), the body not run.
        Fail(Unmade<E>),
        /// Run the body after this pause (its future, for an async attempt).
        Late(Duration),
    }

    /// Asks the injector about attempt `attempt` of `site`, reports what it injects to the logs
    /// and the metrics, and gives the plan and its event, for the door's sink. One relaxed load
    /// when no injector is installed. Nothing of the loop's state is handed to the injector's
    /// side: a reference to it, held across that call, kept the whole state in memory on the
    /// happy path (`bench/RESULTS.md` §3, "happy sync: #[retry]": 5 -> 70 instructions).
    #[inline]
    pub(crate) fn plan<T, E>(
        carried: &Carried<T, E>,
        site: &'static str,
        attempt: u32,
    ) -> Option<(Planned<E>, Event<'static>)> {
        if !installed() {
            return None;
        }
        ask(carried.make, site, attempt)
    }

    #[cold]
    #[inline(never)]
    fn ask<E>(
        make: Option<fn(Injected) -> E>,
        site: &'static str,
        attempt: u32,
    ) -> Option<(Planned<E>, Event<'static>)> {
        let (planned, injection) = match injector()?.before(site, attempt)? {
            Fault::Error => {
                let injected = Injected::new(site, attempt);
                (
                    Planned::Fail(Unmade {
                        make: make?,
                        injected,
                    }),
                    Injection::Error,
                )
            }
            Fault::Latency(latency) => (Planned::Late(latency), Injection::Latency(latency)),
        };
        let event = Event::Injected {
            attempt,
            fault: injection,
        };
        crate::state::observe::report(site, event, &());
        Some((planned, event))
    }

    /// A sync attempt's injected latency: blocks the thread (recorded as a pause inside
    /// [`testing::record`](crate::testing::record)).
    #[cold]
    pub(crate) fn sleep_blocking(latency: Duration) {
        if !crate::testing::record_pause(latency) {
            std::thread::sleep(latency);
        }
    }

    /// The injector's sleep of `latency`, as an async attempt's [`Delay`](super::Delay).
    #[cold]
    pub(crate) fn sleep(latency: Duration) -> super::Delay {
        Some(injector()?.sleep(latency))
    }

    pin_project_lite::pin_project! {
        /// An async attempt's body after its injected latency, if any, inside the attempt's
        /// context and its timeout (the attempts with a `timeout`, and hedged copies).
        pub(crate) struct Faulty<F> {
            delay: super::Delay,
            #[pin]
            body: F,
        }
    }

    impl<F> Faulty<F> {
        /// `body`, after `latency` if any.
        #[inline]
        pub(crate) fn new(latency: Option<Duration>, body: F) -> Self {
            Faulty {
                delay: latency.and_then(sleep),
                body,
            }
        }
    }

    impl<F: Future> Future for Faulty<F> {
        type Output = F::Output;

        #[inline]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            let this = self.project();
            if super::delaying(this.delay, cx) {
                return Poll::Pending;
            }
            this.body.poll(cx)
        }
    }
}
