//! Durable companions of [`#[retry]`](retry_runtime::retry): what outlives a process.
//!
//! A retry loop waits seconds; a long outage calls for something that waits hours and survives
//! a restart. This crate holds that part of the library, so that the attribute's runtime
//! (`retry-runtime`) stays small and free of database drivers:
//!
//! - [`store`]: the receiving side of the `Idempotency-Key` header: an
//!   [`IdempotencyStore`](store::IdempotencyStore) that executes a request once per key and
//!   answers a repeat with the stored response, in memory ([`MemoryStore`](store::MemoryStore)),
//!   in a SQLite file (`SqliteStore`, feature `sqlite`) or in PostgreSQL (`PostgresStore`,
//!   feature `postgres`), where the handler's own writes and the key's completion commit in one
//!   transaction;
//! - [`queue`]: a durable job queue in one table on SQLite or PostgreSQL, where work that cannot
//!   be done now (a coverage check while the contract service is down) waits for a
//!   [`Worker`](queue::Worker), with leases, fencing tokens, backoff stored as `run_at`, and a
//!   dead state. A queue runs on the stores' typed pool, so that a job commits in the same
//!   transaction as a store's claim and the handler's rows: both or neither.
//!
//! Start with the guides: [`guide::stores`] and [`guide::queue`].
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `sqlite` | on | `store::SqliteStore` and queues in a SQLite file (sqlx's bundled SQLite): no server |
//! | `postgres` | on | `store::PostgresStore` and queues in a PostgreSQL database shared by every replica |
//! | `conformance` | off | `store::conformance`: the store contract as a test suite, for a store of your own |
//! | `metrics` | off | the stores' begins and errors, the queue's depth, oldest due age, attempts and dead letters through the `metrics` facade ([`guide::metrics`]) |
//!
//! The crate needs Rust 1.94 (sqlx 0.9); `retry-runtime` needs 1.85.

#![warn(missing_docs)]

pub mod queue;
mod sql;
pub mod store;

/// The guides: the stores, the queue and their metrics as a user meets them, with their examples.
pub mod guide {
    #[doc = include_str!("../docs/stores.md")]
    pub mod stores {}

    #[doc = include_str!("../docs/metrics.md")]
    pub mod metrics {}

    // The guide's code block is the portal example's: its doctest runs in the examples package
    // (`retry_examples::guide::queue`), which has the portal, so it is left out of this crate's.
    #[cfg_attr(not(doctest), doc = include_str!("../docs/queue.md"))]
    #[cfg_attr(doctest, doc = "The queue's guide.")]
    pub mod queue {}
}
