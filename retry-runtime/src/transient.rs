//! Which errors are worth another try.

use std::io;

/// Says whether an error is passing, so that the same call may succeed after a pause.
///
/// `#[retry]` without `on = ...` asks the error type through this trait. Answer `true` only for
/// technical, passing failures: an overloaded service, a dropped connection, a timeout. A business
/// answer ("not covered") belongs in `Ok`; invalid input or missing permission will not change by
/// waiting, so those are `false`.
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
    note = "implement `retry_runtime::Transient` for `{Self}`, or name a classifier in the attribute: `#[retry(on = is_transient)]` with `fn is_transient(error: &{Self}) -> bool`"
)]
pub trait Transient {
    /// `true` if the same call may succeed after a pause.
    fn is_transient(&self) -> bool;
}

impl<E: Transient + ?Sized> Transient for &E {
    fn is_transient(&self) -> bool {
        (**self).is_transient()
    }
}

impl<E: Transient + ?Sized> Transient for Box<E> {
    fn is_transient(&self) -> bool {
        (**self).is_transient()
    }
}

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

    #[tokio::test(start_paused = true)]
    async fn tokio_elapsed_is_transient() {
        let elapsed = tokio::time::timeout(
            std::time::Duration::from_millis(1),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
        assert!(elapsed.is_transient());
    }
}
