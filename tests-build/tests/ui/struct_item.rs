use retry_runtime::retry;

#[retry(max = 2)]
struct ContractClient {
    url: String,
}

fn main() {}
