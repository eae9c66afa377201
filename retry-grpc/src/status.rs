//! The status of an attempt as the door reads it from HTTP/2: from the headers of a
//! trailers-only answer (HTTP 200 with `grpc-status` in the headers, which tonic's client
//! otherwise reports as a status only when the body is polled) or from the trailers.

use crate::Pushback;
use http::HeaderMap;
use tonic::Code;

/// `grpc-status`, which ends every gRPC answer.
pub const GRPC_STATUS: &str = "grpc-status";

/// An attempt's ending as the retry decision needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptStatus {
    /// The status code.
    pub code: Code,
    /// The server's pushback in the same headers or trailers.
    pub pushback: Pushback,
}

impl AttemptStatus {
    /// The status in a header map (trailers-only headers or trailers), if `grpc-status` is there.
    /// A value that is not a number 0–16 reads as `UNKNOWN`, as gRPC's clients treat it.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue};
    /// use retry_grpc::{AttemptStatus, Pushback};
    /// use std::time::Duration;
    /// use tonic::Code;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("grpc-status", HeaderValue::from_static("14"));
    /// headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("20"));
    /// assert_eq!(
    ///     AttemptStatus::from_headers(&headers),
    ///     Some(AttemptStatus { code: Code::Unavailable, pushback: Pushback::RetryAfter(Duration::from_millis(20)) })
    /// );
    /// ```
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let value = headers.get(GRPC_STATUS)?;
        let code = std::str::from_utf8(value.as_bytes())
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .and_then(crate::code::code_from_number)
            .unwrap_or(Code::Unknown);
        Some(AttemptStatus {
            code,
            pushback: Pushback::from_headers(headers),
        })
    }

    /// The status of a `tonic::Status` a call returned.
    pub fn from_status(status: &tonic::Status) -> Self {
        AttemptStatus {
            code: status.code(),
            pushback: Pushback::from_status(status),
        }
    }
}

/// Whether response headers are a trailers-only answer: they carry `grpc-status`, so the call
/// is over and not committed.
pub fn is_trailers_only(headers: &HeaderMap) -> bool {
    headers.contains_key(GRPC_STATUS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn odd_status_values_read_as_unknown() {
        for value in ["17", "-1", "x", ""] {
            let mut headers = HeaderMap::new();
            headers.insert(GRPC_STATUS, HeaderValue::from_str(value).expect("ascii"));
            assert_eq!(
                AttemptStatus::from_headers(&headers).map(|s| s.code),
                Some(Code::Unknown),
                "{value:?}"
            );
        }
        assert_eq!(AttemptStatus::from_headers(&HeaderMap::new()), None);
        assert!(!is_trailers_only(&HeaderMap::new()));
    }
}
