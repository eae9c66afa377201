//! Feature `reqwest`: which `reqwest::Error`s are worth another try.
//!
//! The checks run in this order; the first that applies decides:
//!
//! | the error | transient | why |
//! |---|---|---|
//! | a timeout (`is_timeout`: the client's timeout, a connect timeout, an I/O `TimedOut`) | yes | the next call may be faster |
//! | a connect error (`is_connect`: refused, unreachable, DNS) | yes | nothing was sent yet; the server may be back. A misspelt host name is also a DNS failure, and is retried to the limit |
//! | a status error (`error_for_status`) | by status: 408, 429, 500, 502, 503, 504 | the [`http` table](crate::integrations) |
//! | a builder error (bad URL, bad header) | no | the request cannot be built, now or later |
//! | a redirect error (a loop, too many hops) | no | the server will send the same redirects |
//! | a decode error (a body that is not the expected JSON, …) | no | the same bytes will not decode better |
//! | an upgrade error | no | the server refused the protocol |
//! | any other request or body error | when its cause is: hyper's "connection closed before message completed" or "request canceled" (the server closed a kept-alive connection), or an [`std::io::Error`] that is transient by [`Transient`]'s I/O table (reset, broken pipe, …) | a connection that died under the request; other causes are not passing |
//!
//! [`retry_after`](Transient::retry_after) is always `None`: a `reqwest::Error` keeps the status
//! but not the headers, so a `Retry-After` must be read from the response before
//! `error_for_status` turns it into an error:
//!
//! ```no_run
//! use retry_runtime::http::{parse_retry_after, RETRY_AFTER};
//! use retry_runtime::{retry, Transient};
//! use std::time::{Duration, SystemTime};
//!
//! #[derive(Debug)]
//! enum QuoteError {
//!     /// The service said when to come back.
//!     Busy(Option<Duration>),
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
//!         match self {
//!             QuoteError::Busy(_) => true,
//!             QuoteError::Http(error) => error.is_transient(),
//!         }
//!     }
//!     fn retry_after(&self) -> Option<Duration> {
//!         match self {
//!             QuoteError::Busy(pause) => *pause,
//!             QuoteError::Http(_) => None,
//!         }
//!     }
//! }
//!
//! #[retry(max = 3, base = "200ms")]
//! async fn quote(client: &reqwest::Client, url: &str) -> Result<String, QuoteError> {
//!     let response = client.get(url).send().await?;
//!     if matches!(response.status().as_u16(), 429 | 503) {
//!         let pause = response
//!             .headers()
//!             .get(RETRY_AFTER)
//!             .and_then(|value| value.to_str().ok())
//!             .and_then(|value| parse_retry_after(value, SystemTime::now()));
//!         return Err(QuoteError::Busy(pause));
//!     }
//!     Ok(response.error_for_status()?.text().await?)
//! }
//! ```
//!
//! With the feature `http` too, `retry_after_from_headers(response.headers(), now)` in
//! [`crate::integrations`]' `http` module does the header lookup in one call.

use crate::Transient;
use std::error::Error as _;

/// The [module's table](self): timeouts and connect errors are transient, status errors by
/// status, builder, redirect, decode and upgrade errors are not, and any other request or body
/// error by its cause.
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
            return crate::http::transient_status(status.as_u16());
        }
        if self.is_builder() || self.is_redirect() || self.is_decode() || self.is_upgrade() {
            return false;
        }
        dropped_connection(self)
    }
}

/// Whether the cause of a request or body error is a connection that died under it.
fn dropped_connection(error: &::reqwest::Error) -> bool {
    let mut cause = error.source();
    while let Some(error) = cause {
        if let Some(hyper) = error.downcast_ref::<::hyper::Error>() {
            if hyper.is_incomplete_message() || hyper.is_canceled() {
                return true;
            }
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return io.is_transient();
        }
        cause = error.source();
    }
    false
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
        let error = ::reqwest::Client::builder()
            .timeout(Duration::from_millis(200))
            .build()
            .unwrap()
            .get(url)
            .send()
            .await
            .unwrap_err();
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
        let error = ::reqwest::Client::builder()
            .redirect(::reqwest::redirect::Policy::limited(2))
            .build()
            .unwrap()
            .get(url)
            .send()
            .await
            .unwrap_err();
        assert!(error.is_redirect(), "{error:?}");
        assert!(!error.is_transient());
    }

    // A decode error needs reqwest's `json` feature: tests/it/integrations.rs has it.
}
