//! The scripted tonic server as a process: binds a free loopback port, prints
//! `{"listening": "127.0.0.1:PORT"}` on its first line, then one JSON line per attempt it sees
//! (`retry_grpc_interop::server::AttemptRecord`), until it is killed.

use retry_grpc_interop::server::{ScriptedService, bind, serve};
use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
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
    serve(service, listener).await?;
    Ok(())
}
