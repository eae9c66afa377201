use retry_runtime::retry;
use std::io;

struct Tariffs {
    reads: u32,
}

impl Tariffs {
    #[retry(attempts = 3, base = "100ms", backoff = linear, jitter = none)]
    fn reload(&mut self) -> io::Result<u32> {
        self.reads += 1;
        Ok(self.reads)
    }
}

fn main() {}
