//! The test binary's resolver of named policies (`retry_runtime::named`): one table, to which
//! each test adds entries under names of its own.
//!
//! The resolver is the process's, and this binary's tests run on threads of one process: a test
//! that relies on what is installed holds the guard of [`installed`] for as long as it does, and
//! a test that installs a resolver of its own must take [`lock`] first.

use retry_runtime::named::{self, Named, Resolve};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Names and their entries, changed by the tests while calls run.
#[derive(Default)]
pub struct Table(Mutex<HashMap<&'static str, Arc<Named>>>);

impl Table {
    /// Puts `named` under its name, in place of what was there; the entry, as calls get it.
    pub fn set(&self, named: Named) -> Arc<Named> {
        let named = Arc::new(named);
        self.entries().insert(named.name(), named.clone());
        named
    }

    /// Removes the entry of `name`: the next call falls back to its written policy.
    pub fn remove(&self, name: &str) {
        self.entries().remove(name);
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<&'static str, Arc<Named>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Resolve for Table {
    fn resolve(&self, name: &str) -> Option<Arc<Named>> {
        self.entries().get(name).cloned()
    }
}

/// Serialises the tests that install a resolver or rely on the installed one.
pub fn lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    // A test that failed while holding it leaves nothing half-done: the next one installs anew.
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The table, installed as the process's resolver, and the guard that keeps it installed.
pub fn installed() -> (MutexGuard<'static, ()>, &'static Table) {
    static TABLE: OnceLock<Arc<Table>> = OnceLock::new();
    let guard = lock();
    let table = TABLE.get_or_init(Arc::default);
    named::install(table.clone());
    (guard, table)
}
