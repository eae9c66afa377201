use retry_runtime::{non_idempotent, retry, IdempotencyKey};
use std::io;
/**

**Not idempotent**: a repeat would act twice. It is retried only with an idempotency key that every attempt sends.*/
async fn pay_out(claim: u32, amount: u64, key: &IdempotencyKey) -> io::Result<String> {
    const __RETRY_POLICY: ::retry_runtime::__private::Policy = ::retry_runtime::__private::Policy::new()
        .max(2)
        .base(::retry_runtime::__private::Duration::from_millis(500))
        .jitter(::retry_runtime::__private::Jitter::Full);
    let mut __retry = ::retry_runtime::__private::Retry::<
        io::Result<String>,
    >::start_async(
            &__RETRY_POLICY,
            "pay_out",
            |__retry_error| ::retry_runtime::__private::is_transient(__retry_error),
        )
        .key(&key);
    loop {
        let __retry_outcome = __retry
            .run(async {
                if false {
                    return ::retry_runtime::__private::output_type::<
                        io::Result<String>,
                    >();
                }
                {
                    Ok(
                        ::alloc::__export::must_use({
                            ::alloc::fmt::format(
                                format_args!("{0} {1} {2}", claim, amount, key),
                            )
                        }),
                    )
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
