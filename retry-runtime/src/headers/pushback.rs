//! The server's pushback, `grpc-retry-pushback-ms` (gRFC A6): wait exactly this long before the
//! next attempt, or do not retry. The one parser of it: the `tonic` integration's
//! `Transient for tonic::Status` and `retry-grpc`'s door both read it here.

use std::time::Duration;

/// The metadata key of a server's pushback: `grpc-retry-pushback-ms`.
///
/// ```
/// use retry_runtime::headers::GRPC_RETRY_PUSHBACK_MS;
///
/// assert_eq!(GRPC_RETRY_PUSHBACK_MS, "grpc-retry-pushback-ms");
/// ```
pub const GRPC_RETRY_PUSHBACK_MS: &str = "grpc-retry-pushback-ms";

/// What a server's pushback says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pushback {
    /// No pushback: the backoff decides.
    Absent,
    /// Retry after exactly this pause, which replaces the backoff's (and the backoff after it
    /// starts again from `initialBackoff`).
    RetryAfter(Duration),
    /// Do not retry: a negative value, a value that is not an integer, or more than one value.
    DoNotRetry,
}

impl Pushback {
    /// Reads the pushback from the values of `grpc-retry-pushback-ms`, as grpc-go does: none is
    /// [`Absent`](Pushback::Absent); one that is a 32-bit integer of 0 or more is a pause in
    /// milliseconds; a negative or malformed value (one out of 32 bits among them), or more than
    /// one value, is [`DoNotRetry`](Pushback::DoNotRetry) (A6: "If the value for pushback is
    /// negative or unparseable, then it will be seen as the server asking the client not to
    /// retry at all").
    ///
    /// ```
    /// use retry_runtime::headers::Pushback;
    /// use std::time::Duration;
    ///
    /// assert_eq!(Pushback::from_values([b"700".as_slice()]), Pushback::RetryAfter(Duration::from_millis(700)));
    /// assert_eq!(Pushback::from_values([b"-1".as_slice()]), Pushback::DoNotRetry);
    /// assert_eq!(Pushback::from_values([b"soon".as_slice()]), Pushback::DoNotRetry);
    /// assert_eq!(Pushback::from_values(std::iter::empty::<&[u8]>()), Pushback::Absent);
    /// ```
    pub fn from_values<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut values = values.into_iter();
        let Some(first) = values.next() else {
            return Pushback::Absent;
        };
        if values.next().is_some() {
            return Pushback::DoNotRetry;
        }
        let parsed = std::str::from_utf8(first)
            .ok()
            .and_then(|text| text.parse::<i32>().ok());
        match parsed.and_then(|ms| u64::try_from(ms).ok()) {
            Some(ms) => Pushback::RetryAfter(Duration::from_millis(ms)),
            None => Pushback::DoNotRetry,
        }
    }

    /// The pushback in the headers of a trailers-only answer or in trailers (feature `http`).
    ///
    /// ```
    /// use retry_runtime::headers::{GRPC_RETRY_PUSHBACK_MS, Pushback};
    /// use std::time::Duration;
    ///
    /// let mut trailers = http::HeaderMap::new();
    /// trailers.insert(GRPC_RETRY_PUSHBACK_MS, http::HeaderValue::from_static("250"));
    /// assert_eq!(Pushback::from_headers(&trailers), Pushback::RetryAfter(Duration::from_millis(250)));
    /// ```
    #[cfg(feature = "http")]
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
        Self::from_values(
            headers
                .get_all(GRPC_RETRY_PUSHBACK_MS)
                .iter()
                .map(|value| value.as_bytes()),
        )
    }

    /// The pushback in a status's metadata, how tonic hands a client the trailers of a failed
    /// call (feature `tonic`).
    ///
    /// ```
    /// use retry_runtime::headers::{GRPC_RETRY_PUSHBACK_MS, Pushback};
    ///
    /// let mut status = tonic::Status::unavailable("draining");
    /// status.metadata_mut().insert(GRPC_RETRY_PUSHBACK_MS, "-1".parse().unwrap());
    /// assert_eq!(Pushback::from_status(&status), Pushback::DoNotRetry);
    /// ```
    #[cfg(feature = "tonic")]
    pub fn from_status(status: &tonic::Status) -> Self {
        let values = status.metadata().get_all(GRPC_RETRY_PUSHBACK_MS);
        Self::from_values(values.iter().map(|value| value.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Pushback {
        Pushback::from_values([text.as_bytes()])
    }

    #[test]
    fn values() {
        let ms = |n| Pushback::RetryAfter(Duration::from_millis(n));
        assert_eq!(one("0"), ms(0));
        assert_eq!(one("700"), ms(700));
        assert_eq!(one("2147483647"), ms(2_147_483_647));
        // Out of a signed 32-bit integer: unparseable, so no retry.
        assert_eq!(one("2147483648"), Pushback::DoNotRetry);
        assert_eq!(one("-1"), Pushback::DoNotRetry);
        assert_eq!(one(""), Pushback::DoNotRetry);
        assert_eq!(one(" 5"), Pushback::DoNotRetry);
        assert_eq!(one("1.5"), Pushback::DoNotRetry);
        assert_eq!(
            Pushback::from_values([&[0xff_u8][..]]),
            Pushback::DoNotRetry
        );
        assert_eq!(
            Pushback::from_values([b"1".as_slice(), b"2".as_slice()]),
            Pushback::DoNotRetry
        );
    }

    #[cfg(all(feature = "http", feature = "tonic"))]
    #[test]
    fn from_headers_and_status() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(Pushback::from_headers(&headers), Pushback::Absent);
        headers.insert(
            GRPC_RETRY_PUSHBACK_MS,
            http::HeaderValue::from_static("250"),
        );
        assert_eq!(
            Pushback::from_headers(&headers),
            Pushback::RetryAfter(Duration::from_millis(250))
        );
        let status = tonic::Status::from_header_map(&{
            let mut trailers = headers.clone();
            trailers.insert("grpc-status", http::HeaderValue::from_static("8"));
            trailers
        })
        .expect("a status");
        assert_eq!(
            Pushback::from_status(&status),
            Pushback::RetryAfter(Duration::from_millis(250))
        );
    }
}
