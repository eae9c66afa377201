//! The scripted tonic server as a process: binds a free loopback port, prints
//! `{"listening": "127.0.0.1:PORT"}` on its first line, then one JSON line per attempt it sees
//! (`retry_grpc_interop::server::AttemptRecord`), until it is killed.
//!
//! `--max-connection-age-ms N`: each connection is closed gracefully (a `GOAWAY`) at N ms old
//! (`server::serve_aging`).

use retry_grpc_interop::server::{ScriptedService, bind, serve, serve_aging};
use std::io::Write;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut max_connection_age = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().map(|n| n.parse::<u64>())) {
            ("--max-connection-age-ms", Some(Ok(ms))) => {
                max_connection_age = Some(Duration::from_millis(ms));
            }
            _ => {
                return Err(format!(
                    "usage: scripted-server [--max-connection-age-ms N], not {arg:?}"
                )
                .into());
            }
        }
    }
    let (listener, addr) = bind().await?;
    let print = |line: String| {
        let mut stdout = std::io::stdout().lock();
        // The reader is the test; if it went away there is nobody to tell.
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    };
    print(serde_json::json!({"listening": addr.to_string()}).to_string());
    let service = ScriptedService::new(move |record| {
        if let Ok(line) = serde_json::to_string(record) {
            print(line);
        }
    });
    match max_connection_age {
        Some(age) => serve_aging(service, listener, age).await?,
        None => serve(service, listener).await?,
    }
    Ok(())
}
