use retry_runtime::retry;

trait ContractService {
    #[retry(max = 2)]
    fn coverage(&self, claim: u32) -> std::io::Result<bool>;
}

fn main() {}
