//! Keeps `tracing`'s callsites open for the thread-local captures of a test binary.
//!
//! `tracing` caches each callsite's interest once per process, asked of the first thread that
//! reaches it while a single dispatcher is registered. A sibling test thread that has no
//! subscriber then caches "never", and a capture installed with `with_default` on another
//! thread misses the event. That race made `nested.rs` lose its `INFO` lines about once in a
//! few dozen full runs. A second dispatcher that always answers "sometimes" stays registered
//! for the binary's life, so no callsite is cached as "never", and each event asks the
//! subscriber of the thread it happens on.

use std::sync::OnceLock;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Metadata, Subscriber};

/// Registers the anchor once per test binary and recomputes what was cached before it.
pub fn keep_open() {
    static ANCHOR: OnceLock<Dispatch> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        let anchor = Dispatch::new(Anchor);
        tracing::callsite::rebuild_interest_cache();
        anchor
    });
}

/// Interested in every callsite "sometimes", enabled for nothing: it never records an event.
struct Anchor;

impl Subscriber for Anchor {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
