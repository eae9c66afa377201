use retry_runtime::{retry, CircuitBreaker, Rejected, Transient};

static INVENTORY_BREAKER: CircuitBreaker = CircuitBreaker::new();

#[derive(Debug)]
enum StockError {
    Overloaded,
    Shed(Rejected),
}

impl From<Rejected> for StockError {
    fn from(rejected: Rejected) -> Self {
        StockError::Shed(rejected)
    }
}

impl Transient for StockError {
    fn is_transient(&self) -> bool {
        matches!(self, StockError::Overloaded)
    }
}

#[retry(max = 3, gate = INVENTORY_BREAKER)]
fn reserve() -> Result<(), StockError> {
    Err(StockError::Overloaded)
}

fn main() {}
