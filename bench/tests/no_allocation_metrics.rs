//! With the `metrics` feature and a real recorder installed (the Prometheus exporter's), a call
//! whose first attempt succeeds allocates nothing after the function's first call, which
//! registers its handles. A test file of its own: the recorder is global, and in
//! `no_allocation.rs` it would register the other tests' functions again while they measure.

use allocation_counter::measure;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use retry_runtime::{Transient, retry};
use std::hint::black_box;
use std::pin::pin;
use std::sync::OnceLock;
use std::task::{Context, Poll, Waker};

#[derive(Debug, PartialEq)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(max = 3, base = "1s")]
fn sync_happy(x: u64) -> Result<u64, Busy> {
    Ok(x + 1)
}

#[retry(max = 3, base = "1s")]
async fn async_happy(x: u64) -> Result<u64, Busy> {
    Ok(x + 1)
}

/// The Prometheus recorder, installed once as the global recorder.
fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).expect("the only recorder of this binary");
        handle
    })
}

fn poll_once<F: Future>(call: F) -> Poll<F::Output> {
    let mut call = pin!(call);
    call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn with_a_prometheus_recorder_a_first_try_allocates_nothing_after_the_first_call() {
    let prometheus = prometheus();
    // The first calls register the handles.
    assert_eq!(sync_happy(1), Ok(2));
    assert_eq!(poll_once(async_happy(1)), Poll::Ready(Ok(2)));
    let mut ok = 0;
    let counted = measure(|| {
        for x in 0..1000 {
            ok += u32::from(sync_happy(black_box(x)).is_ok());
            ok += u32::from(matches!(
                poll_once(async_happy(black_box(x))),
                Poll::Ready(Ok(_))
            ));
        }
    });
    assert_eq!(ok, 2000);
    assert_eq!(counted.count_total, 0, "{counted:?}");
    // And the recorder saw every call.
    let scrape = prometheus.render();
    for function in ["sync_happy", "async_happy"] {
        let line =
            format!("retry_calls_total{{function=\"{function}\",outcome=\"first_try\"}} 1001");
        assert!(
            scrape.lines().any(|l| l == line),
            "no `{line}` in:\n{scrape}"
        );
    }
}
