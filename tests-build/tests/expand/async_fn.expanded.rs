use retry_runtime::retry;
pub struct ContractClient;
pub struct Claim;
pub struct Coverage;
pub enum ContractError {
    Overloaded,
}
#[automatically_derived]
impl ::core::fmt::Debug for ContractError {
    #[inline]
    fn fmt(&self, f: &mut ::core::fmt::Formatter) -> ::core::fmt::Result {
        ::core::fmt::Formatter::write_str(f, "Overloaded")
    }
}
fn is_transient(error: &ContractError) -> bool {
    #[allow(non_exhaustive_omitted_patterns)]
    match error {
        ContractError::Overloaded => true,
        _ => false,
    }
}
impl ContractClient {
    async fn coverage(&self, _claim: &Claim) -> Result<Coverage, ContractError> {
        Ok(Coverage)
    }
}
async fn check_coverage(
    client: &ContractClient,
    claim: &Claim,
) -> Result<Coverage, ContractError> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(3)
        .base(__retry_rt::Duration::from_secs(1))
        .jitter(__retry_rt::Jitter::Proportional(0.5));
    let mut __retry = __retry_rt::Shape::<Result<Coverage, ContractError>>::new()
        .start(&__RETRY_POLICY, "check_coverage", is_transient, __retry_rt::ASYNC);
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry
            .run(async {
                if false {
                    return __retry_rt::output_type::<Result<Coverage, ContractError>>();
                }
                { client.coverage(claim).await }
            })
            .await;
        #[allow(unreachable_code)]
        {
            __retry = match __retry.next(__retry_outcome) {
                __retry_rt::ControlFlow::Break(__retry_result) => return __retry_result,
                __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
            };
            __retry.pause().await;
        }
    }
}
fn main() {}
