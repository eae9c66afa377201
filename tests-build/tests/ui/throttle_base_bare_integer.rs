use retry_runtime::{retry, Verdict};

#[derive(Debug)]
enum QuoteError {
    TooManyRequests,
}

fn classify(_: &QuoteError) -> Verdict {
    Verdict::Throttled
}

// The throttling base in milliseconds, as a number: durations are strings with a unit.
#[retry(max = 3, base = "50ms", throttle_base = 1000, on = classify)]
fn fetch_quote() -> Result<u32, QuoteError> {
    Err(QuoteError::TooManyRequests)
}

fn main() {}
