//! When a call is committed (gRFC A6, "When Retries are Valid"): once committed, it is never
//! retried or hedged again, whatever its status.
//!
//! A call commits when
//! - the client receives **response headers** (the server's initial metadata), which a
//!   trailers-only answer is not: an error sent before any header or message comes as
//!   trailers-only (HTTP 200 with `grpc-status` in the headers), and leaves the call
//!   retryable;
//! - the client receives **a response message** (which a well-behaved server sends after its
//!   headers; counted on its own for servers that do not);
//! - the request **overflows the replay buffer**: a unary or client-streaming request larger
//!   than the limit cannot be sent again, so the attempt in flight is the last.
//!
//! So a server stream that delivered a message is never re-run (the application may have
//! acted on it), and neither is one whose server sent its headers first and failed after
//! (tonic's server does that for a stream whose first item is an error): both are final.
//!
//! ```
//! use retry_grpc::{Commit, CommitCause};
//!
//! let mut commit = Commit::new(64 * 1024);
//! commit.on_request_bytes(100);
//! assert!(!commit.is_committed());
//! commit.on_response_headers(true); // trailers-only: an error before anything else
//! assert!(!commit.is_committed());
//! commit.on_response_headers(false); // the server's headers
//! assert_eq!(commit.cause(), Some(CommitCause::ResponseHeaders));
//! ```

/// Why a call committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommitCause {
    /// The server's response headers arrived.
    ResponseHeaders,
    /// A response message arrived.
    ResponseMessage,
    /// The request outgrew the replay buffer.
    BufferOverflow,
}

/// The commit state of one call.
#[derive(Clone, Debug)]
pub struct Commit {
    cause: Option<CommitCause>,
    buffered: usize,
    limit: usize,
}

impl Commit {
    /// A call not yet committed, whose request may be buffered up to `buffer_limit` bytes
    /// (C-core's default per call is 256 KiB, `grpc.per_rpc_retry_buffer_size`).
    pub fn new(buffer_limit: usize) -> Self {
        Commit {
            cause: None,
            buffered: 0,
            limit: buffer_limit,
        }
    }

    /// Whether the call is committed.
    pub fn is_committed(&self) -> bool {
        self.cause.is_some()
    }

    /// Why it committed, if it did.
    pub fn cause(&self) -> Option<CommitCause> {
        self.cause
    }

    /// The request bytes buffered for replay so far.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    fn commit(&mut self, cause: CommitCause) {
        self.cause.get_or_insert(cause);
    }

    /// Response headers arrived; `trailers_only`: they carry `grpc-status` (the whole answer),
    /// which does not commit.
    pub fn on_response_headers(&mut self, trailers_only: bool) {
        if !trailers_only {
            self.commit(CommitCause::ResponseHeaders);
        }
    }

    /// A response message arrived.
    pub fn on_response_message(&mut self) {
        self.commit(CommitCause::ResponseMessage);
    }

    /// `bytes` more of the request were sent; returns whether they still fit the buffer (when
    /// they do not, the call commits and the buffer can be dropped).
    pub fn on_request_bytes(&mut self, bytes: usize) -> bool {
        self.buffered = self.buffered.saturating_add(bytes);
        if self.buffered > self.limit {
            self.commit(CommitCause::BufferOverflow);
            false
        } else {
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_cause_is_kept() {
        let mut commit = Commit::new(10);
        commit.on_response_message();
        commit.on_response_headers(false);
        assert_eq!(commit.cause(), Some(CommitCause::ResponseMessage));
    }

    #[test]
    fn the_buffer_limit_is_inclusive() {
        let mut commit = Commit::new(10);
        assert!(commit.on_request_bytes(10));
        assert!(!commit.is_committed());
        assert!(!commit.on_request_bytes(1));
        assert_eq!(commit.cause(), Some(CommitCause::BufferOverflow));
        assert_eq!(commit.buffered(), 11);
    }
}
