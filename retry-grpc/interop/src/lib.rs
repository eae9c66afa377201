//! placeholder
pub mod proto {
    tonic::include_proto!("retry.interop");
}
