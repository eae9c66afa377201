//! Which errors are worth another try.

use std::io;
use std::time::Duration;

/// What to do after a failed attempt: the answer of a classifier (`on = ...`), or of an
/// `on_result = ...` about an `Ok` value.
///
/// A classifier may return `bool` (`true` is [`Verdict::Retry`], `false` is [`Verdict::Fail`])
/// or a `Verdict`, which can also carry a pause the server asked for, or ask for a retry at
/// once. These are the three strategies of the retry pattern: give up, retry after a pause,
/// and retry at once for a rare, one-off fault.
///
/// Later versions may add verdicts (`#[non_exhaustive]`), so a `match` outside this crate needs
/// a `_` arm.
///
/// ```
/// use retry_runtime::Verdict;
/// use std::time::Duration;
///
/// assert_eq!(Verdict::from(true), Verdict::Retry);
/// assert_eq!(Verdict::from(false), Verdict::Fail);
/// let server_said = Verdict::RetryAfter(Duration::from_secs(30));
/// assert!(server_said.is_retry());
/// assert!(Verdict::RetryNow.is_retry());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// A passing failure: pause per the policy, then try again.
    Retry,
    /// A passing failure, and the server said how long to wait (HTTP `Retry-After`, gRPC
    /// pushback): the next pause is at least this long, spread above it by the function's
    /// jitter (see [`Policy::delay_at_least`](crate::Policy::delay_at_least)). If it is longer
    /// than `max_delay`, or would end past the deadline, the loop gives up at once instead.
    RetryAfter(Duration),
    /// A rare, one-off fault that is worth another try at once (a connection from the pool
    /// that turned out to be closed, a leader that just changed): retry without a pause. The
    /// retry still counts against the limit, draws from the `budget` and asks the `breaker`,
    /// and the `deadline` still holds. For anything that may last, use [`Retry`](Verdict::Retry):
    /// retrying an overloaded service at once makes its overload worse.
    RetryNow,
    /// Not worth another try: return the error at once.
    Fail,
    /// The service shed the attempt to protect itself (HTTP 429, a 503 with `Retry-After`,
    /// gRPC `RESOURCE_EXHAUSTED`, an AWS throttling code): a passing failure, but not a
    /// transient one. The pause follows the policy's
    /// [`throttle_base`](crate::Policy::throttle_base) (its `base` unless set), and an
    /// admission `gate` learns that the service is shedding load
    /// ([`GateOutcome::Throttled`](crate::GateOutcome::Throttled)).
    Throttled,
    /// [`Throttled`](Verdict::Throttled), and the server said how long to wait: the next pause
    /// is at least this long, as with [`RetryAfter`](Verdict::RetryAfter).
    ThrottledAfter(Duration),
}

impl Verdict {
    /// `true` for every verdict but [`Fail`](Verdict::Fail).
    pub const fn is_retry(&self) -> bool {
        !matches!(self, Verdict::Fail)
    }

    /// `true` for [`Throttled`](Verdict::Throttled) and
    /// [`ThrottledAfter`](Verdict::ThrottledAfter): the service shed the attempt.
    pub const fn is_throttled(&self) -> bool {
        matches!(self, Verdict::Throttled | Verdict::ThrottledAfter(_))
    }

    /// The pause the server asked for, if any.
    pub const fn suggested_pause(&self) -> Option<Duration> {
        match self {
            Verdict::RetryAfter(pause) | Verdict::ThrottledAfter(pause) => Some(*pause),
            _ => None,
        }
    }

    /// The same verdict, as a throttling one if it retries: [`Retry`](Verdict::Retry) and
    /// [`RetryNow`](Verdict::RetryNow) become [`Throttled`](Verdict::Throttled),
    /// [`RetryAfter`](Verdict::RetryAfter) becomes [`ThrottledAfter`](Verdict::ThrottledAfter).
    ///
    /// ```
    /// use retry_runtime::Verdict;
    /// use std::time::Duration;
    ///
    /// let busy = Verdict::RetryAfter(Duration::from_secs(2)).throttled();
    /// assert_eq!(busy, Verdict::ThrottledAfter(Duration::from_secs(2)));
    /// assert!(busy.is_throttled());
    /// assert_eq!(Verdict::Fail.throttled(), Verdict::Fail);
    /// ```
    pub const fn throttled(self) -> Verdict {
        match self {
            Verdict::Retry | Verdict::RetryNow | Verdict::Throttled => Verdict::Throttled,
            Verdict::RetryAfter(pause) | Verdict::ThrottledAfter(pause) => {
                Verdict::ThrottledAfter(pause)
            }
            Verdict::Fail => Verdict::Fail,
        }
    }
}

impl From<bool> for Verdict {
    fn from(transient: bool) -> Self {
        if transient {
            Verdict::Retry
        } else {
            Verdict::Fail
        }
    }
}

/// Says whether an error is passing, so that the same call may succeed after a pause.
///
/// `#[retry]` without `on = ...` asks the error type through this trait; for a type without it
/// the compile error offers `on = ...` or an impl, and for a client's error that a feature of
/// this crate classifies (`sqlx::Error`, `tokio_postgres::Error`, `reqwest::Error`,
/// `tonic::Status`, see [`integrations`](crate::integrations)) it names the feature and the line
/// of `Cargo.toml` that turns it on.
///
/// Answer `true` only for technical, passing failures: an overloaded service, a dropped
/// connection, a timeout. A business answer ("not covered") belongs in `Ok`; invalid input or
/// missing permission will not change by waiting, so those are `false`.
///
/// ```
/// use retry_runtime::Transient;
///
/// #[derive(Debug)]
/// enum ContractError {
///     Overloaded,
///     ConnectionLost,
///     InvalidClaim,
/// }
///
/// impl Transient for ContractError {
///     fn is_transient(&self) -> bool {
///         matches!(self, ContractError::Overloaded | ContractError::ConnectionLost)
///     }
/// }
///
/// assert!(ContractError::Overloaded.is_transient());
/// assert!(!ContractError::InvalidClaim.is_transient());
/// ```
#[diagnostic::on_unimplemented(
    message = "`#[retry]` cannot tell which `{Self}` errors are worth retrying",
    label = "`{Self}` does not implement `retry_runtime::Transient`",
    note = "either name a classifier in the attribute, which works for any error type: `#[retry(on = is_transient)]` with `fn is_transient(error: &{Self}) -> bool`",
    note = "or, if `{Self}` is defined in your crate, implement `retry_runtime::Transient` for it; a type from another crate cannot implement it in yours (E0117), so wrap such a type in an error type of your own"
)]
pub trait Transient {
    /// `true` if the same call may succeed after a pause.
    fn is_transient(&self) -> bool;

    /// How long the server asked the caller to wait before the next call (HTTP `Retry-After`,
    /// gRPC `grpc-retry-pushback-ms`), if it said so. The next pause is then at least this long.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// `true` if the service shed the call to protect itself (a 429, gRPC
    /// `RESOURCE_EXHAUSTED`, an AWS throttling code) rather than failing: the verdict is then a
    /// throttling one ([`Verdict::Throttled`]), paused with the policy's
    /// [`throttle_base`](crate::Policy::throttle_base), which an admission `gate` learns from.
    /// Asked only of a transient error; `false` unless implemented.
    fn is_throttling(&self) -> bool {
        false
    }

    /// The classifier's answer for this error: [`Verdict::Fail`] when not transient, otherwise
    /// [`Verdict::RetryAfter`] when the server suggested a pause, else [`Verdict::Retry`]; each
    /// as its throttling form ([`Verdict::throttled`]) when [`is_throttling`](Transient::is_throttling).
    fn verdict(&self) -> Verdict {
        let verdict = match (self.is_transient(), self.retry_after()) {
            (false, _) => return Verdict::Fail,
            (true, Some(pause)) => Verdict::RetryAfter(pause),
            (true, None) => Verdict::Retry,
        };
        if self.is_throttling() {
            verdict.throttled()
        } else {
            verdict
        }
    }
}

/// A reference or a box classifies as what it points to.
macro_rules! transient_through {
    ($($pointer:ty),*) => {$(
        impl<E: Transient + ?Sized> Transient for $pointer {
            fn is_transient(&self) -> bool {
                (**self).is_transient()
            }

            fn retry_after(&self) -> Option<Duration> {
                (**self).retry_after()
            }

            fn is_throttling(&self) -> bool {
                (**self).is_throttling()
            }

            fn verdict(&self) -> Verdict {
                (**self).verdict()
            }
        }
    )*};
}

transient_through!(&E, Box<E>);

/// Classified by [`io::ErrorKind`]:
///
/// | transient | not transient |
/// |---|---|
/// | `ConnectionReset`, `ConnectionAborted`, `ConnectionRefused`, `NotConnected`, `BrokenPipe`, `TimedOut`, `Interrupted`, `WouldBlock`, `UnexpectedEof`, `AddrInUse`, `AddrNotAvailable`, `NetworkDown`, `NetworkUnreachable`, `HostUnreachable`, `ResourceBusy` | every other kind, among them `NotFound`, `PermissionDenied`, `InvalidInput`, `InvalidData`, `AlreadyExists`, `Unsupported`, `OutOfMemory`, `StorageFull`, `Other` |
///
/// `UnexpectedEof` counts as transient because on a socket it means the peer closed the
/// connection mid-answer. `Other` (where `io::Error::other` puts wrapped errors) is not: wrap
/// your own error type and implement `Transient` for it instead.
impl Transient for io::Error {
    fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }
}

/// The same table as for [`io::Error`].
impl Transient for io::ErrorKind {
    fn is_transient(&self) -> bool {
        use io::ErrorKind::*;
        matches!(
            self,
            ConnectionReset
                | ConnectionAborted
                | ConnectionRefused
                | NotConnected
                | BrokenPipe
                | TimedOut
                | Interrupted
                | WouldBlock
                | UnexpectedEof
                | AddrInUse
                | AddrNotAvailable
                | NetworkDown
                | NetworkUnreachable
                | HostUnreachable
                | ResourceBusy
        )
    }
}

/// Whether `error`, or any error in its [`source`](std::error::Error::source) chain, is an
/// [`io::Error`] that is transient by the I/O table on [`Transient`]'s page: a connection
/// reset, refused or closed mid-answer, a timeout, a broken pipe, …
///
/// Client libraries wrap the I/O failure that ended a call in their own error types, often
/// several layers deep (a database driver's error holding a connection error holding the
/// `io::Error`). Their error type is foreign to your crate, so you cannot implement
/// [`Transient`] for it; this answers the common question "did the connection fail under the
/// call?" for any of them, and the `reqwest` and `tonic` integrations use it too.
///
/// For the clients this crate classifies behind a feature (`reqwest`, `tonic`, `sqlx`,
/// `tokio-postgres`, see [`integrations`](crate::integrations)), turn the feature on instead and
/// write no `on`: their tables also read what carries no I/O error, a status code or a SQLSTATE.
/// A PostgreSQL server that restarts answers `57P01` and then closes the connection, neither of
/// which has an `io::Error` in its chain: this function returns both to the caller, the
/// `tokio-postgres` feature retries them.
///
/// The walk also looks inside an `io::Error` that wraps another error (`io::Error::other(e)`,
/// [`io::Error::get_ref`]), whose `source()` skips the wrapped error itself. It stops after 64
/// levels, so a chain that loops back on itself ends.
///
/// ```
/// use retry_runtime::{has_transient_io_cause, retry};
/// use std::{error::Error, fmt, io};
///
/// /// A driver's error, as a crate you depend on defines it.
/// #[derive(Debug)]
/// struct DriverError {
///     cause: Option<io::Error>,
/// }
///
/// impl fmt::Display for DriverError {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("query failed")
///     }
/// }
///
/// impl Error for DriverError {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         self.cause.as_ref().map(|cause| cause as _)
///     }
/// }
///
/// let reset = DriverError { cause: Some(io::ErrorKind::ConnectionReset.into()) };
/// let missing = DriverError { cause: Some(io::ErrorKind::NotFound.into()) };
/// let syntax = DriverError { cause: None };
/// assert!(has_transient_io_cause(&reset));
/// assert!(!has_transient_io_cause(&missing));
/// assert!(!has_transient_io_cause(&syntax));
///
/// // As the classifier of a function whose error type is the driver's.
/// #[retry(max = 2, base = "1ms", on = |e: &DriverError| has_transient_io_cause(e))]
/// fn query(answers: &mut Vec<DriverError>) -> Result<u32, DriverError> {
///     answers.pop().map_or(Ok(7), Err)
/// }
/// let mut answers = vec![DriverError { cause: Some(io::ErrorKind::TimedOut.into()) }];
/// assert_eq!(query(&mut answers).ok(), Some(7)); // retried once, then answered
/// ```
pub fn has_transient_io_cause(error: &(dyn std::error::Error + 'static)) -> bool {
    type Cause<'a> = &'a (dyn std::error::Error + 'static);
    // `io::Error::source` is the wrapped error's source, not the wrapped error.
    fn next<'a>(error: &Cause<'a>) -> Option<Cause<'a>> {
        match error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
        {
            Some(wrapped) => Some(wrapped),
            None => error.source(),
        }
    }
    // Deeper chains exist only by mistake (a cycle); their end says nothing useful.
    std::iter::successors(Some(error), next)
        .take(64)
        .any(|error| error.downcast_ref().is_some_and(io::Error::is_transient))
}

/// A tokio timeout always counts as transient: the next call may be faster.
#[cfg(feature = "tokio")]
impl Transient for tokio::time::error::Elapsed {
    fn is_transient(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io::ErrorKind::*;

    #[test]
    fn io_kinds_from_the_table() {
        for kind in [
            ConnectionReset,
            ConnectionAborted,
            ConnectionRefused,
            TimedOut,
            Interrupted,
            WouldBlock,
            BrokenPipe,
            NotConnected,
        ] {
            assert!(io::Error::from(kind).is_transient(), "{kind:?}");
        }
        for kind in [NotFound, PermissionDenied, InvalidInput, InvalidData, Other] {
            assert!(!io::Error::from(kind).is_transient(), "{kind:?}");
        }
    }

    #[test]
    fn references_and_boxes_delegate() {
        let e = io::Error::from(TimedOut);
        assert!(Transient::is_transient(&&e));
        assert!(Box::new(io::Error::from(TimedOut)).is_transient());
    }

    #[derive(Debug)]
    struct Layer(Option<Box<dyn std::error::Error + Send + Sync + 'static>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("layer")
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.0.as_ref().map(|e| &**e as _)
        }
    }

    fn layers(depth: usize, bottom: io::Error) -> Layer {
        (0..depth).fold(Layer(Some(Box::new(bottom))), |inner, _| {
            Layer(Some(Box::new(inner)))
        })
    }

    #[test]
    fn a_transient_io_error_anywhere_in_the_chain_is_found() {
        assert!(has_transient_io_cause(&io::Error::from(ConnectionReset)));
        assert!(has_transient_io_cause(&layers(0, ConnectionReset.into())));
        assert!(has_transient_io_cause(&layers(10, TimedOut.into())));
        assert!(!has_transient_io_cause(&layers(10, NotFound.into())));
        assert!(!has_transient_io_cause(&Layer(None)));
        assert!(!has_transient_io_cause(&std::fmt::Error));
    }

    #[test]
    fn inside_an_io_error_that_wraps_another() {
        // `Other` is not transient itself, but what it wraps says the connection broke.
        let wrapped = io::Error::other(layers(2, UnexpectedEof.into()));
        assert!(has_transient_io_cause(&wrapped));
        assert!(has_transient_io_cause(&layers(3, wrapped)));
        let wrapped = io::Error::other(layers(2, InvalidData.into()));
        assert!(!has_transient_io_cause(&layers(1, wrapped)));
        // A transient kind decides even when what it wraps is not I/O (hyper's IncompleteBody).
        let eof = io::Error::new(UnexpectedEof, Layer(None));
        assert!(has_transient_io_cause(&layers(1, eof)));
    }

    #[test]
    fn a_chain_that_loops_ends() {
        #[derive(Debug)]
        struct Loop;
        impl std::fmt::Display for Loop {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("loop")
            }
        }
        impl std::error::Error for Loop {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&Loop)
            }
        }
        assert!(!has_transient_io_cause(&Loop));
        let deep = layers(100, ConnectionReset.into());
        assert!(
            !has_transient_io_cause(&deep),
            "past 64 levels: not searched"
        );
    }

    #[cfg(feature = "tokio")]
    #[tokio::test(start_paused = true)]
    async fn tokio_elapsed_is_transient() {
        let elapsed = tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .unwrap_err();
        assert!(elapsed.is_transient());
    }
}
