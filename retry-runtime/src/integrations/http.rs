//! HTTP: which statuses are worth another try, and the pause a server asks for with
//! `Retry-After`.
//!
//! Two parts, one topic:
//!
//! - **Always there**, for a client of any HTTP library: [`parse_retry_after`] reads the value
//!   of a `Retry-After` header (seconds or a date), and [`RETRY_AFTER`] is the header's name.
//! - **With the feature `http`**, for the `http` crate's types (which `reqwest`, `hyper` and
//!   `axum` share): the status table `status_is_transient`, also as
//!   `Transient for http::StatusCode`; `retry_after_from_headers`; and `response_verdict`,
//!   which judges a whole `http::Response` (their pages below).
//!
//! | status | transient | why |
//! |---|---|---|
//! | 408 Request Timeout | yes | the server gave up waiting for the request; a new connection may be faster |
//! | 429 Too Many Requests | yes | a rate limit: later is the point (it often says when, in `Retry-After`) |
//! | 500 Internal Server Error | yes | often a passing fault behind the server (a restarting dependency); a bug that answers 500 every time is bounded by the attempt limit |
//! | 502 Bad Gateway, 503 Service Unavailable, 504 Gateway Timeout | yes | an overloaded or unreachable server behind a proxy: the textbook transient failures |
//! | 1xx, 2xx, 3xx | no | not failures |
//! | every other 4xx (400, 401, 403, 404, 409, 422, …) | no | the request itself is wrong, and will be wrong again |
//! | 501, 505–511 (Not Implemented, Version Not Supported, Insufficient Storage, Loop Detected, …) | no | a property of the server or the request, not of the moment |
//!
//! 409 Conflict is not transient here. A service that answers 409 while a request with the
//! same `Idempotency-Key` is still running (the IETF Idempotency-Key draft) does want it
//! retried: say so with `#[retry(on = ...)]`, which can call `status_is_transient` for the
//! rest. The `reqwest` integration uses the same table for its status errors.
//!
//! A `503 Service Unavailable` or `429 Too Many Requests` may carry `Retry-After`, in seconds or
//! as a date (RFC 9110 §10.2.3). [`parse_retry_after`] turns both into the pause left from
//! `now`; a classifier (`on`, or `on_result` for a response that arrives as `Ok`) hands it to the
//! loop in its [verdict](crate::Verdict::RetryAfter), and the next pause is then at least that
//! long, spread above it by the function's jitter
//! ([`Policy::delay_at_least`](crate::Policy::delay_at_least)).
//!
//! ```
//! use retry_runtime::integrations::http::{parse_retry_after, RETRY_AFTER};
//! use retry_runtime::Verdict;
//! use std::time::{Duration, SystemTime};
//!
//! // What a client sees in a 503, and what its classifier answers.
//! let (name, value) = ("Retry-After", "120");
//! assert!(name.eq_ignore_ascii_case(RETRY_AFTER));
//! let verdict = match parse_retry_after(value, SystemTime::now()) {
//!     Some(pause) => Verdict::RetryAfter(pause),
//!     None => Verdict::Retry,
//! };
//! assert_eq!(verdict, Verdict::RetryAfter(Duration::from_secs(120)));
//! ```

#[cfg(feature = "http")]
use crate::Verdict;
// The parser is the headers module's (every header helper lives there); it is named here too,
// where the classifiers that use it are.
pub use crate::headers::{RETRY_AFTER, parse_retry_after};
#[cfg(feature = "http")]
use ::http::{HeaderMap, Response, StatusCode, header};
#[cfg(feature = "http")]
use std::time::{Duration, SystemTime};

/// Transient by status code: the table of the [module](self), shared with the `reqwest`
/// integration.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
pub(crate) const fn transient_status(code: u16) -> bool {
    matches!(code, 408 | 429 | 500 | 502 | 503 | 504)
}

/// `true` for 408, 429, 500, 502, 503 and 504; see the [module's table](self). Feature `http`.
///
/// ```
/// use http::StatusCode;
/// use retry_runtime::integrations::http::status_is_transient;
///
/// assert!(status_is_transient(StatusCode::TOO_MANY_REQUESTS));
/// assert!(status_is_transient(StatusCode::GATEWAY_TIMEOUT));
/// assert!(!status_is_transient(StatusCode::BAD_REQUEST));
/// assert!(!status_is_transient(StatusCode::NOT_IMPLEMENTED));
/// assert!(!status_is_transient(StatusCode::OK));
/// ```
#[cfg(feature = "http")]
pub fn status_is_transient(status: StatusCode) -> bool {
    transient_status(status.as_u16())
}

/// The pause asked for by the first `Retry-After` header, counted from `now`; `None` when there
/// is none, or when its value is not valid (see [`parse_retry_after`] for what is
/// accepted). A date that has passed gives [`Duration::ZERO`].
///
/// ```
/// use http::HeaderMap;
/// use retry_runtime::integrations::http::retry_after_from_headers;
/// use std::time::{Duration, SystemTime};
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(retry_after_from_headers(&headers, SystemTime::now()), None);
///
/// headers.insert("retry-after", "120".parse().unwrap());
/// assert_eq!(
///     retry_after_from_headers(&headers, SystemTime::now()),
///     Some(Duration::from_secs(120)),
/// );
/// ```
#[cfg(feature = "http")]
pub fn retry_after_from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, now)
}

/// A response's verdict from its status and headers, `Retry-After` read against the system
/// clock: the `response_verdict` of both the `http` and the `reqwest` integration.
#[cfg(feature = "http")]
pub(crate) fn verdict_of(status: u16, headers: &HeaderMap) -> Verdict {
    if !transient_status(status) {
        return Verdict::Fail;
    }
    // The service shed the request: a 429 always; a 503 when it says when to come back (an
    // overloaded server's answer, where a bare 503 may be a restart or a failing upstream).
    match (retry_after_from_headers(headers, SystemTime::now()), status) {
        (Some(pause), 429 | 503) => Verdict::ThrottledAfter(pause),
        (Some(pause), _) => Verdict::RetryAfter(pause),
        (None, 429) => Verdict::Throttled,
        (None, _) => Verdict::Retry,
    }
}

/// Whether a response is worth another request: [`Verdict::Retry`] for a transient status, or
/// [`Verdict::RetryAfter`] when it also carries a valid `Retry-After` (read against the system
/// clock); a throttling verdict ([`Verdict::Throttled`], [`Verdict::ThrottledAfter`]) for a 429,
/// and for a 503 with `Retry-After`: the service shed the request, which an admission gate
/// learns from and the policy's `throttle_base` paces; [`Verdict::Fail`] for every other
/// status.
///
/// `Fail` means "this response is the answer": a success, or an error that will not change by
/// waiting. It is the verdict a result predicate wants for a client whose 503 comes back as an
/// `Ok(response)`: retry the transient ones, keep the rest as they are.
///
/// ```
/// use http::Response;
/// use retry_runtime::integrations::http::response_verdict;
/// use retry_runtime::Verdict;
/// use std::time::Duration;
///
/// let busy = Response::builder().status(503).header("Retry-After", "2").body(()).unwrap();
/// assert_eq!(response_verdict(&busy), Verdict::ThrottledAfter(Duration::from_secs(2)));
///
/// let limited = Response::builder().status(429).body(()).unwrap();
/// assert_eq!(response_verdict(&limited), Verdict::Throttled);
///
/// let down = Response::builder().status(502).header("Retry-After", "2").body(()).unwrap();
/// assert_eq!(response_verdict(&down), Verdict::RetryAfter(Duration::from_secs(2)));
///
/// let ok = Response::builder().status(200).header("Retry-After", "2").body(()).unwrap();
/// assert_eq!(response_verdict(&ok), Verdict::Fail); // the answer: nothing to retry
///
/// let missing = Response::builder().status(404).body(()).unwrap();
/// assert_eq!(response_verdict(&missing), Verdict::Fail);
/// ```
#[cfg(feature = "http")]
#[inline]
pub fn response_verdict<B>(response: &Response<B>) -> Verdict {
    verdict_of(response.status().as_u16(), response.headers())
}

/// [`response_verdict`] for a response's parts: its status and headers (a reqwest response, a
/// response whose body is elsewhere).
///
/// ```
/// use http::{HeaderMap, StatusCode};
/// use retry_runtime::integrations::http::status_verdict;
/// use retry_runtime::Verdict;
///
/// assert_eq!(status_verdict(StatusCode::BAD_GATEWAY, &HeaderMap::new()), Verdict::Retry);
/// assert_eq!(status_verdict(StatusCode::CONFLICT, &HeaderMap::new()), Verdict::Fail);
/// ```
#[cfg(feature = "http")]
#[inline]
pub fn status_verdict(status: StatusCode, headers: &HeaderMap) -> Verdict {
    verdict_of(status.as_u16(), headers)
}

/// Whether a connection broke under a request: a transient I/O error anywhere in the error's
/// `source()` chain ([`has_transient_io_cause`](crate::has_transient_io_cause): reset, broken
/// pipe, a body cut off, which hyper reports as `UnexpectedEof`, ...), or hyper's own "connection
/// closed before the message completed" or "request canceled" (a kept-alive connection the server
/// closed). The rule of `Transient for reqwest::Error` and of the HTTP doors' (`retry-http`)
/// error classifier: one rule for both. Feature `hyper` (on with `reqwest`).
///
/// ```
/// use retry_runtime::integrations::http::connection_broke;
/// use std::io;
///
/// assert!(connection_broke(&io::Error::from(io::ErrorKind::ConnectionReset)));
/// assert!(!connection_broke(&io::Error::from(io::ErrorKind::PermissionDenied)));
/// ```
#[cfg(feature = "hyper")]
pub fn connection_broke(error: &(dyn std::error::Error + 'static)) -> bool {
    if crate::has_transient_io_cause(error) {
        return true;
    }
    // Bounded as `has_transient_io_cause` is, against a chain that loops.
    std::iter::successors(Some(error), |&cause| cause.source())
        .take(64)
        .filter_map(|cause| cause.downcast_ref::<::hyper::Error>())
        .any(|hyper| hyper.is_incomplete_message() || hyper.is_canceled())
}

/// The [`status_is_transient`] table. A bare status carries no headers, so
/// [`retry_after`](crate::Transient::retry_after) is `None`: use [`response_verdict`] to honour
/// `Retry-After`.
#[cfg(feature = "http")]
impl crate::Transient for StatusCode {
    fn is_transient(&self) -> bool {
        status_is_transient(*self)
    }

    /// A 429 Too Many Requests.
    fn is_throttling(&self) -> bool {
        *self == StatusCode::TOO_MANY_REQUESTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        for transient in [408, 429, 500, 502, 503, 504] {
            assert!(transient_status(transient), "{transient}");
        }
        for not in [
            100, 200, 204, 304, 400, 401, 403, 404, 409, 422, 501, 505, 511,
        ] {
            assert!(!transient_status(not), "{not}");
        }
    }
}

#[cfg(test)]
#[cfg(feature = "http")]
mod http_crate_tests {
    use super::*;
    use crate::Transient;
    use ::http::HeaderValue;

    fn response(status: u16, retry_after: &[&'static str]) -> Response<()> {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        for value in retry_after {
            response
                .headers_mut()
                .append(header::RETRY_AFTER, HeaderValue::from_static(value));
        }
        response
    }

    #[test]
    fn every_status_follows_the_table() {
        for code in 100..=999 {
            let status = StatusCode::from_u16(code).unwrap();
            let expected = matches!(code, 408 | 429 | 500 | 502 | 503 | 504);
            assert_eq!(status_is_transient(status), expected, "{code}");
            assert_eq!(status.is_transient(), expected, "{code}");
            assert_eq!(status.retry_after(), None);
            // 429 is the server shedding load: a throttling verdict (issue 27).
            let verdict = if code == 429 {
                Verdict::Throttled
            } else {
                Verdict::from(expected)
            };
            assert_eq!(status.verdict(), verdict, "{code}");
        }
    }

    #[test]
    fn retry_after_in_both_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777 - 30);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(
            retry_after_from_headers(&headers, now),
            Some(Duration::from_secs(30))
        );
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("45"));
        assert_eq!(
            retry_after_from_headers(&headers, now),
            Some(Duration::from_secs(45))
        );
    }

    #[test]
    fn the_mixed_case_constant_finds_the_header() {
        // `http::HeaderMap` lowercases names it is given as text, so `RETRY_AFTER` works too.
        let mut headers = HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("7"));
        assert_eq!(
            headers.get(RETRY_AFTER),
            Some(&HeaderValue::from_static("7"))
        );
    }

    #[test]
    fn a_bad_or_missing_retry_after_is_no_pause() {
        let now = SystemTime::now();
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after_from_headers(&headers, now), None);
        for bad in ["", "-1", "1.5", "tomorrow"] {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static(bad));
            assert_eq!(retry_after_from_headers(&headers, now), None, "{bad:?}");
        }
        // Not text: a header value may hold bytes that are not visible ASCII.
        headers.insert(
            header::RETRY_AFTER,
            HeaderValue::from_bytes(b"12\xff").unwrap(),
        );
        assert_eq!(retry_after_from_headers(&headers, now), None);
    }

    #[test]
    fn the_first_of_several_retry_after_headers_counts() {
        let response = response(503, &["3", "60"]);
        assert_eq!(
            retry_after_from_headers(response.headers(), SystemTime::now()),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn response_verdicts() {
        assert_eq!(
            response_verdict(&response(503, &["3"])),
            Verdict::ThrottledAfter(Duration::from_secs(3))
        );
        assert_eq!(response_verdict(&response(503, &[])), Verdict::Retry);
        assert_eq!(response_verdict(&response(429, &[])), Verdict::Throttled);
        assert_eq!(
            response_verdict(&response(502, &["3"])),
            Verdict::RetryAfter(Duration::from_secs(3))
        );
        assert_eq!(
            response_verdict(&response(429, &["Fri, 31 Dec 9999 23:59:59 GMT"]))
                .suggested_pause()
                .map(|pause| pause > Duration::from_secs(200 * 365 * 86_400)),
            Some(true)
        );
        assert_eq!(
            response_verdict(&response(503, &["Sun, 06 Nov 1994 08:49:37 GMT"])),
            Verdict::ThrottledAfter(Duration::ZERO),
            "a date that has passed: retry now"
        );
        assert_eq!(response_verdict(&response(502, &[])), Verdict::Retry);
        assert_eq!(response_verdict(&response(504, &["soon"])), Verdict::Retry);
        for kept in [200, 201, 204, 301, 304, 400, 404, 409, 501] {
            assert_eq!(
                response_verdict(&response(kept, &["3"])),
                Verdict::Fail,
                "{kept}"
            );
        }
    }
}
