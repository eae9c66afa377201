use retry_runtime::retry;
fn read_tariffs(path: &std::path::Path) -> std::io::Result<String> {
    use ::retry_runtime::__private as __retry_rt;
    const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
        .max(2)
        .base(__retry_rt::Duration::from_millis(50));
    let mut __retry = __retry_rt::Shape::<std::io::Result<String>>::new()
        .start(
            &__RETRY_POLICY,
            "read_tariffs",
            |__retry_error| __retry_rt::is_transient(__retry_error),
            __retry_rt::Unset,
        );
    let __retry_faults = __retry.probe().maker();
    __retry = __retry.faults(__retry_faults);
    loop {
        let __retry_outcome = __retry.attempt(|| { std::fs::read_to_string(path) });
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
fn main() {}
