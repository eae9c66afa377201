//! The attempt context: which attempt is running, with which idempotency key, and whether a
//! layer above already retries this work.
//!
//! It lives in a thread-local that a sync attempt sets for its duration and an async attempt
//! sets around each poll of its future, so it follows a task across `.await` points and
//! threads, and nested annotated functions each see their own.

use crate::IdempotencyKey;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// What an attempt puts in place: small and `Copy`, so entering and leaving an attempt is two
/// plain thread-local writes. The key lives in its own slot, touched only by functions that
/// have one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The running attempt (1 for the first call); 0 outside an annotated function.
    pub attempt: u32,
    /// This attempt's function has an idempotency key, in the `KEY` slot.
    pub has_key: bool,
    /// A layer above retries this work: an enclosing annotated function that is retrying, or
    /// [`scope::caller_retries`].
    pub retried_above: bool,
}

impl Frame {
    /// One `u64`, so that entering and leaving are single whole-word loads and stores: a frame
    /// stored field by field and loaded whole would stall the load on every call.
    #[inline]
    const fn pack(self) -> u64 {
        self.attempt as u64 | (self.has_key as u64) << 32 | (self.retried_above as u64) << 33
    }

    #[inline]
    const fn unpack(bits: u64) -> Frame {
        Frame {
            attempt: bits as u32,
            has_key: bits & (1 << 32) != 0,
            retried_above: bits & (1 << 33) != 0,
        }
    }
}

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    static KEY: RefCell<Option<IdempotencyKey>> = const { RefCell::new(None) };
}

/// The current frame.
#[inline]
pub(crate) fn current() -> Frame {
    Frame::unpack(CURRENT.with(Cell::get))
}

/// Puts a frame (and its key, if it has one) in place until dropped, then puts the previous
/// ones back (also on panic).
pub(crate) struct Enter<'a> {
    previous: u64,
    key: Option<&'a mut Option<IdempotencyKey>>,
}

impl<'a> Enter<'a> {
    /// Enters `frame`; a `key` is swapped into the key slot for the duration and back out
    /// afterwards. Without one the key slot is left alone.
    #[inline]
    pub(crate) fn new(frame: Frame, mut key: Option<&'a mut Option<IdempotencyKey>>) -> Self {
        let previous = CURRENT.with(|c| c.replace(frame.pack()));
        if let Some(key) = key.as_deref_mut() {
            KEY.with(|slot| std::mem::swap(&mut *slot.borrow_mut(), key));
        }
        Enter { previous, key }
    }
}

impl Drop for Enter<'_> {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
        if let Some(key) = self.key.as_deref_mut() {
            KEY.with(|slot| std::mem::swap(&mut *slot.borrow_mut(), key));
        }
    }
}

/// Where an attempt keeps its idempotency key while it is not in the thread-local slot:
/// `Option<IdempotencyKey>` for a function that has one, `()` (nothing at all) for the rest.
pub trait KeySlot {
    /// The key to swap into the thread-local slot while the attempt runs, if there is one.
    fn slot(&mut self) -> Option<&mut Option<IdempotencyKey>>;
}

impl KeySlot for () {
    #[inline(always)]
    fn slot(&mut self) -> Option<&mut Option<IdempotencyKey>> {
        None
    }
}

impl KeySlot for Option<IdempotencyKey> {
    #[inline(always)]
    fn slot(&mut self) -> Option<&mut Option<IdempotencyKey>> {
        if self.is_some() { Some(self) } else { None }
    }
}

pin_project_lite::pin_project! {
    /// A future that runs with its frame in place on every poll.
    #[doc(hidden)]
    pub struct Scoped<F, K = ()> {
        frame: Frame,
        key: K,
        #[pin]
        future: F,
    }
}

impl<F, K> Scoped<F, K> {
    #[inline(always)]
    pub(crate) fn new(frame: Frame, key: K, future: F) -> Self {
        Scoped { frame, key, future }
    }
}

impl<F: Future, K: KeySlot> Future for Scoped<F, K> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = Enter::new(*this.frame, this.key.slot());
        this.future.poll(cx)
    }
}

/// The attempt that is running, as seen from inside an annotated function's body.
///
/// ```
/// use retry_runtime::{attempt, retry, IdempotencyKey, non_idempotent};
/// use std::io;
///
/// #[non_idempotent]
/// #[retry(max = 2, base = "1ms", jitter = none)]
/// fn pay_out(key: &IdempotencyKey, log: &mut Vec<String>) -> io::Result<()> {
///     let now = attempt();
///     // What a client would send as `Idempotency-Key` and `Retry-Attempt` headers.
///     log.push(format!("{} {}", now.key().map_or("", |k| k.as_str()), now.number()));
///     if now.number() < 3 { Err(io::ErrorKind::ConnectionReset.into()) } else { Ok(()) }
/// }
///
/// let key = IdempotencyKey::from("payout-4711");
/// let mut log = Vec::new();
/// pay_out(&key, &mut log).unwrap();
/// assert_eq!(log, ["payout-4711 1", "payout-4711 2", "payout-4711 3"]);
/// assert_eq!(attempt().number(), 1); // outside: a plain call is a first attempt
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    number: u32,
    key: Option<IdempotencyKey>,
}

impl Attempt {
    /// The attempt number: 1 for the first call, 2 for the first retry, and so on. Outside an
    /// annotated function it is 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// `true` from the second attempt on.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// The idempotency key of a `#[non_idempotent]` function: the same on every attempt.
    pub fn key(&self) -> Option<&IdempotencyKey> {
        self.key.as_ref()
    }
}

/// The attempt that is running in the innermost annotated function on this thread (or in this
/// task, for async functions). See [`Attempt`].
pub fn attempt() -> Attempt {
    let frame = current();
    let key = if frame.has_key {
        KEY.with(|slot| slot.borrow().clone())
    } else {
        None
    };
    Attempt {
        number: frame.attempt.max(1),
        key,
    }
}

pub mod scope {
    //! One retrying layer across processes: a service whose caller already retries runs its own
    //! annotated functions with a single attempt each.
    //!
    //! A portal that retries 4 times a service that tries its database 3 times makes 12 database
    //! calls from one request. Inside one process, nested annotated functions already leave the
    //! retrying to the outermost one. Across a network hop, the caller says so with a header:
    //!
    //! ```
    //! use retry_runtime::{attempt, retry, scope};
    //! use std::cell::Cell;
    //! use std::io;
    //!
    //! // Client side: every attempt sends `Retry-Attempt: <n>`.
    //! let (name, value) = scope::AttemptHeader::DEFAULT.for_current_attempt();
    //! assert_eq!((name, value.as_str()), ("Retry-Attempt", "1"));
    //!
    //! // Service side: a request that carries the header is retried by its caller.
    //! #[retry(max = 3, base = "1ms")]
    //! fn query_database(calls: &Cell<u32>) -> io::Result<()> {
    //!     calls.set(calls.get() + 1);
    //!     Err(io::ErrorKind::TimedOut.into())
    //! }
    //! let calls = Cell::new(0);
    //! let header = Some("2");
    //! let result = if scope::AttemptHeader::DEFAULT.caller_retries(header) {
    //!     scope::caller_retries(|| query_database(&calls))
    //! } else {
    //!     query_database(&calls)
    //! };
    //! assert!(result.is_err());
    //! assert_eq!(calls.get(), 1); // one attempt: the caller does the retrying
    //! ```

    use super::{Enter, Frame, Scoped, attempt, current};
    use std::future::Future;

    /// Runs `f` as work that a layer above retries: annotated functions called inside make one
    /// attempt each (unless they say `nested = retry`).
    pub fn caller_retries<R>(f: impl FnOnce() -> R) -> R {
        let _entered = Enter::new(marked_frame(), None);
        f()
    }

    /// The async form of [`caller_retries`]: annotated functions awaited inside `future` make
    /// one attempt each.
    pub fn caller_retries_async<F: Future>(future: F) -> impl Future<Output = F::Output> {
        Scoped::new(marked_frame(), (), future)
    }

    /// The current frame, marked as retried above; it keeps the attempt number and whether a
    /// key is in place, and leaves the key slot alone.
    fn marked_frame() -> Frame {
        Frame {
            retried_above: true,
            ..current()
        }
    }

    /// An attempt-count header: the client writes the attempt number, the service reads it to
    /// know that its caller retries.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct AttemptHeader {
        name: &'static str,
    }

    impl AttemptHeader {
        /// `Retry-Attempt`.
        pub const DEFAULT: AttemptHeader = AttemptHeader::named("Retry-Attempt");

        /// A header with another name, such as `X-Retry-Attempt`.
        pub const fn named(name: &'static str) -> Self {
            AttemptHeader { name }
        }

        /// The header's name.
        pub const fn name(&self) -> &'static str {
            self.name
        }

        /// The header to send with the current attempt: its name and the attempt number.
        pub fn for_current_attempt(&self) -> (&'static str, String) {
            (self.name, attempt().number().to_string())
        }

        /// Reads the header's value: the caller's attempt number, or `None` when it is not a
        /// positive whole number.
        pub fn parse(&self, value: &str) -> Option<u32> {
            value.trim().parse().ok().filter(|n| *n >= 1)
        }

        /// `true` when the request carries a valid attempt number, so its caller is a
        /// retrying client and this service should not retry on its behalf.
        pub fn caller_retries(&self, value: Option<&str>) -> bool {
            value.and_then(|v| self.parse(v)).is_some()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_restores_the_previous_frame_and_key() {
        let mut outer_key = Some(IdempotencyKey::from("outer"));
        let outer = Frame {
            attempt: 2,
            has_key: true,
            ..Frame::default()
        };
        let _a = Enter::new(outer, Some(&mut outer_key));
        {
            let _b = Enter::new(
                Frame {
                    attempt: 5,
                    ..Frame::default()
                },
                None,
            );
            assert_eq!(
                attempt(),
                Attempt {
                    number: 5,
                    key: None
                }
            );
        }
        assert_eq!(attempt().number(), 2);
        assert_eq!(attempt().key().map(IdempotencyKey::as_str), Some("outer"));
    }

    #[test]
    fn header_parsing() {
        let h = scope::AttemptHeader::DEFAULT;
        assert_eq!(h.parse(" 3 "), Some(3));
        assert_eq!(h.parse("0"), None);
        assert_eq!(h.parse("-1"), None);
        assert_eq!(h.parse("x"), None);
        assert!(h.caller_retries(Some("1")));
        assert!(!h.caller_retries(None));
        assert_eq!(scope::AttemptHeader::named("X-Try").name(), "X-Try");
    }
}
