//! Feature `reqwest`: which `reqwest::Error`s are worth another try, and which
//! `reqwest::Response`s ([`response_verdict`]).
//!
//! For an error, the checks run in this order; the first that applies decides:
//!
//! | the error | transient | why |
//! |---|---|---|
//! | a timeout (`is_timeout`: the client's timeout, a connect timeout, an I/O `TimedOut`) | yes | the next call may be faster |
//! | a connect error (`is_connect`: refused, unreachable, DNS) | yes | nothing was sent yet; the server may be back. A misspelt host name is also a DNS failure, and is retried to the limit |
//! | a status error (`error_for_status`) | by status: 408, 429, 500, 502, 503, 504 | the [`http` table](crate::integrations) |
//! | a builder error (bad URL, bad header) | no | the request cannot be built, now or later |
//! | a redirect error (a loop, too many hops) | no | the server will send the same redirects |
//! | an upgrade error | no | the server refused the protocol |
//! | any other error: a request, body or decode error | when its cause is a connection that died under it: an [`std::io::Error`] anywhere in the chain that is transient by [`Transient`]'s I/O table (reset, broken pipe, a body cut off before its `content-length`, which hyper reports as `UnexpectedEof`), see [`has_transient_io_cause`](crate::has_transient_io_cause); or hyper's "connection closed before message completed" or "request canceled" (the server closed a kept-alive connection) | the next connection may hold. A decode error of a body that arrived whole (not the expected JSON, …) is not transient: the same bytes will not decode better |
//!
//! [`retry_after`](Transient::retry_after) is always `None`: a `reqwest::Error` keeps the status
//! but not the headers. A `503` or `429` with `Retry-After` arrives as an `Ok(response)`, and
//! [`response_verdict`] reads its status (the same table) and the header. When the function
//! returns the response, that is one line, `on_result`; the last busy response is returned as it
//! came if the loop gives up:
//!
//! ```no_run
//! use retry_runtime::retry;
//!
//! #[retry(max = 3, base = "200ms", on_result = retry_runtime::integrations::reqwest::response_verdict)]
//! async fn quote(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, reqwest::Error> {
//!     client.get(url).send().await
//! }
//! ```
//!
//! To get the body in the same loop, judge the response before `error_for_status` turns it into
//! an error:
//!
//! ```no_run
//! use retry_runtime::integrations::reqwest::response_verdict;
//! use retry_runtime::{retry, Transient, Verdict};
//!
//! #[derive(Debug)]
//! enum QuoteError {
//!     /// The service is busy; the verdict carries the pause it asked for, if any.
//!     Busy(Verdict),
//!     Http(reqwest::Error),
//! }
//!
//! impl From<reqwest::Error> for QuoteError {
//!     fn from(error: reqwest::Error) -> Self {
//!         QuoteError::Http(error)
//!     }
//! }
//!
//! impl Transient for QuoteError {
//!     fn is_transient(&self) -> bool {
//!         self.verdict().is_retry()
//!     }
//!     fn verdict(&self) -> Verdict {
//!         match self {
//!             QuoteError::Busy(verdict) => *verdict,
//!             QuoteError::Http(error) => error.verdict(),
//!         }
//!     }
//! }
//!
//! #[retry(max = 3, base = "200ms")]
//! async fn quote(client: &reqwest::Client, url: &str) -> Result<String, QuoteError> {
//!     let response = client.get(url).send().await?;
//!     match response_verdict(&response) {
//!         // The answer: a success, or an error status that waiting will not change.
//!         Verdict::Fail => Ok(response.error_for_status()?.text().await?),
//!         busy => Err(QuoteError::Busy(busy)),
//!     }
//! }
//! ```

use crate::{Transient, Verdict};

/// Whether a response is worth another request: [`Verdict::Retry`] for a transient status (408,
/// 429, 500, 502, 503, 504), or [`Verdict::RetryAfter`] when it also carries a valid
/// `Retry-After` (seconds or a date, read against the system clock, see
/// [`parse_retry_after`](crate::integrations::http::parse_retry_after)); their throttling forms
/// ([`Verdict::Throttled`], [`Verdict::ThrottledAfter`]) for a 429 and for a 503 with
/// `Retry-After`; [`Verdict::Fail`] for every other status.
///
/// `Fail` means "this response is the answer": a success, or an error that will not change by
/// waiting. It is what the `http` integration's
/// [`response_verdict`](crate::integrations::http::response_verdict) answers for an
/// `http::Response`, for reqwest's own response type.
///
/// ```no_run
/// use retry_runtime::integrations::reqwest::response_verdict;
/// use retry_runtime::Verdict;
///
/// # async fn f() -> Result<(), reqwest::Error> {
/// let response = reqwest::get("http://127.0.0.1:8080/quote").await?;
/// match response_verdict(&response) {
///     Verdict::Fail => println!("the answer: {}", response.status()),
///     Verdict::RetryAfter(pause) | Verdict::ThrottledAfter(pause) => {
///         println!("busy: come back in {pause:?}")
///     }
///     _ => println!("busy"),
/// }
/// # Ok(())
/// # }
/// ```
pub fn response_verdict(response: &::reqwest::Response) -> Verdict {
    crate::integrations::http::verdict_of(response.status().as_u16(), response.headers())
}

/// The [module's table](self): timeouts and connect errors are transient, status errors by
/// status, builder, redirect and upgrade errors are not, and request, body and decode errors
/// by their cause (a connection that broke is transient, a body that does not parse is not).
///
/// ```
/// use retry_runtime::Transient;
///
/// // A URL that cannot be parsed is a builder error: no request was made, and none will be.
/// let error = reqwest::Client::new().get("not a url").build().unwrap_err();
/// assert!(error.is_builder());
/// assert!(!error.is_transient());
/// assert_eq!(error.retry_after(), None);
/// ```
impl Transient for ::reqwest::Error {
    fn is_transient(&self) -> bool {
        if self.is_timeout() || self.is_connect() {
            return true;
        }
        if let Some(status) = self.status() {
            return crate::integrations::http::transient_status(status.as_u16());
        }
        if self.is_builder() || self.is_redirect() || self.is_upgrade() {
            return false;
        }
        // Request, body and decode errors, by their cause: `.text()` and `.json()` report a body
        // that stopped arriving as a decode error too, and that is the connection's fault, not
        // the bytes'. The rule the HTTP doors share.
        super::http::connection_broke(self)
    }

    /// A 429 Too Many Requests status error.
    fn is_throttling(&self) -> bool {
        self.status().is_some_and(|status| status.as_u16() == 429)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A loopback server that answers each connection once with `answer` after reading the
    /// request head, and then closes it. `None` closes without answering.
    async fn serve(answer: Option<&'static str>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.ends_with(b"\r\n\r\n") {
                        match socket.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    if let Some(answer) = answer {
                        let _ = socket.write_all(answer.as_bytes()).await;
                    }
                    let _ = socket.shutdown().await;
                });
            }
        });
        format!("http://{address}/")
    }

    fn client() -> ::reqwest::Client {
        ::reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    }

    /// The error of a GET that fails with a client built by `builder`.
    async fn get_error(builder: ::reqwest::ClientBuilder, url: String) -> ::reqwest::Error {
        builder.build().unwrap().get(url).send().await.unwrap_err()
    }

    async fn status_error(status_line: &'static str) -> ::reqwest::Error {
        let url = serve(Some(status_line)).await;
        let response = client().get(url).send().await.unwrap();
        response.error_for_status().unwrap_err()
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient() {
        // Bind, note the port, and close it again: nothing listens there now.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let error = client()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert!(error.is_connect(), "{error:?}");
        assert!(error.is_transient());
        assert_eq!(error.retry_after(), None);
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out_transiently() {
        // The kernel completes the handshake into the backlog; nobody ever reads or answers.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let builder = ::reqwest::Client::builder().timeout(Duration::from_millis(200));
        let error = get_error(builder, url).await;
        drop(listener);
        assert!(error.is_timeout(), "{error:?}");
        assert!(error.is_transient());
    }

    #[tokio::test]
    async fn status_errors_follow_the_status_table() {
        let unavailable = status_error(
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\ncontent-length: 0\r\n\r\n",
        )
        .await;
        assert_eq!(unavailable.status().map(|s| s.as_u16()), Some(503));
        assert!(unavailable.is_transient());
        assert_eq!(
            unavailable.retry_after(),
            None,
            "the error keeps no headers"
        );

        let limited =
            status_error("HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n").await;
        assert!(limited.is_transient());

        for permanent in [
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 501 Not Implemented\r\ncontent-length: 0\r\n\r\n",
        ] {
            let error = status_error(permanent).await;
            assert!(error.is_status());
            assert!(!error.is_transient(), "{error:?}");
        }
    }

    #[tokio::test]
    async fn a_connection_closed_before_the_answer_is_transient() {
        let url = serve(None).await;
        let error = client().get(url).send().await.unwrap_err();
        assert!(error.is_request(), "{error:?}");
        assert!(!error.is_connect() && !error.is_timeout(), "{error:?}");
        assert!(error.is_transient(), "{error:?}");
    }

    async fn verdict_of(answer: &'static str) -> Verdict {
        let url = serve(Some(answer)).await;
        response_verdict(&client().get(url).send().await.unwrap())
    }

    #[tokio::test]
    async fn response_verdicts_read_the_status_and_retry_after() {
        assert_eq!(
            verdict_of(
                "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\ncontent-length: 0\r\n\r\n"
            )
            .await,
            Verdict::ThrottledAfter(Duration::from_secs(2))
        );
        assert_eq!(
            verdict_of("HTTP/1.1 429 Too Many Requests\r\nretry-after: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-length: 0\r\n\r\n")
                .await,
            Verdict::ThrottledAfter(Duration::ZERO),
            "a date that has passed: retry now"
        );
        assert_eq!(
            verdict_of("HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n").await,
            Verdict::Retry
        );
        assert_eq!(
            verdict_of(
                "HTTP/1.1 504 Gateway Timeout\r\nRetry-After: soon\r\ncontent-length: 0\r\n\r\n"
            )
            .await,
            Verdict::Retry,
            "an unreadable Retry-After is ignored"
        );
        for answer in [
            "HTTP/1.1 200 OK\r\nRetry-After: 2\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 501 Not Implemented\r\nRetry-After: 2\r\ncontent-length: 0\r\n\r\n",
        ] {
            assert_eq!(verdict_of(answer).await, Verdict::Fail, "{answer:?}");
        }
    }

    #[tokio::test]
    async fn a_body_cut_off_mid_message_is_transient() {
        // 5 of the 100 bytes promised, then the server closes the connection.
        let url = serve(Some("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello")).await;
        let response = client().get(url).send().await.unwrap();
        let error = response.text().await.unwrap_err();
        assert!(error.is_decode(), "{error:?}");
        assert!(error.is_transient(), "{error:?}");
    }

    #[tokio::test]
    async fn builder_errors_are_not_transient() {
        let error = client().get("http://[::1").send().await.unwrap_err();
        assert!(error.is_builder(), "{error:?}");
        assert!(!error.is_transient());
    }

    #[tokio::test]
    async fn redirect_errors_are_not_transient() {
        let url = serve(Some(
            "HTTP/1.1 302 Found\r\nLocation: /again\r\ncontent-length: 0\r\n\r\n",
        ))
        .await;
        let builder =
            ::reqwest::Client::builder().redirect(::reqwest::redirect::Policy::limited(2));
        let error = get_error(builder, url).await;
        assert!(error.is_redirect(), "{error:?}");
        assert!(!error.is_transient());
    }

    // A decode error needs reqwest's `json` feature: tests/it/integrations.rs has it.
}
