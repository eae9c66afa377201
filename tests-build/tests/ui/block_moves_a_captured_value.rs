use retry_runtime::retry_block;
use std::io;

struct Request {
    body: String,
}

async fn send(request: Request) -> io::Result<usize> {
    Ok(request.body.len())
}

// `send` takes the request by value: the first attempt would move it, and the next one would
// have none to send. Each attempt sends a clone: `send(request.clone())`.
async fn submit(request: Request) -> io::Result<usize> {
    retry_block!(max = 3 => async move { send(request).await }).await
}

fn main() {}
