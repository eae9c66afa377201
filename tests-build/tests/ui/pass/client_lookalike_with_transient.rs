// A type of the user's whose path looks like a client's (`sqlx::Error`) and implements
// `Transient` compiles with the runtime's `sqlx` feature off: the attribute recognises the path
// only to choose the message, never to refuse a type that can be classified.
use retry_runtime::{retry, Transient};

mod sqlx {
    #[derive(Debug)]
    pub struct Error;

    impl retry_runtime::Transient for Error {
        fn is_transient(&self) -> bool {
            true
        }
    }
}

#[retry(max = 3, base = "1ms")]
fn balance() -> Result<i64, sqlx::Error> {
    Ok(0)
}

fn main() {
    assert!(sqlx::Error.is_transient());
    assert_eq!(balance().ok(), Some(0));
}
