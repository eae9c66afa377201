//! Whether a failed HTTP request provably never reached the server's application: the rule of
//! the tower layer and of the reqwest middleware, kept in one place so that both doors resend
//! the same requests without a key.
//!
//! Three signals prove it, each anywhere in the error's `source()` chain:
//!
//! - **A refused connection**: an [`std::io::Error`] of kind
//!   [`ConnectionRefused`](std::io::ErrorKind::ConnectionRefused). Nothing was sent.
//! - **An HTTP/2 stream the server refused** (RFC 9113 §8.7: REFUSED_STREAM "indicates that the
//!   stream was closed prior to any processing having occurred"): an [`h2::Error`] that is a
//!   reset ([`is_reset`](h2::Error::is_reset)) received from the server
//!   ([`is_remote`](h2::Error::is_remote)) with the reason
//!   [`REFUSED_STREAM`](h2::Reason::REFUSED_STREAM).
//! - **An HTTP/2 stream the server announced it did not process** (RFC 9113 §6.8: streams with
//!   identifiers higher than a GOAWAY's last stream id "were not processed"): an [`h2::Error`]
//!   that is a GOAWAY ([`is_go_away`](h2::Error::is_go_away)) received from the server, whatever
//!   its reason. h2 gives the received GOAWAY to exactly the streams above its last stream id,
//!   and to requests started on the connection after it (which never got a stream); a stream
//!   at or below it ends otherwise (its answer, a reset, or "connection closed because of a
//!   broken pipe" when the connection then closes), so a GOAWAY that covers the stream does
//!   not count.
//!
//! Nothing else counts: a reset with any other reason (INTERNAL_ERROR, CANCEL, ...), one h2
//! itself sent, a GOAWAY that h2 sent, or a connection that broke under the request may all
//! come after the server began.
//!
//! One gap is hyper's, not the protocol's: after handing a request to h2, hyper's HTTP/2
//! client asks the connection once more whether it can take another stream, and if a GOAWAY
//! arrived in that instant it fails the request it just handed over with the GOAWAY's error.
//! If that request had already been written, and the GOAWAY's last stream id covered it, the
//! server may have processed it; h2's error does not carry the stream ids to tell. That needs
//! the server to answer a request with a GOAWAY faster than the client runs two statements.

use std::error::Error;

/// Whether an error says the request never reached the server's application, anywhere in its
/// `source()` chain: a refused connection ([`std::io::ErrorKind::ConnectionRefused`]), or an
/// HTTP/2 stream that the server refused (a reset with REFUSED_STREAM, RFC 9113 §8.7) or
/// announced it did not process (above the last stream id of a GOAWAY it sent, §6.8), as h2
/// reports them under hyper's and reqwest's errors. A reset with another reason, or a GOAWAY
/// that covers the stream, may come after the server began, and does not count. The tower
/// layer's default ([`RetryLayer::never_sent`](crate::tower::RetryLayer::never_sent) replaces
/// it) and the reqwest middleware's rule, with `reqwest::Error::is_connect`.
///
/// A client's own connect errors say more; with hyper-util's client under the layer, a DNS or
/// connect failure of any kind is recognised by:
///
/// ```ignore
/// layer.never_sent(|e| {
///     retry_http::never_sent(e)
///         || e.downcast_ref::<hyper_util::client::legacy::Error>().is_some_and(|e| e.is_connect())
/// })
/// ```
pub fn never_sent(error: &(dyn Error + 'static)) -> bool {
    // Deeper chains exist only by mistake (a cycle); their end says nothing useful.
    const MAX_DEPTH: usize = 64;
    let mut next = Some(error);
    for _ in 0..MAX_DEPTH {
        let Some(error) = next else {
            return false;
        };
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
            // `io::Error::source` is the wrapped error's source, not the wrapped error.
            if let Some(wrapped) = io.get_ref() {
                next = Some(wrapped);
                continue;
            }
        }
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            if not_processed(h2) {
                return true;
            }
            // An h2 I/O error has no `source()`; its I/O error is `get_io`.
            if let Some(io) = h2.get_io() {
                next = Some(io);
                continue;
            }
        }
        next = error.source();
    }
    false
}

/// The server refused the stream (RFC 9113 §8.7), or announced in a GOAWAY that it did not
/// process it (§6.8): h2 gives a stream above the last stream id the received GOAWAY's error.
fn not_processed(error: &h2::Error) -> bool {
    error.is_remote()
        && (error.is_go_away()
            || (error.is_reset() && error.reason() == Some(h2::Reason::REFUSED_STREAM)))
}

#[cfg(test)]
mod tests {
    use super::never_sent as never_reached;
    use std::io;

    // The h2 errors that a server's frames produce cannot be made outside h2: the tests of
    // both doors against a real HTTP/2 server are in tests/it/http2.rs.

    #[test]
    fn a_refused_connection_under_other_errors_is_never_sent() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let wrapped = io::Error::other(refused);
        assert!(never_reached(&wrapped));
    }

    #[test]
    fn a_reason_alone_is_not_the_server_refusing() {
        // `h2::Error::from(Reason)` is what a user or a library makes, not a received frame.
        let made = h2::Error::from(h2::Reason::REFUSED_STREAM);
        assert_eq!(made.reason(), Some(h2::Reason::REFUSED_STREAM));
        assert!(!never_reached(&made));
        assert!(!never_reached(&io::Error::from(
            io::ErrorKind::ConnectionReset
        )));
    }
}
