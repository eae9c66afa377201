use retry_runtime::{non_idempotent, retry, GiveUp, IdempotencyKey};
use std::io;
/**

**Not idempotent**: a repeat would act twice. It is retried only with an idempotency key that every attempt sends.*/
async fn pay_out(claim: u32, amount: u64, key: &IdempotencyKey) -> io::Result<String> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(2)
        .base(__retry_rt::Duration::from_millis(500))
        .jitter(__retry_rt::Jitter::Full);
    let mut __retry = __retry_rt::Shape::<io::Result<String>>::new()
        .start(
            &__RETRY_POLICY,
            "pay_out",
            |__retry_error| __retry_rt::is_transient(__retry_error),
            __retry_rt::ASYNC,
        );
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry
            .key(&*key)
            .run(async {
                if false {
                    return __retry_rt::output_type::<io::Result<String>>();
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
                __retry_rt::ControlFlow::Break(__retry_result) => return __retry_result,
                __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
            };
            __retry.pause().await;
        }
    }
}
/// A key of any type that implements `Display`, marked; a sync function.
/**

**Not idempotent**: a repeat would act twice. It is retried only with an idempotency key that every attempt sends.*/
fn send_receipt(order: u64, to: &str) -> io::Result<()> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(2)
        .base(__retry_rt::Duration::from_millis(500));
    let mut __retry = __retry_rt::Shape::<io::Result<()>>::new()
        .start(
            &__RETRY_POLICY,
            "send_receipt",
            |__retry_error| __retry_rt::is_transient(__retry_error),
            __retry_rt::Unset,
        );
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry
            .key(&order)
            .attempt(|| {
                let _ = (order, to);
                Ok(())
            });
        #[allow(unreachable_code)]
        {
            __retry = match __retry.next(__retry_outcome) {
                __retry_rt::ControlFlow::Break(__retry_result) => return __retry_result,
                __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
            };
            __retry.pause_blocking();
        }
    }
}
/// With a fallback: it runs with the key lent, as the attempts do (`next_keyed`).
/**

**Not idempotent**: a repeat would act twice. It is retried only with an idempotency key that every attempt sends.*/
fn refund(order: u64) -> io::Result<()> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(2)
        .base(__retry_rt::Duration::from_millis(500));
    let mut __retry = __retry_rt::Shape::<io::Result<()>>::new()
        .start(
            &__RETRY_POLICY,
            "refund",
            |__retry_error| __retry_rt::is_transient(__retry_error),
            __retry_rt::Unset,
        )
        .fallback_sync(|error, why| defer(order, error, why));
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry
            .key(&order)
            .attempt(|| {
                let _ = order;
                Ok(())
            });
        #[allow(unreachable_code)]
        {
            __retry = match __retry.next(__retry_outcome) {
                __retry_rt::ControlFlow::Break(__retry_result) => return __retry_result,
                __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
            };
            __retry.pause_blocking();
        }
    }
}
fn defer(order: u64, error: io::Error, why: GiveUp) -> io::Result<()> {
    let _ = (order, error, why);
    Ok(())
}
fn main() {}
