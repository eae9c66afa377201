use retry_runtime::engine::{self, DynHooks, Settings};
use retry_runtime::TokioTimer;
use retry_runtime::{AdaptiveThrottling, AdmissionGate, CircuitOpen, Elapsed, Policy, Verdict};

static GATE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());

// A door's error with no variant for a gate's rejection: enough without a gate, not with one.
#[derive(Debug)]
enum CallError {
    Busy,
    Timeout,
    Open,
}

impl From<Elapsed> for CallError {
    fn from(_: Elapsed) -> Self {
        CallError::Timeout
    }
}

impl From<CircuitOpen> for CallError {
    fn from(_: CircuitOpen) -> Self {
        CallError::Open
    }
}

async fn call(policy: &Policy) -> Result<u32, CallError> {
    let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy));
    let settings = Settings::new(policy);
    engine::drive(
        &settings,
        DynHooks::new(&classify).gate(Some(&GATE)),
        TokioTimer,
        || async { Ok(1) },
    )
    .await
}

fn main() {
    let _ = call;
}
