use retry_runtime::retry;
use std::io;
struct Tariffs {
    reads: u32,
}
impl Tariffs {
    fn reload(&mut self) -> io::Result<u32> {
        const __RETRY_POLICY: ::retry_runtime::__private::Policy = ::retry_runtime::__private::Policy::new()
            .max(2)
            .base(::retry_runtime::__private::Duration::from_millis(100))
            .backoff(::retry_runtime::__private::Backoff::Linear)
            .jitter(::retry_runtime::__private::Jitter::None);
        let mut __retry = ::retry_runtime::__private::Retry::<
            io::Result<u32>,
        >::start(
            &__RETRY_POLICY,
            "reload",
            |__retry_error| ::retry_runtime::__private::is_transient(__retry_error),
        );
        loop {
            let __retry_outcome = __retry
                .attempt(|| {
                    self.reads += 1;
                    Ok(self.reads)
                });
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
                __retry.pause_blocking();
            }
        }
    }
}
fn main() {}
