//! Where the service can be told to stop, so that a test (or the example) kills it there with
//! SIGKILL: the failure is real, only its moment is chosen from outside.
//!
//! A service started with `--stop-at STEP` runs normally until the first payout reaches `STEP`
//! (with `--stop-key KEY`, the first payout of that idempotency key: the tests arm the process
//! that a kill restarts for the next run's key, so that it serves the killed run's retries
//! normally and is the next run's victim).
//! There it prints `stopped at STEP` on a line of its own and waits for ever, holding whatever
//! it holds at that moment: a claimed key, an open transaction, a committed payout whose
//! response is not sent yet. [`process::ServiceProcess`](super::process::ServiceProcess) reads
//! that line and kills the process.

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The line a stopped service prints, followed by the step's name.
pub const STOPPED_AT: &str = "stopped at";

/// A step of a payout, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The request is read; nothing is recorded yet.
    BeforeBegin,
    /// The key is claimed (its row is running, under a lease); nothing is paid.
    AfterBegin,
    /// The bank has paid and the ledger row is written in the transaction, not committed.
    AfterLedgerWrite,
    /// The receipt e-mail's job is enqueued in the same transaction, not committed.
    AfterEnqueue,
    /// The ledger row and the key's completion are committed; the response is not sent.
    AfterCommit,
    /// The response has been written and the connection closed.
    AfterResponse,
}

impl Step {
    /// Every step, in the order a payout passes them.
    pub const ALL: [Step; 6] = [
        Step::BeforeBegin,
        Step::AfterBegin,
        Step::AfterLedgerWrite,
        Step::AfterEnqueue,
        Step::AfterCommit,
        Step::AfterResponse,
    ];

    /// The step's name on the command line and in the marker line.
    pub const fn name(self) -> &'static str {
        match self {
            Step::BeforeBegin => "before-begin",
            Step::AfterBegin => "after-begin",
            Step::AfterLedgerWrite => "after-ledger-write",
            Step::AfterEnqueue => "after-enqueue",
            Step::AfterCommit => "after-commit",
            Step::AfterResponse => "after-response",
        }
    }

    /// Whether a service of the lease mode killed here leaves the key running: the retry then
    /// waits for the lease to end and executes under the next claim number.
    pub const fn holds_the_lease(self) -> bool {
        matches!(
            self,
            Step::AfterBegin | Step::AfterLedgerWrite | Step::AfterEnqueue
        )
    }

    /// Whether the payout has committed at this step: its ledger row, its e-mail's job and its
    /// completed key are all there (and none of them before it).
    pub const fn committed(self) -> bool {
        matches!(self, Step::AfterCommit | Step::AfterResponse)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Step {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Step::ALL
            .into_iter()
            .find(|step| step.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Step::ALL.iter().map(|step| step.name()).collect();
                format!("unknown step `{s}`: expected one of {}", names.join(", "))
            })
    }
}

/// The faults a service was started with.
#[derive(Debug, Default)]
pub struct Faults {
    stop_at: Mutex<Option<Step>>,
    /// The only key whose payout stops, if set.
    stop_key: Option<String>,
    lose_first_response: AtomicBool,
    /// The connection whose closing is the step `after-response`.
    closing: Mutex<Option<SocketAddr>>,
}

impl Faults {
    /// Stops at `stop_at` (once), and loses the first payout's response if asked.
    pub fn new(stop_at: Option<Step>, lose_first_response: bool) -> Self {
        Faults {
            stop_at: Mutex::new(stop_at),
            stop_key: None,
            lose_first_response: AtomicBool::new(lose_first_response),
            closing: Mutex::default(),
        }
    }

    /// Stops only in the payout of `key` (`--stop-key`).
    #[must_use]
    pub fn for_key(mut self, key: Option<String>) -> Self {
        self.stop_key = key;
        self
    }

    /// Whether the service stops at `step` of the payout of `key`; true once.
    fn take(&self, step: Step, key: &str) -> bool {
        if self.stop_key.as_deref().is_some_and(|only| only != key) {
            return false;
        }
        let mut stop_at = self.stop_at.lock().unwrap_or_else(PoisonError::into_inner);
        if *stop_at == Some(step) {
            *stop_at = None;
            return true;
        }
        false
    }

    /// Passes `step`: returns at once, unless the service was told to stop here; then it says
    /// so and never returns.
    pub async fn reach(&self, step: Step, key: &str) {
        if self.take(step, key) {
            stopped(step);
            std::future::pending::<()>().await;
        }
    }

    /// For the step `after-response`: whether the service stops once `peer`'s connection has
    /// closed after this response. The response then asks for the connection to close.
    pub fn stop_after_response_to(&self, peer: SocketAddr, key: &str) -> bool {
        if self.take(Step::AfterResponse, key) {
            *self.closing.lock().unwrap_or_else(PoisonError::into_inner) = Some(peer);
            return true;
        }
        false
    }

    /// Whether this payout's response is to be lost (true once, when asked at start).
    pub fn lose_response(&self) -> bool {
        self.lose_first_response.swap(false, Ordering::SeqCst)
    }

    fn connection_closed(&self, peer: SocketAddr) {
        let mut closing = self.closing.lock().unwrap_or_else(PoisonError::into_inner);
        if *closing == Some(peer) {
            *closing = None;
            stopped(Step::AfterResponse);
        }
    }
}

fn stopped(step: Step) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{STOPPED_AT} {step}");
    let _ = out.flush();
}

/// A TCP listener whose connections tell [`Faults`] when they close, for the step
/// `after-response`: hyper drops a connection only after it has written and flushed the last
/// response on it, so a kill after that line cannot cut the response short.
pub struct Listener {
    inner: TcpListener,
    faults: Arc<Faults>,
}

impl Listener {
    /// Wraps `inner`.
    pub fn new(inner: TcpListener, faults: Arc<Faults>) -> Self {
        Listener { inner, faults }
    }
}

impl axum::serve::Listener for Listener {
    type Io = Connection;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, peer) = axum::serve::Listener::accept(&mut self.inner).await;
        let connection = Connection {
            stream,
            peer,
            faults: Arc::clone(&self.faults),
        };
        (connection, peer)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// An accepted connection; see [`Listener`].
pub struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    faults: Arc<Faults>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.faults.connection_closed(self.peer);
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The peer's address, for handlers (`ConnectInfo<Peer>`).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, Listener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Listener>) -> Self {
        Peer(*stream.remote_addr())
    }
}
