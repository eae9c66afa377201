use retry_runtime::{
    retry, CircuitBreaker, CircuitOpen, Elapsed, RetryBudget, RetryEvent, Verdict,
};
enum ContractError {
    Overloaded,
    TimedOut(Elapsed),
    Unavailable(CircuitOpen),
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
fn classify(error: &ContractError) -> Verdict {
    match error {
        ContractError::Overloaded | ContractError::TimedOut(_) => Verdict::Retry,
        ContractError::Unavailable(_) => Verdict::Fail,
    }
}
fn log_retry(_: &ContractError, _: &RetryEvent) {}
fn log_failure(_: &ContractError) {}
fn is_pending(status: &u16) -> bool {
    *status == 202
}
static BUDGET: RetryBudget = RetryBudget::new();
static BREAKER: CircuitBreaker = CircuitBreaker::new();
async fn check_coverage(claim: u32) -> Result<u16, ContractError> {
    const __RETRY_POLICY: ::retry_runtime::__private::Policy = ::retry_runtime::__private::Policy::new()
        .max(4)
        .base(::retry_runtime::__private::Duration::from_millis(250))
        .factor(1.5)
        .backoff(::retry_runtime::__private::Backoff::Exponential)
        .max_delay(::retry_runtime::__private::Duration::from_secs(5))
        .deadline(::retry_runtime::__private::Duration::from_secs(20))
        .jitter(::retry_runtime::__private::Jitter::Decorrelated);
    let mut __retry = ::retry_runtime::__private::Retry::<
        Result<u16, ContractError>,
    >::start_async(&__RETRY_POLICY, "check_coverage", classify)
        .on_result(is_pending)
        .notify(log_retry)
        .on_give_up(log_failure)
        .timeout(::retry_runtime::__private::Duration::from_secs(2))
        .budget(&BUDGET)
        .breaker(&BREAKER)
        .nested_retry();
    loop {
        let __retry_outcome = __retry
            .run_timed(async {
                if false {
                    return ::retry_runtime::__private::output_type::<
                        Result<u16, ContractError>,
                    >();
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
                ::retry_runtime::__private::ControlFlow::Break(__retry_result) => {
                    return __retry_result;
                }
                ::retry_runtime::__private::ControlFlow::Continue(__retry_next) => {
                    __retry_next
                }
            };
            __retry.pause().await;
        }
    }
}
fn main() {}
