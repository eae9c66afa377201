//! Feature `tonic`: which gRPC statuses are worth another try, and the server's pushback.
//!
//! | code | transient | why |
//! |---|---|---|
//! | `Unavailable` | yes | gRPC's own "try again": the server is down, restarting or draining, or the connection failed (tonic's transport errors arrive as `Unavailable`) |
//! | `ResourceExhausted` | yes | a quota or rate limit, or an overloaded server: later is the point. The same code is also used for a message over the size limit, which will not shrink by waiting; the attempt limit bounds that case |
//! | `Aborted` | yes | a concurrency conflict (an aborted transaction, a failed compare-and-set). gRPC advises retrying at the level of the whole read-modify-write, so annotate the function that does all of it |
//! | `DeadlineExceeded` | yes, see below | the call ran out of time; a slow moment (a queue, a cold cache, a pause) often passes |
//! | `Unknown` | no | what a server answers for an error it did not map (a panic, an unexpected exception) and what a client makes of a response it cannot read: a bug, which a retry repeats |
//! | `Internal` | no | a broken invariant on the server |
//! | `Cancelled` | no | the caller itself cancelled |
//! | `InvalidArgument`, `NotFound`, `AlreadyExists`, `PermissionDenied`, `Unauthenticated`, `FailedPrecondition`, `OutOfRange`, `Unimplemented`, `DataLoss`, `Ok` | no | the request or the system's state must change first |
//!
//! **A connection that broke is transient, whatever the code.** When the connection dies under
//! a call (reset, closed mid-message), tonic makes the status on the client from the transport's
//! error, usually with code `Unknown`, and keeps that error as the status's
//! [`source`](std::error::Error::source). A status whose source chain holds a transient
//! [`std::io::Error`] ([`has_transient_io_cause`](crate::has_transient_io_cause)) is transient.
//! A status the server sent never has a source, so this changes nothing for a server's answer.
//!
//! **`DeadlineExceeded` is transient, with a risk.** The deadline expired on the way, which says
//! nothing about whether the server did the work: it may have finished it just after the
//! client stopped waiting. Retrying is then safe only for an idempotent call, or one that
//! carries an idempotency key, which is what `#[non_idempotent]` demands. A deadline inherited
//! from a caller that is itself out of time is not helped by a retry either; give the function
//! `#[retry(deadline = ...)]` so that the loop stops when the time is gone.
//!
//! **Pushback.** A server may put `grpc-retry-pushback-ms` in the status's metadata (gRPC's
//! retry design, gRFC A6): a non-negative 32-bit integer is the number of milliseconds to wait
//! before the next attempt, which becomes [`retry_after`](Transient::retry_after) and
//! [`Verdict::RetryAfter`](crate::Verdict::RetryAfter). A negative value, any value that is not a decimal integer of 32 bits,
//! or more than one value, means "do not retry": the status is then not transient and its
//! verdict is [`Verdict::Fail`](crate::Verdict::Fail), whatever its code. Pushback does not make a non-transient code
//! transient. The parser is [`headers::Pushback`](crate::headers::Pushback), the one
//! `retry-grpc`'s door reads too.
//!
//! ```
//! use retry_runtime::integrations::tonic::GRPC_RETRY_PUSHBACK_MS;
//! use retry_runtime::{Transient, Verdict};
//! use std::time::Duration;
//! use tonic::Status;
//!
//! assert!(Status::unavailable("restarting").is_transient());
//! assert!(!Status::unknown("panicked").is_transient());
//!
//! let mut status = Status::resource_exhausted("quota");
//! status.metadata_mut().insert(GRPC_RETRY_PUSHBACK_MS, "1500".parse().unwrap());
//! // The server shed the call, and said when to come back.
//! assert_eq!(status.verdict(), Verdict::ThrottledAfter(Duration::from_millis(1500)));
//!
//! status.metadata_mut().insert(GRPC_RETRY_PUSHBACK_MS, "-1".parse().unwrap());
//! assert_eq!(status.verdict(), Verdict::Fail); // the server said: do not retry
//! assert!(!status.is_transient());
//! ```

use crate::Transient;
use crate::headers::Pushback;
use ::tonic::{Code, Status};
use std::time::Duration;

/// The metadata key of a server's pushback: `grpc-retry-pushback-ms`.
///
/// ```
/// use retry_runtime::integrations::tonic::GRPC_RETRY_PUSHBACK_MS;
///
/// let mut status = tonic::Status::unavailable("draining");
/// status.metadata_mut().insert(GRPC_RETRY_PUSHBACK_MS, "250".parse().unwrap());
/// assert!(status.metadata().get(GRPC_RETRY_PUSHBACK_MS).is_some());
/// ```
pub use crate::headers::GRPC_RETRY_PUSHBACK_MS;

/// The [module's table](self) by code: `Unavailable`, `ResourceExhausted`, `Aborted` and
/// `DeadlineExceeded` are transient.
///
/// ```
/// use retry_runtime::Transient;
/// use tonic::Code;
///
/// assert!(Code::DeadlineExceeded.is_transient());
/// assert!(!Code::Unknown.is_transient());
/// ```
impl Transient for Code {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            Code::Unavailable | Code::ResourceExhausted | Code::Aborted | Code::DeadlineExceeded
        )
    }

    /// `ResourceExhausted`: the server (or a proxy) shed the call.
    fn is_throttling(&self) -> bool {
        *self == Code::ResourceExhausted
    }
}

/// By [code](Code), or by a broken connection in its source chain, unless the server's pushback
/// says not to retry; the pushback's pause is the [`retry_after`](Transient::retry_after). See
/// the [module](self).
///
/// `is_transient` answers `false` for a "do not retry" pushback, so that a caller that only
/// asks `is_transient` (or goes through `&Status` or `Box<Status>`) honours it too; `verdict`
/// is the trait's own, from the three answers.
///
/// ```
/// use retry_runtime::{Transient, Verdict};
/// use tonic::Status;
///
/// // The server shed the call: a throttling verdict, paced by the policy's `throttle_base`.
/// assert_eq!(Status::resource_exhausted("quota").verdict(), Verdict::Throttled);
/// let mut status = Status::unavailable("restarting");
/// assert_eq!(status.verdict(), Verdict::Retry);
/// status.metadata_mut().insert("grpc-retry-pushback-ms", "not a number".parse().unwrap());
/// assert_eq!(status.verdict(), Verdict::Fail);
/// ```
impl Transient for Status {
    fn is_transient(&self) -> bool {
        (self.code().is_transient() || crate::has_transient_io_cause(self))
            && Pushback::from_status(self) != Pushback::DoNotRetry
    }

    fn retry_after(&self) -> Option<Duration> {
        match Pushback::from_status(self) {
            Pushback::RetryAfter(pause) => Some(pause),
            Pushback::Absent | Pushback::DoNotRetry => None,
        }
    }

    fn is_throttling(&self) -> bool {
        self.code().is_throttling()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Verdict;
    use ::tonic::metadata::{MetadataMap, MetadataValue};

    const ALL_CODES: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    fn with_pushback(code: Code, value: &str) -> Status {
        let mut metadata = MetadataMap::new();
        metadata.insert(GRPC_RETRY_PUSHBACK_MS, value.parse().unwrap());
        Status::with_metadata(code, "test", metadata)
    }

    #[test]
    fn every_code_follows_the_table() {
        for code in ALL_CODES {
            let expected = matches!(
                code,
                Code::Unavailable
                    | Code::ResourceExhausted
                    | Code::Aborted
                    | Code::DeadlineExceeded
            );
            assert_eq!(code.is_transient(), expected, "{code:?}");
            let status = Status::new(code, "test");
            assert_eq!(status.is_transient(), expected, "{code:?}");
            assert_eq!(status.retry_after(), None);
            let verdict = Verdict::from(expected);
            let verdict = if code == Code::ResourceExhausted {
                verdict.throttled()
            } else {
                verdict
            };
            assert_eq!(status.verdict(), verdict, "{code:?}");
            assert_eq!(status.is_throttling(), code == Code::ResourceExhausted);
        }
    }

    #[test]
    fn pushback_is_the_pause() {
        let status = with_pushback(Code::Unavailable, "250");
        assert!(status.is_transient());
        assert_eq!(status.retry_after(), Some(Duration::from_millis(250)));
        assert_eq!(
            status.verdict(),
            Verdict::RetryAfter(Duration::from_millis(250))
        );
        assert_eq!(
            with_pushback(Code::Aborted, "0").verdict(),
            Verdict::RetryAfter(Duration::ZERO)
        );
        assert_eq!(
            with_pushback(Code::Unavailable, "2147483647").verdict(),
            Verdict::RetryAfter(Duration::from_millis(2_147_483_647)),
            "the largest pushback A6's parsers read"
        );
    }

    #[test]
    fn negative_or_unreadable_pushback_means_do_not_retry() {
        // Out of 32 bits (as grpc-go reads it) is unreadable too.
        for refusal in ["-1", "-250", "", "1.5", "soon", "0x10", "2147483648", " 5"] {
            let status = with_pushback(Code::Unavailable, refusal);
            assert_eq!(status.verdict(), Verdict::Fail, "{refusal:?}");
            assert!(!status.is_transient(), "{refusal:?}");
            assert_eq!(status.retry_after(), None, "{refusal:?}");
            // Through a reference and a box, which forward `is_transient`.
            assert!(!Transient::is_transient(&&status));
            assert!(!Box::new(status).is_transient());
        }
    }

    #[test]
    fn pushback_does_not_make_a_permanent_code_transient() {
        let status = with_pushback(Code::InvalidArgument, "100");
        assert!(!status.is_transient());
        assert_eq!(status.verdict(), Verdict::Fail);
    }

    #[test]
    fn pushback_from_the_trailers_a_client_receives() {
        // What tonic does with a failed call's trailers: the status keeps the other entries as
        // metadata, the pushback among them.
        let mut trailers = ::http::HeaderMap::new();
        trailers.insert("grpc-status", "14".parse().unwrap()); // Unavailable
        trailers.insert("grpc-message", "draining".parse().unwrap());
        trailers.insert(GRPC_RETRY_PUSHBACK_MS, "1200".parse().unwrap());
        let status = Status::from_header_map(&trailers).unwrap();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status.verdict(),
            Verdict::RetryAfter(Duration::from_millis(1200))
        );

        trailers.insert(GRPC_RETRY_PUSHBACK_MS, "-1".parse().unwrap());
        let status = Status::from_header_map(&trailers).unwrap();
        assert_eq!(status.verdict(), Verdict::Fail);
    }

    #[test]
    fn a_status_made_from_a_broken_connection_is_transient() {
        // What tonic makes of a transport error it has no code for: `Unknown`, the error kept
        // as the source.
        let reset = Status::from_error(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert_eq!(reset.code(), Code::Unknown);
        assert!(reset.is_transient());
        assert_eq!(reset.verdict(), Verdict::Retry);

        let bad_data = Status::from_error(Box::new(std::io::Error::from(
            std::io::ErrorKind::InvalidData,
        )));
        assert_eq!(bad_data.code(), Code::Unknown);
        assert!(!bad_data.is_transient());
        assert!(!Status::unknown("panicked").is_transient());
    }

    #[test]
    fn binary_looking_values_are_refusals() {
        let mut status = Status::unavailable("test");
        status.metadata_mut().insert(
            GRPC_RETRY_PUSHBACK_MS,
            MetadataValue::try_from(&b"12\xff"[..]).unwrap(),
        );
        assert_eq!(status.verdict(), Verdict::Fail);
    }
}
