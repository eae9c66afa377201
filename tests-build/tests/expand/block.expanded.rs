use retry_runtime::retry_block;
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
    async {
        use ::retry_runtime::__private as __retry_rt;
        fn each_attempt_runs_the_block_again_so_clone_what_it_moves<
            __B: ::core::ops::AsyncFnMut() -> __R,
            __R,
        >(_: &__B) {}
        const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
            .max(3)
            .base(__retry_rt::Duration::from_secs(1))
            .jitter(__retry_rt::Jitter::Proportional(0.5));
        let mut __retry_body = async || { client.coverage(claim).await };
        each_attempt_runs_the_block_again_so_clone_what_it_moves(&__retry_body);
        let mut __retry = __retry_rt::Shape::of_async(&__retry_body)
            .start(&__RETRY_POLICY, "macrotest003:22", is_transient, __retry_rt::ASYNC);
        let __retry_faults = __retry.probe().maker();
        __retry = __retry.faults(__retry_faults);
        loop {
            let __retry_outcome = __retry.run(__retry_body()).await;
            #[allow(unreachable_code)]
            {
                __retry = match __retry.next(__retry_outcome) {
                    __retry_rt::ControlFlow::Break(__retry_result) => {
                        break __retry_result;
                    }
                    __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
                };
                __retry.pause().await;
            }
        }
    }
        .await
}
fn read_config(path: &str) -> Result<String, ContractError> {
    {
        use ::retry_runtime::__private as __retry_rt;
        fn each_attempt_runs_the_block_again_so_clone_what_it_moves<
            __B: ::core::ops::FnMut() -> __R,
            __R,
        >(_: &__B) {}
        const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new().max(3);
        let mut __retry_body = || { Ok(path.to_owned()) };
        each_attempt_runs_the_block_again_so_clone_what_it_moves(&__retry_body);
        let mut __retry = __retry_rt::Shape::of(&__retry_body)
            .start(&__RETRY_POLICY, "macrotest003:26", is_transient, __retry_rt::Unset);
        let __retry_faults = __retry.probe().maker();
        __retry = __retry.faults(__retry_faults);
        loop {
            let __retry_outcome = __retry.attempt(&mut __retry_body);
            #[allow(unreachable_code)]
            {
                __retry = match __retry.next(__retry_outcome) {
                    __retry_rt::ControlFlow::Break(__retry_result) => {
                        break __retry_result;
                    }
                    __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
                };
                __retry.pause_blocking();
            }
        }
    }
}
fn main() {}
