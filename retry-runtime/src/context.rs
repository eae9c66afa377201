//! The attempt context: which attempt is running, with which idempotency key, and whether a
//! layer above already retries this work.
//!
//! It lives in a thread-local that a sync attempt sets for its duration and an async attempt
//! sets around each poll of its future, so it follows a task across `.await` points and
//! threads, and nested annotated functions each see their own.

use crate::IdempotencyKey;
use std::cell::Cell;
use std::fmt::Display;
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
    /// Where this attempt's function lends its idempotency key, if it has one.
    pub key: KeyKind,
    /// A layer above retries this work: an enclosing annotated function that is retrying, or
    /// [`scope::caller_retries`].
    pub retried_above: bool,
    /// 0 for the attempt itself, `n` for its `n`-th hedge (`hedge = ...`), a copy started
    /// because the attempt had not answered in time.
    pub hedge: u16,
}

impl Frame {
    /// One `u64` in the thread-local: `state/PERFORMANCE.md` §7.
    #[inline]
    const fn pack(self) -> u64 {
        self.attempt as u64
            | (self.key as u64) << 32
            | (if self.retried_above { RETRIED_ABOVE } else { 0 })
            | (self.hedge as u64) << 35
    }

    #[inline]
    const fn unpack(bits: u64) -> Frame {
        Frame {
            attempt: bits as u32,
            key: match (bits >> 32) & 0b11 {
                1 => KeyKind::Display,
                2 => KeyKind::Text,
                _ => KeyKind::None,
            },
            retried_above: bits & RETRIED_ABOVE != 0,
            hedge: (bits >> 35) as u16,
        }
    }
}

/// The bit of a packed frame that says a layer above retries.
const RETRIED_ABOVE: u64 = 1 << 34;

/// A frame packed once, for a future that enters it on every poll (a first attempt made before
/// its loop): entering it is one thread-local write, with no packing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packed(u64);

impl Packed {
    /// `frame`, packed.
    #[inline]
    pub(crate) const fn new(frame: Frame) -> Self {
        Packed(frame.pack())
    }

    /// The same frame with `retried_above` set to `yes`.
    #[inline]
    pub(crate) const fn retried_above(self, yes: bool) -> Self {
        Packed(self.0 & !RETRIED_ABOVE | (if yes { RETRIED_ABOVE } else { 0 }))
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Frame::unpack(self.0).fmt(f)
    }
}

thread_local! {
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// Whether the current frame says a layer above retries ([`Frame::retried_above`]).
#[inline]
pub(crate) fn retried_above() -> bool {
    CURRENT.with(Cell::get) & RETRIED_ABOVE != 0
}

/// Which slot holds the running attempt's idempotency key.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyKind {
    /// The function has no key.
    #[default]
    None = 0,
    /// A key of a sized type (`u64`, `Uuid`, `String`, `IdempotencyKey`, ...), in `KEY`.
    Display = 1,
    /// A `str` key (a `&str` parameter), in `KEY_TEXT`.
    Text = 2,
}

// The key parameter of the running attempt, borrowed for as long as the attempt runs (sync) or is
// polled (async), and put back as it was afterwards, also on panic. A borrow, not a copy: the
// key is rendered only when `attempt()` asks for it, so a keyed function's attempts neither
// allocate nor format. A thread-local cannot hold a borrow by itself; `scoped-tls-hkt`'s
// `ScopedKey` holds it for exactly the span of a closure, with its `unsafe` inside that crate
// (the plain form of its macro expands to safe code here, which `forbid(unsafe_code)` keeps so).
// A trait object needs a sized type behind it, so a `str` key has a slot of its own.
scoped_tls_hkt::scoped_thread_local!(static KEY: dyn Display);
scoped_tls_hkt::scoped_thread_local!(static KEY_TEXT: str);

/// The current frame.
#[inline]
pub(crate) fn current() -> Frame {
    Frame::unpack(CURRENT.with(Cell::get))
}

/// Puts a frame in place until dropped, then puts the previous one back (also on panic).
pub(crate) struct Enter {
    previous: u64,
}

impl Enter {
    /// Enters `frame`. The key slot is left alone: [`KeySlot::lend`] fills it.
    #[inline]
    pub(crate) fn new(frame: Frame) -> Self {
        Enter::packed(Packed::new(frame))
    }

    /// Enters a frame packed before.
    #[inline]
    pub(crate) fn packed(frame: Packed) -> Self {
        let previous = CURRENT.with(|c| c.replace(frame.0));
        Enter { previous }
    }
}

impl Drop for Enter {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// What an attempt lends to `attempt().key()`: nothing at all (`()`) for a function without an
/// idempotency key, the key parameter ([`Lent`]) for one that has it.
pub trait KeySlot: Copy {
    /// Whether there is a key, and in which slot: for `()` a constant, so that a function
    /// without a key never looks.
    #[doc(hidden)]
    fn kind(&self) -> KeyKind;
    /// Runs `f` with the key, if there is one, in the thread-local slot.
    #[doc(hidden)]
    fn lend<R>(self, f: impl FnOnce() -> R) -> R;
}

impl KeySlot for () {
    #[inline]
    fn kind(&self) -> KeyKind {
        KeyKind::None
    }
    #[inline]
    fn lend<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// A key parameter, borrowed for the attempts, with how to lend it (`L`: a function item of
/// [`KeyParam`], zero-sized): made by `Retry::key`, where the parameter's type is known to be a
/// key, so that nothing after it asks again (a type that is no key is one error, there), and
/// the loop carries one reference for it (`PERFORMANCE.md` §7).
#[doc(hidden)]
pub struct Lent<'a, Q: ?Sized, L> {
    pub(crate) key: &'a Q,
    pub(crate) lend: L,
}

// By hand: a derive would ask `Q: Copy`.
impl<Q: ?Sized, L: Copy> Clone for Lent<'_, Q, L> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Q: ?Sized, L: Copy> Copy for Lent<'_, Q, L> {}

impl<Q: ?Sized, L> KeySlot for Lent<'_, Q, L>
where
    L: Copy + Fn(&Q, Option<&mut dyn FnMut()>) -> KeyKind,
{
    #[inline]
    fn kind(&self) -> KeyKind {
        (self.lend)(self.key, None)
    }
    #[inline]
    fn lend<R>(self, f: impl FnOnce() -> R) -> R {
        let mut f = Some(f);
        let mut result = None;
        (self.lend)(self.key, Some(&mut || result = f.take().map(|f| f())));
        match result {
            Some(result) => result,
            // `lend_as_key` runs its closure exactly once (`KEY.set` and `KEY_TEXT.set` do).
            None => unreachable!("a key's `lend` did not run the attempt"),
        }
    }
}

/// A parameter that can be the idempotency key: any type that implements [`Display`] and borrows
/// nothing itself (`u64`, `Uuid`, `str`, `String`, [`IdempotencyKey`], ...), by value or
/// behind references, so that the key can be sent as text. The expansion passes the parameter
/// past its references (`&*key` for `key: &str`).
///
/// Each attempt borrows the parameter for `attempt().key()`, which renders it only when the body
/// asks; the attempts themselves neither copy nor render it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an idempotency key: a key parameter's type must implement `Display`",
    label = "`{Self}` does not implement `Display`",
    note = "every attempt sends the key as text, and `attempt().key()` renders it with `Display`: an order number (`u64`), a `Uuid`, a `&str` or `String` and an `IdempotencyKey` all can be keys",
    note = "implement `std::fmt::Display` for the type (writing the text every attempt sends), or make the key a parameter of its own, like `#[idempotency_key] order_number: u64`"
)]
pub(crate) trait KeyParam: Display + 'static {
    /// Which slot the key goes to; and with `f`, runs it with the key lent to the attempt
    /// context.
    fn lend_as_key(&self, f: Option<&mut dyn FnMut()>) -> KeyKind;
}

impl<K: Display + 'static> KeyParam for K {
    #[inline]
    fn lend_as_key(&self, f: Option<&mut dyn FnMut()>) -> KeyKind {
        if let Some(f) = f {
            KEY.set(self, f);
        }
        KeyKind::Display
    }
}

#[diagnostic::do_not_recommend]
impl KeyParam for str {
    #[inline]
    fn lend_as_key(&self, f: Option<&mut dyn FnMut()>) -> KeyKind {
        if let Some(f) = f {
            KEY_TEXT.set(self, f);
        }
        KeyKind::Text
    }
}

/// `key`, borrowed for the attempts.
#[inline]
#[allow(private_bounds, clippy::type_complexity)]
pub(crate) fn lent<Q: KeyParam + ?Sized>(
    key: &Q,
) -> Lent<'_, Q, impl Copy + Fn(&Q, Option<&mut dyn FnMut()>) -> KeyKind + use<Q>> {
    Lent {
        key,
        lend: Q::lend_as_key,
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
    #[inline]
    pub(crate) fn new(frame: Frame, key: K, future: F) -> Self {
        Scoped { frame, key, future }
    }
}

impl<F: Future, K: KeySlot> Future for Scoped<F, K> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = Enter::new(*this.frame);
        let future = this.future;
        this.key.lend(|| future.poll(cx))
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
    hedge: u16,
}

impl Attempt {
    /// The attempt number: 1 for the first call, 2 for the first retry, and so on. Outside an
    /// annotated function it is 1.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// 0 for an attempt, `n` for its `n`-th hedge: a copy of the attempt that `hedge = ...`
    /// started because the attempt had not answered in time. A hedge has the attempt's
    /// [`number`](Attempt::number) and [`key`](Attempt::key).
    pub fn hedge(&self) -> u16 {
        self.hedge
    }

    /// `true` from the second attempt on.
    pub fn is_retry(&self) -> bool {
        self.number > 1
    }

    /// The idempotency key of the running function, the same on every attempt: its parameter of
    /// type [`IdempotencyKey`], or the one marked `#[idempotency_key]` (an order number, a
    /// `Uuid`, a string: any type that implements `Display`), as the text its `Display` writes.
    /// `None` outside a function with a key, and in a function without one that it calls.
    pub fn key(&self) -> Option<&IdempotencyKey> {
        self.key.as_ref()
    }
}

/// The attempt that is running in the innermost annotated function on this thread (or in this
/// task, for async functions). See [`Attempt`].
///
/// The [`Attempt`] is a copy, made when this is called: keep it across `.await`s, or send it to
/// another thread, and it still describes the attempt that took it. In a function with an
/// idempotency key, the copy holds the key as text: the attempts only lend the key parameter,
/// and it is rendered here, with its `Display` (a small allocation), so that a body that never
/// calls `attempt()` pays nothing for its key.
pub fn attempt() -> Attempt {
    let frame = current();
    let key = match frame.key {
        KeyKind::Display if KEY.is_set() => Some(KEY.with(IdempotencyKey::render)),
        KeyKind::Text if KEY_TEXT.is_set() => {
            Some(KEY_TEXT.with(|key: &str| IdempotencyKey::from(key)))
        }
        _ => None,
    };
    Attempt {
        number: frame.attempt.max(1),
        key,
        hedge: frame.hedge,
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
    //! let (name, value) = retry_runtime::headers::AttemptHeader::DEFAULT.for_current_attempt();
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
    //! let result = if retry_runtime::headers::AttemptHeader::DEFAULT.caller_retries(header) {
    //!     scope::caller_retries(|| query_database(&calls))
    //! } else {
    //!     query_database(&calls)
    //! };
    //! assert!(result.is_err());
    //! assert_eq!(calls.get(), 1); // one attempt: the caller does the retrying
    //! ```

    use super::{Enter, Frame, Scoped, current};
    use std::future::Future;

    /// Runs `f` as work that a layer above retries: annotated functions called inside make one
    /// attempt each (unless they say `nested = retry`).
    pub fn caller_retries<R>(f: impl FnOnce() -> R) -> R {
        let _entered = Enter::new(marked_frame());
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

    // The header that carries the attempt number across a hop: with the other headers.
    pub use crate::headers::AttemptHeader;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enter_and_lend_restore_the_previous_frame_and_key() {
        let outer_key = IdempotencyKey::from("outer");
        let outer = Frame {
            attempt: 2,
            key: KeyKind::Display,
            ..Frame::default()
        };
        let _a = Enter::new(outer);
        KeySlot::lend(lent(&outer_key), || {
            {
                // An inner function without a key: its frame says so, the slot is left alone.
                let _b = Enter::new(Frame {
                    attempt: 5,
                    ..Frame::default()
                });
                assert_eq!(
                    attempt(),
                    Attempt {
                        number: 5,
                        key: None,
                        hedge: 0,
                    }
                );
                // An inner function with a key of another type: its own, rendered.
                let _c = Enter::new(Frame {
                    attempt: 1,
                    key: KeyKind::Display,
                    ..Frame::default()
                });
                KeySlot::lend(lent(&4711u64), || {
                    assert_eq!(attempt().key().map(IdempotencyKey::as_str), Some("4711"));
                    // Deeper, a `str` key in the other slot: the innermost frame says which.
                    let _d = Enter::new(Frame {
                        attempt: 3,
                        key: KeyKind::Text,
                        ..Frame::default()
                    });
                    KeySlot::lend(lent("text-key"), || {
                        assert_eq!(
                            attempt().key().map(IdempotencyKey::as_str),
                            Some("text-key")
                        );
                    });
                });
            }
            assert_eq!(attempt().number(), 2);
            assert_eq!(attempt().key().map(IdempotencyKey::as_str), Some("outer"));
        });
        // The slot is empty again, so a frame that claims a key still gets none.
        assert_eq!(attempt().key(), None);
    }

    #[test]
    fn a_panic_under_a_lent_key_puts_the_slot_back() {
        let caught = std::panic::catch_unwind(|| {
            KeySlot::lend(lent("claim-1"), || -> () { panic!("the body panicked") })
        });
        assert!(caught.is_err());
        assert!(!KEY_TEXT.is_set());
    }
}
