//! The payment service of `cargo run --example payments`, as a process of its own: what the
//! fault tests start, kill with SIGKILL at a chosen step, and start again.
//!
//! ```text
//! cargo run -p retry-examples --bin payments-service -- --database-url sqlite:/tmp/payments.db
//! ```
//!
//! `--help` lists the options; [`retry_examples::payments::service`] is the service.

use retry_examples::payments::service::{self, Config, USAGE};
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_args(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match service::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("payments-service: {e}");
            ExitCode::FAILURE
        }
    }
}
