//! [`StoreOptions`]: the settings every store shares, and [`Mode`], the two ways to commit.

use super::{DEFAULT_LEASE, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TTL};
use std::time::Duration;

/// The settings of a store, the same for [`MemoryStore`](super::MemoryStore) and the SQL stores
/// (`SqliteStore`, `PostgresStore`): set them with the store's `with_options`, read them with
/// its `options`.
///
/// A `const` value, so that a service can keep its settings next to its other constants:
///
/// ```
/// use retry_durable::store::{MemoryStore, StoreOptions};
/// use std::time::Duration;
///
/// const PAYOUTS: StoreOptions = StoreOptions::new()
///     .ttl(Duration::from_secs(7 * 24 * 60 * 60)) // a week, for slow clients
///     .lease(Duration::from_secs(10)); // the handler's bank call times out after 5 s
///
/// let store = MemoryStore::<String>::new().with_options(PAYOUTS);
/// assert_eq!(store.options().lease, Duration::from_secs(10));
/// assert_eq!(store.options().max_response_bytes, 64 * 1024); // the default
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct StoreOptions {
    /// Completed responses are replayed for this long after completion
    /// ([`DEFAULT_TTL`] unless set); `Duration::MAX` keeps them until they are deleted by hand
    /// (the SQL stores) or for the life of the process (`MemoryStore`).
    pub ttl: Duration,
    /// A running key of the lease mode ([`Mode::Lease`]) is held this long after its claim or
    /// last renewal ([`DEFAULT_LEASE`] unless set); after that the same request may take it
    /// over. The one-commit mode has no lease.
    pub lease: Duration,
    /// The longest serialized response the SQL stores keep, in bytes
    /// ([`DEFAULT_MAX_RESPONSE_BYTES`] unless set); a longer one is refused with
    /// [`StoreError::TooLarge`](super::StoreError::TooLarge). `MemoryStore` keeps `R` as it is,
    /// without serializing it, and has no limit.
    pub max_response_bytes: usize,
}

impl StoreOptions {
    /// The defaults: a TTL of [`DEFAULT_TTL`], a lease of [`DEFAULT_LEASE`], responses of at most
    /// [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub const fn new() -> Self {
        StoreOptions {
            ttl: DEFAULT_TTL,
            lease: DEFAULT_LEASE,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Completed responses are replayed for `ttl` after completion.
    #[must_use]
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// A running key of the lease mode is held for `lease` after its claim or last renewal.
    #[must_use]
    pub const fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The longest serialized response the SQL stores keep, in bytes.
    #[must_use]
    pub const fn max_response_bytes(mut self, limit: usize) -> Self {
        self.max_response_bytes = limit;
        self
    }
}

impl Default for StoreOptions {
    /// Same as [`StoreOptions::new`].
    fn default() -> Self {
        Self::new()
    }
}

/// How a claim commits: the two modes of [`IdempotencyStore::begin_with`](super::IdempotencyStore::begin_with),
/// which differ in the [`Guard`](super::Guard) they hand out, not in its type.
///
/// | the handler's side effects | mode | a new key costs | a crash mid-handler |
/// |---|---|---|---|
/// | also in another system (a bank, an e-mail server) | [`Lease`](Mode::Lease) ([`begin`](super::IdempotencyStore::begin)) | two durable commits: the claim, then the handler's rows with the completion | the key stays claimed until its lease ends; the fencing token refuses the dead holder |
/// | all in the store's database (a ledger row, a job in the [queue](crate::queue)) | [`OneCommit`](Mode::OneCommit) ([`begin_with(Mode::OneCommit, ..)`](super::IdempotencyStore::begin_with)) | one: the claim, the rows and the completion commit together | the claim rolls back with the rows: the retry executes at once |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The claim commits on its own, under a lease, before the handler runs; the handler may
    /// call other systems before it opens its [transaction](super::Guard::transaction), and
    /// the completion commits with the handler's rows. A repeat while it runs is
    /// [`InProgress`](super::Begin::InProgress) (409).
    #[default]
    Lease,
    /// The claim is the first statement of the handler's own transaction, which is open when
    /// the guard is handed out: the claim, the handler's rows and the completion commit at once,
    /// and a rollback, a dropped guard or a killed process takes the claim with them. No lease:
    /// nobody else sees the claim before it commits. A concurrent duplicate waits for the
    /// transaction on the SQL stores and replays what it committed. Never call another system
    /// inside the transaction: every duplicate of the key waits for it.
    OneCommit,
}
