use retry_runtime::{
    retry, AdaptiveThrottling, AdmissionGate, CircuitBreaker, CircuitOpen, Elapsed,
    GiveUp, Rejected, RetryBudget, RetryEvent, Verdict,
};
enum ContractError {
    Overloaded,
    TimedOut(Elapsed),
    Unavailable(CircuitOpen),
    Shed(Rejected),
}
#[automatically_derived]
impl ::core::fmt::Debug for ContractError {
    #[inline]
    fn fmt(&self, f: &mut ::core::fmt::Formatter) -> ::core::fmt::Result {
        match self {
            ContractError::Overloaded => {
                ::core::fmt::Formatter::write_str(f, "Overloaded")
            }
            ContractError::TimedOut(__self_0) => {
                ::core::fmt::Formatter::debug_tuple_field1_finish(
                    f,
                    "TimedOut",
                    &__self_0,
                )
            }
            ContractError::Unavailable(__self_0) => {
                ::core::fmt::Formatter::debug_tuple_field1_finish(
                    f,
                    "Unavailable",
                    &__self_0,
                )
            }
            ContractError::Shed(__self_0) => {
                ::core::fmt::Formatter::debug_tuple_field1_finish(f, "Shed", &__self_0)
            }
        }
    }
}
impl From<Elapsed> for ContractError {
    fn from(e: Elapsed) -> Self {
        ContractError::TimedOut(e)
    }
}
impl From<CircuitOpen> for ContractError {
    fn from(e: CircuitOpen) -> Self {
        ContractError::Unavailable(e)
    }
}
impl From<Rejected> for ContractError {
    fn from(e: Rejected) -> Self {
        ContractError::Shed(e)
    }
}
fn classify(error: &ContractError) -> Verdict {
    match error {
        ContractError::Overloaded | ContractError::TimedOut(_) => Verdict::Retry,
        ContractError::Unavailable(_) | ContractError::Shed(_) => Verdict::Fail,
    }
}
fn log_retry(_: &ContractError, _: &RetryEvent) {}
fn log_failure(_: &ContractError) {}
async fn save_for_later(
    outcome: Result<u16, ContractError>,
    _: GiveUp,
) -> Result<u16, ContractError> {
    outcome
}
fn is_pending(status: &u16) -> bool {
    *status == 202
}
static BUDGET: RetryBudget = RetryBudget::new();
static BREAKER: CircuitBreaker = CircuitBreaker::new();
static GATE: AdmissionGate = AdmissionGate::adaptive_throttling(
    AdaptiveThrottling::new(),
);
async fn check_coverage(claim: u32) -> Result<u16, ContractError> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(4)
        .base(__retry_rt::Duration::from_millis(250))
        .factor(1.5)
        .backoff(__retry_rt::Backoff::Exponential)
        .max_delay(__retry_rt::Duration::from_secs(5))
        .deadline(__retry_rt::Duration::from_secs(20))
        .jitter(__retry_rt::Jitter::Decorrelated);
    let mut __retry = __retry_rt::Fallback(
            __retry_rt::Shape::<Result<u16, ContractError>>::new(),
            save_for_later,
        )
        .attach(
            __retry_rt::Shape::<Result<u16, ContractError>>::new()
                .start(&__RETRY_POLICY, "check_coverage", classify, __retry_rt::ASYNC)
                .on_result(is_pending)
                .timeout(__retry_rt::Duration::from_secs(2))
                .notify(log_retry)
                .on_give_up(log_failure)
                .budget(&BUDGET)
                .breaker(&BREAKER)
                .gate(&GATE)
                .nested_retry(),
        )
        .log_level(__retry_rt::level::Warn);
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry
            .run_timed(async {
                if false {
                    return __retry_rt::output_type::<Result<u16, ContractError>>();
                }
                {
                    let _ = claim;
                    Ok(200)
                }
            })
            .await;
        #[allow(unreachable_code)]
        {
            __retry = match __retry.next(__retry_outcome) {
                __retry_rt::ControlFlow::Break(__retry_result) => {
                    return __retry_rt::finish(__retry_result).await;
                }
                __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
            };
            __retry.pause().await;
        }
    }
}
fn main() {}
