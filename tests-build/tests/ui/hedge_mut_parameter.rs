use retry_runtime::retry;
use std::io;

struct Client;

impl Client {
    // Two copies of the body at once cannot both hold `&mut self` or `&mut Vec<u8>`.
    #[retry(hedge = "50ms", max_hedges = 2)]
    async fn fetch(&mut self, into: &mut Vec<u8>, tag: Option<&'static mut str>) -> io::Result<usize> {
        let _ = (&self, &into, &tag);
        Ok(0)
    }
}

fn main() {}
