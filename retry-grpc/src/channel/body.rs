//! The door's bodies: the request body, kept for replay while it streams (a tee up to a limit),
//! and the response body of a committed call, which reads the status in its trailers for the
//! throttle and holds the call's deadline.

use crate::code::CodeSet;
use crate::{AttemptStatus, RetryCall, RetryThrottle};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use tonic::{Code, Status};

/// What the request body's readers share: the caller's body, the frames read from it so far
/// (kept until they outgrow the limit), and the readers waiting for the next frame.
struct Tee {
    source: Option<tonic::body::Body>,
    frames: Vec<Frame<Bytes>>,
    /// Frames dropped from the front when the body outgrew the limit.
    dropped: usize,
    bytes: usize,
    limit: usize,
    outgrew: bool,
    failed: Option<Status>,
    /// The source is polled with this waker, never with a reader's own: the source keeps one
    /// waker, and a reader's may belong to a copy that failed since (issue 39: the survivor of
    /// a hedged client stream was never woken again).
    waiting: Arc<Waiting>,
}

/// The readers waiting for the caller's body, woken all at once when it has something.
#[derive(Default)]
struct Waiting(Mutex<Vec<Waker>>);

impl Waiting {
    fn push(&self, waker: &Waker) {
        let mut wakers = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !wakers.iter().any(|w| w.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

impl Wake for Waiting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let wakers = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for waker in wakers {
            waker.wake();
        }
    }
}

/// The request body of a call, shared by its attempts: each attempt reads a [`Replay`] of it,
/// which gives the frames already read and then reads on from the caller's body. Frames are kept
/// (reference-counted `Bytes`, no copy) up to `limit` bytes; past it they are dropped, the call
/// can no longer be retried ([`outgrew`](Self::outgrew)) and only the reader in front can go on.
#[derive(Clone)]
pub(crate) struct RequestBody(Arc<Mutex<Tee>>);

impl RequestBody {
    pub(crate) fn new(body: tonic::body::Body, limit: usize) -> Self {
        let ended = body.is_end_stream();
        RequestBody(Arc::new(Mutex::new(Tee {
            source: (!ended).then_some(body),
            frames: Vec::new(),
            dropped: 0,
            bytes: 0,
            limit,
            outgrew: false,
            failed: None,
            waiting: Arc::default(),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Tee> {
        // Each step under the lock leaves the tee consistent: a poisoned lock is used as is.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether the body outgrew the limit: no attempt after the one in flight can send it.
    pub(crate) fn outgrew(&self) -> bool {
        self.lock().outgrew
    }

    /// A new reader from the first frame, as tonic's body.
    pub(crate) fn replay(&self) -> tonic::body::Body {
        tonic::body::Body::new(Replay {
            tee: self.clone(),
            next: 0,
        })
    }
}

/// One attempt's reader of the [`RequestBody`].
struct Replay {
    tee: RequestBody,
    next: usize,
}

impl Body for Replay {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let next = self.next;
        let mut tee = self.tee.lock();
        if next < tee.dropped {
            return Poll::Ready(Some(Err(Status::internal(
                "retry-grpc: the request outgrew the retry buffer and cannot be sent again",
            ))));
        }
        if let Some(frame) = tee.frames.get(next - tee.dropped) {
            let frame = clone_frame(frame);
            drop(tee);
            self.next += 1;
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(status) = &tee.failed {
            return Poll::Ready(Some(Err(status.clone())));
        }
        let waiting = Arc::clone(&tee.waiting);
        let Some(source) = tee.source.as_mut() else {
            return Poll::Ready(None);
        };
        // Registered before the poll, so that a frame arriving during it wakes this reader too.
        waiting.push(cx.waker());
        let all = Waker::from(waiting);
        match Pin::new(source).poll_frame(&mut Context::from_waker(&all)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                tee.source = None;
                wake_all(&mut tee);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(status))) => {
                tee.failed = Some(status.clone());
                tee.source = None;
                wake_all(&mut tee);
                Poll::Ready(Some(Err(status)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, Bytes::len);
                tee.bytes = tee.bytes.saturating_add(len);
                if tee.bytes > tee.limit && !tee.outgrew {
                    tee.outgrew = true;
                }
                if tee.outgrew {
                    // Past the limit nothing is kept: only this reader goes on.
                    tee.dropped += tee.frames.len() + 1;
                    tee.frames.clear();
                } else {
                    tee.frames.push(clone_frame(&frame));
                }
                wake_all(&mut tee);
                drop(tee);
                self.next += 1;
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        let tee = self.tee.lock();
        tee.source.is_none()
            && tee.failed.is_none()
            && self.next >= tee.dropped
            && self.next - tee.dropped >= tee.frames.len()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

fn wake_all(tee: &mut Tee) {
    tee.waiting.wake_by_ref();
}

fn clone_frame(frame: &Frame<Bytes>) -> Frame<Bytes> {
    match (frame.data_ref(), frame.trailers_ref()) {
        (Some(data), _) => Frame::data(data.clone()),
        (None, Some(trailers)) => Frame::trailers(trailers.clone()),
        // A frame is data or trailers.
        (None, None) => Frame::data(Bytes::new()),
    }
}

/// Who hears the status a committed call ends with, in its trailers.
pub(crate) enum Accounting {
    /// Nobody (no throttle).
    None,
    /// A retried call: its [`RetryCall`], committed, so that the throttle counts a success or a
    /// failure as C-core's `ShouldRetry` does for a committed call.
    Retry(RetryCall),
    /// A hedged call: its server's throttle and the non-fatal codes (a failure with one takes a
    /// token, an `OK` gives `tokenRatio`).
    Hedge(Arc<RetryThrottle>, CodeSet),
}

impl Accounting {
    fn on_status(&mut self, status: AttemptStatus) {
        match self {
            Accounting::None => {}
            Accounting::Retry(call) => {
                call.commit();
                let _ = call.on_status(status.code, status.pushback);
            }
            Accounting::Hedge(throttle, non_fatal) => {
                if status.code == Code::Ok {
                    throttle.record_success();
                } else if non_fatal.contains(status.code) {
                    let _ = throttle.record_failure();
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The response body of a committed call: the answer's body as it comes, its trailers' status
    /// reported once to the [`Accounting`], and the call's deadline, after which the body ends
    /// with `DEADLINE_EXCEEDED` (the deadline covers the whole call, the stream included).
    pub(crate) struct Answer<B> {
        #[pin]
        body: B,
        accounting: Accounting,
        deadline: Option<Pin<Box<tokio::time::Sleep>>>,
        done: bool,
    }
}

impl<B> Answer<B> {
    pub(crate) fn new(
        body: B,
        accounting: Accounting,
        deadline: Option<tokio::time::Instant>,
    ) -> Self {
        Answer {
            body,
            accounting,
            deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
            done: false,
        }
    }
}

impl<B> Body for Answer<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<crate::channel::BoxError>,
{
    type Data = Bytes;
    type Error = crate::channel::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        match this.body.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(status) = frame.trailers_ref().and_then(AttemptStatus::from_headers) {
                    this.accounting.on_status(status);
                    *this.accounting = Accounting::None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                *this.done = true;
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                *this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(deadline) = this.deadline.as_mut() {
                    if deadline.as_mut().poll(cx).is_ready() {
                        *this.done = true;
                        return Poll::Ready(Some(Err(Box::new(Status::deadline_exceeded(
                            "retry-grpc: the call's deadline passed while its answer streamed",
                        )))));
                    }
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A caller's body whose frames the test hands over one by one; it keeps one waker, as
    /// tonic's encoding body (and any `Stream`) does.
    #[derive(Clone, Default)]
    struct Caller(Arc<Mutex<Sent>>);

    #[derive(Default)]
    struct Sent {
        frames: Vec<Bytes>,
        ended: bool,
        waker: Option<Waker>,
    }

    impl Caller {
        fn send(&self, data: &'static [u8], last: bool) {
            let mut sent = self.0.lock().expect("not poisoned");
            sent.frames.push(Bytes::from_static(data));
            sent.ended = last;
            if let Some(waker) = sent.waker.take() {
                waker.wake();
            }
        }
    }

    impl Body for Caller {
        type Data = Bytes;
        type Error = Status;

        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
            let mut sent = self.0.lock().expect("not poisoned");
            if !sent.frames.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(sent.frames.remove(0)))));
            }
            if sent.ended {
                return Poll::Ready(None);
            }
            sent.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn poll(body: &mut tonic::body::Body, waker: &Waker) -> Poll<Option<Bytes>> {
        Pin::new(body)
            .poll_frame(&mut Context::from_waker(waker))
            .map(|frame| {
                frame.map(|frame| {
                    frame
                        .ok()
                        .and_then(|f| f.into_data().ok())
                        .unwrap_or_default()
                })
            })
    }

    #[test]
    fn every_reader_waiting_on_the_callers_body_is_woken_when_the_last_to_poll_is_gone() {
        // Issue 39: two hedged copies read the request; the second polls the caller's body
        // last, then fails and is dropped; the first must still hear of the next message.
        let caller = Caller::default();
        let tee = RequestBody::new(tonic::body::Body::new(caller.clone()), 1024);
        let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let (first_waker, second_waker) = (
            Waker::from(Arc::clone(&first)),
            Waker::from(Arc::clone(&second)),
        );
        let mut one = tee.replay();
        let mut two = tee.replay();
        caller.send(b"a", false);
        assert_eq!(
            poll(&mut one, &first_waker),
            Poll::Ready(Some(Bytes::from_static(b"a")))
        );
        assert!(poll(&mut one, &first_waker).is_pending());
        assert_eq!(
            poll(&mut two, &second_waker),
            Poll::Ready(Some(Bytes::from_static(b"a")))
        );
        assert!(poll(&mut two, &second_waker).is_pending());
        let woken = first.0.load(Ordering::Relaxed);
        drop(two);
        caller.send(b"b", true);
        assert_eq!(
            first.0.load(Ordering::Relaxed),
            woken + 1,
            "the first reader is woken"
        );
        assert_eq!(
            poll(&mut one, &first_waker),
            Poll::Ready(Some(Bytes::from_static(b"b")))
        );
        assert_eq!(poll(&mut one, &first_waker), Poll::Ready(None));
    }
}
