//! Running one attempt: the breaker's permission, the attempt context around the body, the
//! timeout; and what happened to the attempt, as a value for the decision.

use super::Head;
use super::extras::{Linger, Refusal};
use super::hooks::HookSet;
use super::spans::AttemptSpan;
use super::{Loop, Opts, Retry};
use crate::context::{self, Enter, Frame, KeyKind, KeyParam, KeySlot, Lent, Scoped};
#[cfg(feature = "faults")]
use crate::faults::Planned;
use crate::faults::{Delay, Held, Holds};
use crate::timer::{Sleeper, Timed};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

/// What happened to one attempt.
pub enum Attempted<T, E> {
    /// The body ran to its end.
    Completed(Result<T, E>),
    /// The circuit breaker refused the attempt and the body did not run: its refusal, as the
    /// loop's error.
    Refused(E),
    /// The admission gate shed the attempt and the body did not run: its
    /// [`Rejected`](crate::Rejected), as the loop's error. Why the loop gives up is read from
    /// the loop's gate: carried here, it made every attempt's outcome three words longer, and
    /// a sync failure handed over to the loop in memory instead of in two registers.
    Shed(E),
    /// `timeout` cut the body off: its expiry, as the loop's error.
    TimedOut(E),
    /// The body did not run: the loop had decided to end after a pause (a decider's
    /// [`Next::Linger`](crate::engine::Next::Linger), `aws2026`'s long-polling rule), and this
    /// attempt returns the outcome it held over the pause.
    Ended,
}

/// What happened to one attempt of a loop with an idempotency key, and the key, which a
/// fallback borrows too: what [`WithKey`]'s attempts return.
pub struct KeyedOutcome<T, E, Key> {
    pub(crate) attempted: Attempted<T, E>,
    pub(crate) key: Key,
}

/// An attempt without a key, as `next` takes it.
impl<T, E> From<Attempted<T, E>> for KeyedOutcome<T, E, ()> {
    fn from(attempted: Attempted<T, E>) -> Self {
        KeyedOutcome { attempted, key: () }
    }
}

/// The loop state with an idempotency key lent to its next attempt: `state.key(&key)`, then
/// one of the attempt methods, as on the state itself. The attempt borrows the key parameter for
/// [`attempt()`](crate::attempt)`.key()`, which renders it only if the body asks; its outcome
/// carries the key on to `next`, for a fallback.
pub struct WithKey<'s, 'p, T, E, O, Key> {
    pub(crate) state: &'s mut Retry<'p, T, E, O>,
    pub(crate) key: Key,
}

impl<T, E, C, S, D, H: HookSet<T, E>, X: Linger<T, E>, Key: KeySlot>
    WithKey<'_, '_, T, E, Opts<Head<C, S, D>, H, X>, Key>
{
    /// [`Retry::attempt`] with the key lent.
    pub fn attempt(self, body: impl FnOnce() -> Result<T, E>) -> KeyedOutcome<T, E, Key> {
        KeyedOutcome {
            attempted: self.state.attempt_lending(self.key, body),
            key: self.key,
        }
    }

    /// [`Retry::run`] with the key lent: its future holds a reference to the key, and nothing
    /// else for it.
    pub fn run<F>(
        self,
        body: F,
    ) -> impl Future<Output = KeyedOutcome<T, E, Key>> + use<T, E, C, S, D, H, X, Key, F>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.state.run_lending(self.key, body)
    }

    /// [`Retry::run_timed`] with the key lent.
    #[inline]
    pub fn run_timed<F>(self, body: F) -> impl Future<Output = KeyedOutcome<T, E, Key>>
    where
        S: Sleeper,
        F: Future<Output = Result<T, E>>,
    {
        let key = self.key;
        let run = self.state.run_made(key, || body);
        async move {
            KeyedOutcome {
                attempted: run.await,
                key,
            }
        }
    }
}

impl<'p, T, E, C, S, D, H: HookSet<T, E>, X: Linger<T, E>> Loop<'p, T, E, C, S, D, H, X> {
    /// The next attempt with the idempotency key `key` lent to it: a key parameter, past its own
    /// references (`&*key` for `key: &str`). A key type without `Display` is one error, here.
    #[inline]
    #[allow(clippy::type_complexity)]
    pub fn key<'s, 'k, Q: KeyParam + ?Sized>(
        &'s mut self,
        key: &'k Q,
    ) -> WithKey<
        's,
        'p,
        T,
        E,
        Opts<Head<C, S, D>, H, X>,
        Lent<
            'k,
            Q,
            impl Copy + Fn(&Q, Option<&mut dyn FnMut()>) -> KeyKind + use<T, E, C, S, D, H, X, Q>,
        >,
    > {
        WithKey {
            state: self,
            key: context::lent(key),
        }
    }

    /// The first attempt starts: a hook that hears the time, or a decider
    /// ([`Failure::elapsed`](super::Failure::elapsed)), gets the time the call started (`start`
    /// read it already if the policy has a deadline), and the budget gets this call's deposit.
    #[inline]
    fn begin(&mut self) {
        let timed =
            (H::TIMED && self.opts.hooks.timed()) || (X::DECIDES && self.opts.extras.decides());
        if timed && self.progress.started.is_none() {
            self.progress.started = Some((self.site.clock)());
        }
        if let Some(budget) = self.opts.extras.budget() {
            budget.deposit();
        }
    }

    /// The frame the next attempt runs in (which says whether it has a key) and how long to
    /// wait before making it (a rate-limiting gate's token not yet due); or the breaker's or
    /// the gate's refusal.
    #[inline]
    pub(crate) fn enter(&mut self, key: KeyKind) -> Result<(Frame, Duration), X::Refusal> {
        if let Some(ended) = self.opts.extras.ended() {
            return Err(ended);
        }
        // The first attempt begins the call; sent again by a decider ([`Next::Resend`]), not
        // a second time.
        if self.progress.retries == 0 && !(X::DECIDES && self.opts.extras.resent()) {
            self.begin();
        }
        let wait = match self.opts.extras.admit(self.site.clock) {
            Ok(wait) => wait,
            Err(refusal) => {
                if let Refusal::Shed { rejected, .. } = Into::<Refusal<E>>::into(refusal) {
                    self.spans.shed(
                        self.site.name,
                        self.progress.retries,
                        self.progress.previous_pause,
                        &rejected,
                    );
                }
                return Err(refusal);
            }
        };
        let frame = Frame {
            attempt: self.progress.retries + 1,
            key,
            retried_above: self.progress.retried_above || self.site.policy.get_max() > 0,
            hedge: 0,
        };
        Ok((frame, wait))
    }

    /// [`enter`](Retry::enter) for an async attempt: the frame, once the wait a gate asked for
    /// has passed (recorded as a pause inside [`testing::record`](crate::testing::record),
    /// slept otherwise); or the refusal, as the attempt's outcome.
    pub(crate) async fn enter_async(&mut self, key: KeyKind) -> Result<Frame, Attempted<T, E>>
    where
        S: Sleeper,
    {
        match self.enter(key) {
            Ok((frame, wait)) => {
                if !wait.is_zero() && !crate::testing::record_pause(wait) {
                    let sleeper = &self.opts.head.sleeper;
                    sleeper.sleep(wait).await;
                }
                Ok(frame)
            }
            Err(refusal) => Err(Into::<Refusal<E>>::into(refusal).into_attempted()),
        }
    }

    /// An attempt's time `limit`, clipped to the time left before the deadline once the call
    /// has started.
    pub(crate) fn clipped_limit(&self, limit: Duration) -> Duration {
        match (self.site.policy.get_deadline(), self.progress.started) {
            (Some(deadline), Some(_)) => {
                limit.min(deadline.saturating_sub(self.progress.elapsed(self.site.clock)))
            }
            _ => limit,
        }
    }

    /// What the fault injector planned for attempt `attempt` (feature `faults`), reported to
    /// the door's sink too.
    #[cfg(feature = "faults")]
    #[inline]
    pub(crate) fn planned(&self, attempt: u32) -> Option<Planned<E>> {
        let name = self.site.name;
        let (planned, event) = crate::faults::plan(&self.value, name, attempt)?;
        self.opts.extras.report(name, event);
        Some(planned)
    }

    /// The wait a gate asked for before an attempt, blocking: recorded as a pause inside
    /// [`testing::record`](crate::testing::record), slept otherwise.
    #[cold]
    fn wait_blocking(wait: Duration) {
        if !crate::testing::record_pause(wait) {
            std::thread::sleep(wait);
        }
    }

    /// The span of the attempt about to start (feature `attempt-spans`).
    #[inline]
    pub(crate) fn attempt_span(&mut self) -> AttemptSpan {
        self.spans.attempt(
            self.site.name,
            self.progress.retries,
            self.progress.previous_pause,
        )
    }

    /// Runs one attempt of a sync loop, with the attempt context in place.
    pub fn attempt(&mut self, body: impl FnOnce() -> Result<T, E>) -> Attempted<T, E> {
        self.attempt_lending((), body)
    }

    /// [`attempt`](Retry::attempt) with `key` lent to the attempt (`()` for none).
    #[inline]
    pub(crate) fn attempt_lending<Key: KeySlot>(
        &mut self,
        key: Key,
        body: impl FnOnce() -> Result<T, E>,
    ) -> Attempted<T, E> {
        let frame = match self.enter(key.kind()) {
            Ok((frame, wait)) => {
                if !wait.is_zero() {
                    Self::wait_blocking(wait);
                }
                frame
            }
            Err(refusal) => return Into::<Refusal<E>>::into(refusal).into_attempted(),
        };
        // Before the attempt's context: a body that does not read it keeps it out of its code.
        #[cfg(feature = "faults")]
        match self.planned(frame.attempt) {
            Some(Planned::Fail(error)) => return Attempted::Completed(Err(error.make())),
            Some(Planned::Late(latency)) => crate::faults::sleep_blocking(latency),
            None => {}
        }
        let _span = self.attempt_span().entered();
        let _entered = Enter::new(frame);
        Attempted::Completed(key.lend(body))
    }

    /// Runs one attempt of an async loop, with the attempt context in place on every poll. The
    /// returned future holds only the frame and the body's future, not the loop state; its
    /// outcome carries no key (`()`).
    pub fn run<F>(
        &mut self,
        body: F,
    ) -> impl Future<Output = KeyedOutcome<T, E, ()>> + use<T, E, C, S, D, H, X, F>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.run_lending((), body)
    }

    /// [`run`](Retry::run) with `key` lent to the attempt (`()` for none): its future holds the
    /// key's reference, and nothing else for it. One future type for both, which does all of
    /// an attempt in one `poll`: each call site instantiates one (`PERFORMANCE.md` §9).
    #[inline]
    pub(crate) fn run_lending<Key: KeySlot, F>(
        &mut self,
        key: Key,
        body: F,
    ) -> Run<super::spans::Body<F>, Key, X::Refusal, Held<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        // A gate's wait is not taken here: the expansion of a function with a `gate` runs its
        // attempts with `run_timed`, which takes it.
        match self.enter(key.kind()) {
            Ok((frame, _)) => {
                #[cfg(feature = "faults")]
                let delay = match self.planned(frame.attempt) {
                    Some(Planned::Fail(error)) => {
                        return Run::Injected {
                            error: Some(error),
                            key,
                        };
                    }
                    Some(Planned::Late(latency)) => crate::faults::sleep(latency),
                    None => None,
                };
                #[cfg(not(feature = "faults"))]
                let delay = ();
                Run::Attempt {
                    frame,
                    key,
                    delay,
                    future: self.attempt_span().instrument(body),
                }
            }
            Err(refusal) => Run::Refused { refusal, key },
        }
    }

    /// [`run`](Retry::run) with `timeout`: the attempt races the timer, whose limit is clipped to
    /// the time left before the deadline. `make` makes the body's future inside the attempt's
    /// context, so that a closure that reads [`attempt()`](crate::attempt) as it makes the
    /// future reads this attempt. A method of its own: `PERFORMANCE.md` §4.
    pub fn run_timed<F>(&mut self, body: F) -> impl Future<Output = Attempted<T, E>>
    where
        S: Sleeper,
        F: Future<Output = Result<T, E>>,
    {
        self.run_made((), || body)
    }

    /// One attempt of [`drive`](super::drive) and of `run_timed`: the body's future made by
    /// `make` inside the attempt's context, raced against `timeout` if there is one.
    pub(crate) async fn run_made<Key: KeySlot, F>(
        &mut self,
        key: Key,
        make: impl FnOnce() -> F,
    ) -> Attempted<T, E>
    where
        S: Sleeper,
        F: Future<Output = Result<T, E>>,
    {
        let frame = match self.enter_async(key.kind()).await {
            Ok(frame) => frame,
            Err(refused) => return refused,
        };
        // An injected error ends the attempt before its future is made; a latency runs inside
        // the attempt's timeout.
        #[cfg(feature = "faults")]
        let latency = match self.planned(frame.attempt) {
            Some(Planned::Fail(error)) => return Attempted::Completed(Err(error.make())),
            Some(Planned::Late(latency)) => Some(latency),
            None => None,
        };
        let body = {
            let _entered = Enter::new(frame);
            key.lend(make)
        };
        #[cfg(feature = "faults")]
        let body = crate::faults::Faulty::new(latency, body);
        let attempt = Scoped::new(frame, key, self.attempt_span().instrument(body));
        let Some(timeout) = self.opts.extras.timeout() else {
            return Attempted::Completed(attempt.await);
        };
        let limit = self.clipped_limit(timeout.limit);
        let sleeper = &self.opts.head.sleeper;
        match Timed::new(attempt, sleeper.sleep(limit), limit).await {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => Attempted::TimedOut((timeout.error)(elapsed)),
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt of an async loop: the body with its frame (and its key, if any) in place on
    /// every poll, or the breaker's refusal, returned without running the body.
    #[project = RunProj]
    #[doc(hidden)]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum Run<F, K, Ref, I> {
        /// The body runs, after an injected latency if any (feature `faults`).
        Attempt { frame: Frame, key: K, delay: Delay, #[pin] future: F },
        /// The breaker refused: its refusal, turned into the loop's error when polled. A loop
        /// without a breaker has [`NoRefusal`](super::NoRefusal) here, so this variant takes no
        /// room in its future.
        Refused { refusal: Ref, key: K },
        /// An injected error, returned when polled (feature `faults`; without it the type has
        /// no value, so this variant takes no room).
        Injected { error: I, key: K },
    }
}

impl<T, E, F, K, Ref, I> Future for Run<F, K, Ref, I>
where
    F: Future<Output = Result<T, E>>,
    K: KeySlot,
    Ref: Into<Refusal<E>> + Copy,
    I: Holds<E>,
{
    /// The outcome, with the key the attempt borrowed (held once, by the attempt).
    type Output = KeyedOutcome<T, E, K>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let (attempted, key) = match self.project() {
            RunProj::Attempt {
                frame,
                key,
                delay,
                future,
            } => {
                if crate::faults::delaying(delay, cx) {
                    return Poll::Pending;
                }
                let _entered = Enter::new(*frame);
                match key.lend(|| future.poll(cx)) {
                    Poll::Ready(outcome) => (Attempted::Completed(outcome), *key),
                    Poll::Pending => return Poll::Pending,
                }
            }
            RunProj::Refused { refusal, key } => {
                let refusal: Refusal<E> = (*refusal).into();
                (refusal.into_attempted(), *key)
            }
            RunProj::Injected { error, key } => match error.take() {
                Some(error) => (Attempted::Completed(Err(error)), *key),
                None => return Poll::Pending,
            },
        };
        Poll::Ready(KeyedOutcome { attempted, key })
    }
}
