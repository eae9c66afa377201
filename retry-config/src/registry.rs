//! The registry: one `Arc<Named>` per name, replaced whole by a reload, looked up per call.

use crate::ConfigError;
use crate::config::{Config, Entry, same_settings};
use retry_runtime::Hedge;
use retry_runtime::engine::{self, Counters, Event};
use retry_runtime::named::{self, Named, Resolve};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

/// Named policies built from configuration, looked up by name by every door, and replaced while
/// calls run ([`reload`](Registry::reload)).
///
/// Each name is one [`Arc<Named>`](Named): its policy, and the budget and the breaker that every
/// door using the name shares (one object each, not a copy per door). A door asks the registry
/// once per call ([`get`](Registry::get), or [`named::resolve`] once the registry is
/// [`install`](Registry::install)ed) and holds what it got for all the call's attempts: a reload
/// never mixes old and new within one call, and every call that asks after it sees the new one.
///
/// ```
/// use retry_config::{Config, Registry};
///
/// let registry = Registry::new(Config::from_toml(r#"
/// [retry.contract-service]
/// max = 3
/// base = "1s"
/// "#)?);
/// let held = registry.get("contract-service").expect("configured");
/// assert_eq!(held.policy().get_max(), 3);
///
/// // An operator raises `max` during an incident: calls from now on see 5; `held` keeps 3.
/// let reloaded = registry.reload_toml("[retry.contract-service]\nmax = 5\nbase = \"1s\"")?;
/// assert_eq!(reloaded.changed(), ["contract-service"]);
/// assert_eq!(registry.get("contract-service").unwrap().policy().get_max(), 5);
/// assert_eq!(held.policy().get_max(), 3);
///
/// // A file that breaks a rule changes nothing, and says where and why.
/// let refused = registry.reload_toml("[retry.contract-service]\nmax = 3\nattempts = 4").unwrap_err();
/// assert_eq!(refused.key(), Some("retry.contract-service"));
/// assert_eq!(registry.get("contract-service").unwrap().policy().get_max(), 5);
/// assert_eq!(registry.counters().reloads_rejected(), 1);
/// # Ok::<(), retry_config::ConfigError>(())
/// ```
///
/// # Reloads and state
///
/// A reload compares each name with what runs:
///
/// - **Unchanged** (the same policy, timeout, hedge, and the same budget and breaker settings):
///   the same `Arc<Named>` runs on; nothing is reported.
/// - **Changed**: a new `Named` replaces it ([`Event::PolicyChanged`]). Its budget and its
///   breaker are **kept, state and all, when their settings did not change**: an open breaker
///   stays open, a budget keeps its tokens, so that a reload of the timings during an incident
///   does not undo the protection that the incident built up. A budget or a breaker **whose
///   settings changed is replaced by a fresh one** with the new settings (a breaker closed and
///   without history, a budget full): its old counts were judged by thresholds that no longer
///   hold. Calls under way keep reporting to the objects they started with, which no new call
///   sees.
/// - **Added** ([`Event::PolicyAdded`]) and **removed** ([`Event::PolicyRemoved`]): a lookup of a
///   removed name finds nothing from then on (the attribute then runs the policy written in
///   code).
///
/// A configuration that fails validation is refused whole ([`Event::ReloadRejected`]): the
/// running policies are kept, all of them.
///
/// Every event goes to the logs and the metrics (`retry_door_events_total{event}`, the runtime's
/// guide lists them) and to the registry's [`Counters`].
pub struct Registry {
    name: &'static str,
    table: RwLock<Arc<Table>>,
    counters: Arc<Counters>,
}

/// The names that run, as one reload made them.
#[derive(Default)]
struct Table {
    generation: u64,
    entries: BTreeMap<&'static str, Running>,
}

/// A name that runs: the `Named` the doors get, and the settings it was made from.
struct Running {
    named: Arc<Named>,
    entry: Entry,
}

impl Running {
    fn new(name: &'static str, entry: Entry) -> Self {
        let mut named = Named::new(name, entry.policy);
        if let Some(budget) = &entry.budget {
            named = named.budget(Arc::clone(budget));
        }
        if let Some(breaker) = &entry.breaker {
            named = named.breaker(Arc::clone(breaker));
        }
        if let Some(timeout) = entry.timeout {
            named = named.timeout(timeout);
        }
        Running {
            named: Arc::new(named),
            entry,
        }
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.current();
        f.debug_struct("Registry")
            .field("name", &self.name)
            .field("generation", &table.generation)
            .field("names", &table.entries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What a reload changed: the names added, changed and removed, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    added: Vec<&'static str>,
    changed: Vec<&'static str>,
    removed: Vec<&'static str>,
    generation: u64,
}

impl Reloaded {
    /// The names that were not there before.
    pub fn added(&self) -> &[&'static str] {
        &self.added
    }

    /// The names whose settings changed.
    pub fn changed(&self) -> &[&'static str] {
        &self.changed
    }

    /// The names that are gone.
    pub fn removed(&self) -> &[&'static str] {
        &self.removed
    }

    /// The registry's generation after the reload ([`Registry::generation`]).
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl Registry {
    /// A registry with `config`'s names (generation 1; each name reported as added), under the
    /// name `"registry"` in events.
    pub fn new(config: Config) -> Self {
        let registry = Registry {
            name: "registry",
            table: RwLock::new(Arc::default()),
            counters: Arc::default(),
        };
        registry.reload(config);
        registry
    }

    /// The name the registry's own events carry (a refused reload): `"registry"` unless given.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Makes this registry the process's resolver ([`named::install`]): `#[retry(policy =
    /// "contract-service")]`, `retry_block!(policy = "...")` and every door that resolves
    /// names without a registry of its own look names up here, per call. A reload needs no
    /// second install.
    pub fn install(self: &Arc<Self>) {
        named::install(Arc::clone(self) as Arc<dyn Resolve>);
    }

    /// The policy named `name`, as calls that start now get it.
    pub fn get(&self, name: &str) -> Option<Arc<Named>> {
        let table = self.current();
        table
            .entries
            .get(name)
            .map(|running| Arc::clone(&running.named))
    }

    /// The hedge of `name`, if it has one: for a door that hedges on the engine
    /// (`engine::Settings::hedge`); `Named` carries the policy, budget, breaker and timeout.
    pub fn hedge(&self, name: &str) -> Option<Arc<Hedge>> {
        let table = self.current();
        table
            .entries
            .get(name)
            .and_then(|running| running.entry.hedge.clone())
    }

    /// How many reloads were accepted (the first configuration is generation 1): each accepted
    /// reload adds one, whether or not it changed a name; a refused one adds nothing.
    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    /// What each name runs with now, in the keys it is read from (serialize it to show it).
    pub fn config(&self) -> Config {
        let table = self.current();
        Config {
            entries: table
                .entries
                .iter()
                .map(|(name, running)| (*name, running.entry.clone()))
                .collect(),
        }
    }

    /// The counts of the registry's events: names added, changed and removed, reloads refused.
    pub fn counters(&self) -> Arc<Counters> {
        Arc::clone(&self.counters)
    }

    /// Replaces the policies with `config`'s while calls run, and reports each change (see
    /// [Reloads and state](Registry#reloads-and-state)). A call under way keeps the `Named`
    /// it started with; every lookup after this returns the new one.
    pub fn reload(&self, config: Config) -> Reloaded {
        let mut slot = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let old = Arc::clone(&slot);
        let mut reloaded = Reloaded {
            generation: old.generation + 1,
            ..Reloaded::default()
        };
        let mut entries = BTreeMap::new();
        for (name, mut entry) in config.entries {
            let running = match old.entries.get(name) {
                Some(running) if running.entry.same_as(&entry) => Running {
                    named: Arc::clone(&running.named),
                    entry: running.entry.clone(),
                },
                Some(running) => {
                    // The budget and the breaker keep their state unless their settings changed.
                    if same_settings(running.entry.budget.as_deref(), entry.budget.as_deref()) {
                        entry.budget.clone_from(&running.entry.budget);
                    }
                    if same_settings(running.entry.breaker.as_deref(), entry.breaker.as_deref()) {
                        entry.breaker.clone_from(&running.entry.breaker);
                    }
                    reloaded.changed.push(name);
                    Running::new(name, entry)
                }
                None => {
                    reloaded.added.push(name);
                    Running::new(name, entry)
                }
            };
            entries.insert(name, running);
        }
        reloaded.removed = old
            .entries
            .keys()
            .filter(|name| !entries.contains_key(*name))
            .copied()
            .collect();
        *slot = Arc::new(Table {
            generation: reloaded.generation,
            entries,
        });
        drop(slot);
        let counters = &*self.counters;
        for name in &reloaded.added {
            engine::report(name, Event::PolicyAdded, counters);
        }
        for name in &reloaded.changed {
            engine::report(name, Event::PolicyChanged, counters);
        }
        for name in &reloaded.removed {
            engine::report(name, Event::PolicyRemoved, counters);
        }
        reloaded
    }

    /// Reloads from a configuration as read: `Ok` is [`reload`](Registry::reload)ed; `Err`
    /// (a file that failed validation, in any format) is refused, reported
    /// ([`Event::ReloadRejected`], a `WARN` with the error) and returned, and the running
    /// policies are kept.
    ///
    /// A format of your own (YAML, the environment) reads a [`Config`] through serde; make its
    /// error a [`ConfigError`] with [`ConfigError::new`].
    pub fn reload_with(
        &self,
        config: Result<Config, ConfigError>,
    ) -> Result<Reloaded, ConfigError> {
        match config {
            Ok(config) => Ok(self.reload(config)),
            Err(error) => {
                engine::report(
                    self.name,
                    Event::ReloadRejected { error: &error },
                    &*self.counters,
                );
                Err(error)
            }
        }
    }

    /// [`reload_with`](Registry::reload_with) the `[retry]` table of a TOML file.
    #[cfg(feature = "toml")]
    pub fn reload_toml(&self, text: &str) -> Result<Reloaded, ConfigError> {
        self.reload_with(Config::from_toml(text))
    }

    /// [`reload_with`](Registry::reload_with) the `"retry"` object of a JSON document.
    pub fn reload_json(&self, text: &str) -> Result<Reloaded, ConfigError> {
        self.reload_with(Config::from_json(text))
    }

    fn current(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The registry as the process's resolver ([`install`](Registry::install)): a lookup is a read
/// lock, a map search and an `Arc` clone.
impl Resolve for Registry {
    fn resolve(&self, name: &str) -> Option<Arc<Named>> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table
            .entries
            .get(name)
            .map(|running| Arc::clone(&running.named))
    }
}
