use retry_runtime::retry;
use std::io;
struct Tariffs {
    reads: u32,
}
impl Tariffs {
    fn reload(&mut self) -> io::Result<u32> {
        use ::retry_runtime::__private as __retry_rt;
        const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
            .max(2)
            .base(__retry_rt::Duration::from_millis(100))
            .backoff(__retry_rt::Backoff::Linear)
            .jitter(__retry_rt::Jitter::None);
        let mut __retry = __retry_rt::Shape::<io::Result<u32>>::new()
            .start(
                &__RETRY_POLICY,
                "reload",
                |__retry_error| __retry_rt::is_transient(__retry_error),
                __retry_rt::Unset,
            );
        let __retry_faults = __retry.probe().maker();
        __retry = __retry.faults(__retry_faults);
        loop {
            let __retry_outcome = __retry
                .attempt(|| {
                    self.reads += 1;
                    Ok(self.reads)
                });
            #[allow(unreachable_code)]
            {
                __retry = match __retry.next(__retry_outcome) {
                    __retry_rt::ControlFlow::Break(__retry_result) => {
                        return __retry_result;
                    }
                    __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
                };
                __retry.pause_blocking();
            }
        }
    }
}
fn main() {}
