//! The start of the loop of a `retry!` block: the same [`Retry`] state as the attribute's, its
//! type taken from the block's own closure rather than from a return type written out.
//!
//! `retry!` binds the block to a closure first (`|| { body }`, or `async || { body }`), whose
//! output the compiler infers from the body; `SyncBlock::of(&body).start(...)` then reads `T` and
//! `E` from it. As for the attribute, `start` comes twice: the inherent one for an error type with
//! `Debug`, and the one of [`SyncBlockWithoutDebug`] (or [`AsyncBlockWithoutDebug`]) for any
//! other, which the expansion imports as `_`; Rust picks the inherent one whenever `E: Debug`
//! holds.

use super::{Hooks, IntoVerdict, LogDebug, LogName, Retry, Unset, std_now};
use crate::Policy;
use std::marker::PhantomData;

/// The type of a sync block's closure `B`, for [`start`](SyncBlock::start).
pub struct SyncBlock<B>(PhantomData<fn() -> B>);

/// The type of an async block's closure `B`, for [`start_async`](AsyncBlock::start_async).
pub struct AsyncBlock<B>(PhantomData<fn() -> B>);

impl<B> SyncBlock<B> {
    /// The type of `body`; borrows it only for the call.
    #[inline(always)]
    pub fn of(_body: &B) -> Self {
        SyncBlock(PhantomData)
    }
}

impl<B> AsyncBlock<B> {
    /// The type of `body`; borrows it only for the call.
    #[inline(always)]
    pub fn of(_body: &B) -> Self {
        AsyncBlock(PhantomData)
    }
}

impl<B, T, E: std::fmt::Debug> SyncBlock<B>
where
    B: FnMut() -> Result<T, E>,
{
    /// [`Retry::start`] for the block's `Result<T, E>`.
    #[inline(always)]
    pub fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogDebug>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }
}

/// `start` of a sync block whose error type has no `Debug`: see [`SyncBlock::start`].
pub trait SyncBlockWithoutDebug<T, E>: Sized {
    /// See [`SyncBlock::start`].
    fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict;
}

impl<B, T, E> SyncBlockWithoutDebug<T, E> for SyncBlock<B>
where
    B: FnMut() -> Result<T, E>,
{
    #[inline(always)]
    fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }
}

/// The sleeper of an async block without `sleep = f`: tokio's timer, or without the `tokio`
/// feature the timer whose bound asks for the feature or `sleep`.
#[cfg(feature = "tokio")]
type DefaultTimer = crate::timer::TokioTimer;
#[cfg(not(feature = "tokio"))]
type DefaultTimer = crate::timer::NoTimer;

use super::async_default_clock as default_clock;

impl<B, T, E: std::fmt::Debug> AsyncBlock<B>
where
    B: AsyncFnMut() -> Result<T, E>,
{
    /// [`Retry::start_async`] for the block's `Result<T, E>`.
    #[inline(always)]
    pub fn start_async<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, DefaultTimer, Hooks, Unset, LogDebug>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        DefaultTimer: crate::timer::TimerFor<T>,
    {
        Retry::with_parts(policy, name, default_clock, classify, DefaultTimer {})
    }

    /// [`Retry::start`] for an async block with `sleep = f`, which replaces the timer.
    #[inline(always)]
    pub fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogDebug>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }
}

/// `start_async` and `start` of an async block whose error type has no `Debug`: see
/// [`AsyncBlock::start_async`].
pub trait AsyncBlockWithoutDebug<T, E>: Sized {
    /// See [`AsyncBlock::start_async`].
    fn start_async<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, DefaultTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        DefaultTimer: crate::timer::TimerFor<T>;

    /// See [`AsyncBlock::start`].
    fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict;
}

impl<B, T, E> AsyncBlockWithoutDebug<T, E> for AsyncBlock<B>
where
    B: AsyncFnMut() -> Result<T, E>,
{
    #[inline(always)]
    fn start_async<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, DefaultTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        DefaultTimer: crate::timer::TimerFor<T>,
    {
        Retry::with_parts(policy, name, default_clock, classify, DefaultTimer {})
    }

    #[inline(always)]
    fn start<'p, C, V>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }
}
