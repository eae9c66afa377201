//! Generates the messages, the client and the server of `proto/interop.proto` with tonic's code
//! generator, using the protoc binary that `protoc-bin-vendored` ships (no protoc on the machine
//! needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_with_config(config, &["proto/interop.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto/interop.proto");
    Ok(())
}
