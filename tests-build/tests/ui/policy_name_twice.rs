use retry_runtime::{retry, Policy};
use std::io;

const COVERAGE: Policy = Policy::new().max(3);

// One policy per function: a name, or an expression, once.
#[retry(policy = "contract-service", max = 2, policy = "billing")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

#[retry(policy = "contract-service", policy = COVERAGE)]
fn read_contracts() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}
