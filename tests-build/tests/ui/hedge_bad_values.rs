use retry_runtime::retry;
use std::io;

#[retry(hedge = "p100")]
async fn percentile_out_of_range() -> io::Result<()> {
    Ok(())
}

#[retry(hedge = "0ms")]
async fn zero_delay() -> io::Result<()> {
    Ok(())
}

#[retry(max_hedges = 2)]
async fn max_hedges_alone() -> io::Result<()> {
    Ok(())
}

#[retry(hedge = "50ms", max_hedges = 0)]
async fn no_hedges() -> io::Result<()> {
    Ok(())
}

fn main() {}
