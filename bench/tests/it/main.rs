//! The bench's tests that can share a process: one test binary, one module per subject.
//!
//! The allocation tests stay binaries of their own: `no_allocation.rs` links
//! `allocation-counter`'s counting global allocator, and `no_allocation_metrics.rs` installs the
//! process's global metrics recorder.

mod brooker;
mod docs_csv;
mod future_size;
