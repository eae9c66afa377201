//! The optional integrations (`http`, `reqwest`, `tonic`) through `#[retry]` itself: a function
//! whose error type is the client's own, with no `on = ...`, retries exactly the errors of the
//! tables in `retry_runtime::integrations`. reqwest's errors are real, on loopback.

use retry_runtime::integrations::http::{response_verdict, status_is_transient};
use retry_runtime::integrations::reqwest::response_verdict as reqwest_response_verdict;
use retry_runtime::integrations::tonic::GRPC_RETRY_PUSHBACK_MS;
use retry_runtime::{Transient, Verdict, retry, testing};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A loopback HTTP server that gives the n-th request the n-th of `answers` (the last one
/// again once they run out), then closes the connection. Returns its URL and a request count.
async fn serve(answers: &'static [&'static str]) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("a bound address");
    let url = format!("http://{address}/");
    let served = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&served);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                match socket.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buffer[..n]),
                }
            }
            let n = count.fetch_add(1, Ordering::SeqCst);
            let answer = answers[n.min(answers.len() - 1)];
            let _ = socket.write_all(answer.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (url, served)
}

const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";
const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
const PAID: &str = "HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\npaid";

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client without TLS builds")
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn fetch(client: &reqwest::Client, url: &str) -> Result<String, reqwest::Error> {
    client
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .text()
        .await
}

#[tokio::test]
async fn reqwest_503_is_retried_until_the_answer() {
    let (url, served) = serve(&[UNAVAILABLE, UNAVAILABLE, PAID]).await;
    assert_eq!(fetch(&client(), &url).await.unwrap(), "paid");
    assert_eq!(served.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn reqwest_404_is_returned_at_once() {
    let (url, served) = serve(&[NOT_FOUND, PAID]).await;
    let error = fetch(&client(), &url).await.unwrap_err();
    assert_eq!(error.status(), Some(reqwest::StatusCode::NOT_FOUND));
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reqwest_503_to_the_end_returns_the_last_error() {
    let (url, served) = serve(&[UNAVAILABLE]).await;
    let error = fetch(&client(), &url).await.unwrap_err();
    assert_eq!(
        error.status(),
        Some(reqwest::StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(served.load(Ordering::SeqCst), 4, "1 call and 3 retries");
}

#[tokio::test]
async fn reqwest_refused_connections_are_retried() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let calls = Cell::new(0);

    #[retry(max = 2, base = "1ms", jitter = none)]
    async fn connect(calls: &Cell<u32>, port: u16) -> Result<String, reqwest::Error> {
        calls.set(calls.get() + 1);
        client()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await?
            .text()
            .await
    }

    let error = connect(&calls, port).await.unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    assert_eq!(calls.get(), 3);
}

#[tokio::test]
async fn reqwest_body_cut_off_mid_message_is_retried() {
    // `content-length: 100`, 5 bytes, and the connection closes: `.text()` fails with a decode
    // error whose cause is hyper's incomplete body. The connection broke; the next may not.
    const CUT_OFF: &str = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nhello";
    let (url, served) = serve(&[CUT_OFF, PAID]).await;
    assert_eq!(fetch(&client(), &url).await.unwrap(), "paid");
    assert_eq!(served.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn reqwest_decode_errors_are_not_retried() {
    let (url, served) = serve(&[
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\nnot json",
    ])
    .await;

    #[retry(max = 3, base = "1ms", jitter = none)]
    async fn decode(client: &reqwest::Client, url: &str) -> Result<(), reqwest::Error> {
        client.get(url).send().await?.json::<()>().await
    }

    let error = decode(&client(), &url).await.unwrap_err();
    assert!(error.is_decode(), "{error:?}");
    assert!(!error.is_transient());
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn reqwest_response_verdict_honours_retry_after() {
    // A 503 that says "come back in 3 s" arrives as `Ok(response)`; `response_verdict` turns it
    // into the error's verdict. The pause is recorded, not slept.
    #[derive(Debug)]
    enum QuoteError {
        Busy(Verdict),
        Http(reqwest::Error),
    }

    impl From<reqwest::Error> for QuoteError {
        fn from(error: reqwest::Error) -> Self {
            QuoteError::Http(error)
        }
    }

    impl Transient for QuoteError {
        fn is_transient(&self) -> bool {
            self.verdict().is_retry()
        }
        fn verdict(&self) -> Verdict {
            match self {
                QuoteError::Busy(verdict) => *verdict,
                QuoteError::Http(error) => error.verdict(),
            }
        }
    }

    #[retry(max = 3, base = "1ms", jitter = none)]
    async fn quote(client: &reqwest::Client, url: &str) -> Result<String, QuoteError> {
        let response = client.get(url).send().await?;
        match reqwest_response_verdict(&response) {
            Verdict::Fail => Ok(response.error_for_status()?.text().await?),
            busy => Err(QuoteError::Busy(busy)),
        }
    }

    const BUSY: &str =
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 3\r\ncontent-length: 0\r\n\r\n";
    let (url, served) = serve(&[BUSY, PAID]).await;
    let (answer, pauses) = testing::record_async(quote(&client(), &url)).await;
    assert_eq!(answer.unwrap(), "paid");
    assert_eq!(pauses, [Duration::from_secs(3)]);
    assert_eq!(served.load(Ordering::SeqCst), 2);

    let (url, served) = serve(&[NOT_FOUND, PAID]).await;
    let (answer, pauses) = testing::record_async(quote(&client(), &url)).await;
    assert!(
        matches!(answer, Err(QuoteError::Http(e)) if e.status() == Some(reqwest::StatusCode::NOT_FOUND))
    );
    assert!(pauses.is_empty());
    assert_eq!(served.load(Ordering::SeqCst), 1);
}

/// The common case in one line: a `503` with `Retry-After` that reqwest returns as
/// `Ok(response)` is judged by `on_result = response_verdict`, and the pause the server asked
/// for is honoured (a floor, spread above by the jitter; none here).
#[tokio::test]
async fn reqwest_response_verdict_as_on_result() {
    #[retry(
        max = 3,
        base = "1ms",
        jitter = none,
        on_result = retry_runtime::integrations::reqwest::response_verdict
    )]
    async fn quote(
        client: &reqwest::Client,
        url: &str,
    ) -> Result<reqwest::Response, reqwest::Error> {
        client.get(url).send().await
    }

    const BUSY: &str =
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 2\r\ncontent-length: 0\r\n\r\n";
    let (url, served) = serve(&[BUSY, PAID]).await;
    let (answer, pauses) = testing::record_async(quote(&client(), &url)).await;
    let response = answer.expect("a response");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    assert_eq!(response.text().await.expect("a body"), "paid");
    assert_eq!(pauses, [Duration::from_secs(2)]);
    assert_eq!(served.load(Ordering::SeqCst), 2);

    // Busy every time: the last 503 is returned as it came, after the three retries.
    let (url, served) = serve(&[BUSY]).await;
    let (answer, pauses) = testing::record_async(quote(&client(), &url)).await;
    assert_eq!(
        answer.expect("a response").status(),
        reqwest::StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(pauses, [Duration::from_secs(2); 3]);
    assert_eq!(served.load(Ordering::SeqCst), 4);
}

#[test]
fn http_status_codes_as_errors() {
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn call(answers: &Cell<Vec<u16>>) -> Result<&'static str, http::StatusCode> {
        let mut left = answers.take();
        let status = http::StatusCode::from_u16(left.remove(0)).unwrap();
        answers.set(left);
        if status.is_success() {
            Ok("done")
        } else {
            Err(status)
        }
    }

    let answers = Cell::new(vec![429, 502, 200]);
    assert_eq!(call(&answers), Ok("done"));
    assert!(answers.take().is_empty(), "all three answers used");

    let answers = Cell::new(vec![409, 200]);
    assert_eq!(call(&answers), Err(http::StatusCode::CONFLICT));
    assert_eq!(answers.take(), vec![200], "409 was not retried");
}

#[test]
fn http_responses_judged_by_a_classifier() {
    // Boxed, as clippy's `result_large_err` asks of an error this size.
    type Answer = Box<http::Response<&'static str>>;

    fn worth_retrying(response: &Answer) -> bool {
        response_verdict(response).is_retry()
    }

    #[retry(max = 3, base = "1ms", jitter = none, on = worth_retrying)]
    fn call(answers: &Cell<Vec<u16>>) -> Result<&'static str, Answer> {
        let mut left = answers.take();
        let status = left.remove(0);
        answers.set(left);
        let response = http::Response::builder()
            .status(status)
            .header("retry-after", "0")
            .body("body")
            .unwrap();
        if status_is_transient(response.status()) || response.status().is_client_error() {
            Err(Box::new(response))
        } else {
            Ok(response.into_body())
        }
    }

    let answers = Cell::new(vec![503, 504, 200]);
    assert_eq!(call(&answers).unwrap(), "body");

    let answers = Cell::new(vec![400, 200]);
    assert_eq!(call(&answers).unwrap_err().status(), 400);
    assert_eq!(answers.take(), vec![200]);

    let busy = http::Response::builder()
        .status(503)
        .header("retry-after", "30")
        .body(())
        .unwrap();
    // A 503 that says when to come back: the server is shedding load.
    assert_eq!(
        response_verdict(&busy),
        Verdict::ThrottledAfter(Duration::from_secs(30))
    );
}

#[test]
fn tonic_statuses_as_errors() {
    #[retry(max = 3, base = "1ms", jitter = none)]
    fn call(answers: &Cell<Vec<tonic::Status>>) -> Result<u32, tonic::Status> {
        let mut left = answers.take();
        let status = left.remove(0);
        answers.set(left);
        match status.code() {
            tonic::Code::Ok => Ok(7),
            _ => Err(status),
        }
    }

    let answers = Cell::new(vec![
        tonic::Status::unavailable("restarting"),
        tonic::Status::deadline_exceeded("slow"),
        tonic::Status::new(tonic::Code::Ok, ""),
    ]);
    assert_eq!(call(&answers).unwrap(), 7);

    let answers = Cell::new(vec![
        tonic::Status::unknown("panicked"),
        tonic::Status::new(tonic::Code::Ok, ""),
    ]);
    assert_eq!(call(&answers).unwrap_err().code(), tonic::Code::Unknown);
    assert_eq!(answers.take().len(), 1, "Unknown was not retried");

    // The server said "do not retry": a transient code, and still one call.
    let mut refused = tonic::Status::unavailable("draining");
    refused
        .metadata_mut()
        .insert(GRPC_RETRY_PUSHBACK_MS, "-1".parse().unwrap());
    let answers = Cell::new(vec![refused, tonic::Status::new(tonic::Code::Ok, "")]);
    assert_eq!(call(&answers).unwrap_err().code(), tonic::Code::Unavailable);
    assert_eq!(answers.take().len(), 1, "a refusing pushback was honoured");
}
