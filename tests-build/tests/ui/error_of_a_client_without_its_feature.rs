use retry_runtime::retry;

// The error types of the clients that retry-runtime classifies behind a feature, with the
// feature off: the message names the feature and the line of Cargo.toml that turns it on.
//
// These modules stand in for the crates: tests-build builds the runtime as a user gets it, with
// none of the integration features and none of the clients. The attribute recognises the path
// as written (`sqlx::Error`, `sqlx::Result<T>`, `tokio_postgres::Error`, `reqwest::Error`,
// `tonic::Status`), so a user of the real crate sees these messages; that the real types compile
// with the features on is checked by tests/it (database_errors.rs, integrations.rs).
mod sqlx {
    #[derive(Debug)]
    pub struct Error;
    pub type Result<T> = std::result::Result<T, Error>;
}
mod tokio_postgres {
    #[derive(Debug)]
    pub struct Error;
}
mod reqwest {
    #[derive(Debug)]
    pub struct Error;
}
mod tonic {
    #[derive(Debug)]
    pub struct Status;
}

#[retry(max = 3)]
async fn balance() -> Result<i64, sqlx::Error> {
    Ok(0)
}

#[retry(max = 3)]
async fn count() -> sqlx::Result<i64> {
    Ok(0)
}

#[retry(max = 3)]
async fn transfer() -> Result<u64, tokio_postgres::Error> {
    Ok(0)
}

#[retry(max = 3)]
async fn fetch() -> Result<String, reqwest::Error> {
    Ok(String::new())
}

#[retry(max = 3)]
async fn coverage() -> Result<u32, tonic::Status> {
    Ok(0)
}

fn main() {}
