use retry_runtime::retry;
fn read_tariffs(path: &std::path::Path) -> std::io::Result<String> {
    const __RETRY_POLICY: ::retry_runtime::__private::Policy = ::retry_runtime::__private::Policy::new()
        .max(2)
        .base(::retry_runtime::__private::Duration::from_millis(50));
    let mut __retry = ::retry_runtime::__private::Retry::<
        std::io::Result<String>,
    >::start(
        &__RETRY_POLICY,
        "read_tariffs",
        |__retry_error| ::retry_runtime::__private::is_transient(__retry_error),
    );
    loop {
        let __retry_outcome = __retry.attempt(|| { std::fs::read_to_string(path) });
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
fn main() {}
