use retry_runtime::{retry, AdaptiveThrottling, AdmissionGate, Transient};

static INVENTORY_GATE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());

#[derive(Debug)]
enum StockError {
    Overloaded,
}

impl Transient for StockError {
    fn is_transient(&self) -> bool {
        matches!(self, StockError::Overloaded)
    }
}

#[retry(max = 3, gate = INVENTORY_GATE)]
async fn reserve() -> Result<(), StockError> {
    Err(StockError::Overloaded)
}

fn main() {}
