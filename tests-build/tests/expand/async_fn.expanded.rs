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
    const __RETRY_POLICY: ::retry_runtime::__private::Policy = ::retry_runtime::__private::Policy::new()
        .max(3)
        .base(::retry_runtime::__private::Duration::from_secs(1))
        .jitter(::retry_runtime::__private::Jitter::Proportional(0.5));
    let mut __retry = ::retry_runtime::__private::Retry::<
        Result<Coverage, ContractError>,
    >::start_async(&__RETRY_POLICY, "check_coverage", is_transient);
    loop {
        let __retry_outcome = __retry
            .run(async {
                if false {
                    return ::retry_runtime::__private::output_type::<
                        Result<Coverage, ContractError>,
                    >();
                }
                { client.coverage(claim).await }
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
