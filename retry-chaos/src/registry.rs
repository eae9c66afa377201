//! The installed sites, the global switch, and the injector the runtime asks.

use crate::site::{Installed, Kind, Site, SiteState};
use retry_runtime::faults::{self, Fault, Inject};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Once, PoisonError, RwLock};

/// The sites by name.
static SITES: RwLock<Option<HashMap<&'static str, Arc<SiteState>>>> = RwLock::new(None);

/// The runtime's injector, installed with the first site.
static INJECTOR: Once = Once::new();

/// The environment variable that turns every site off (`off`, `0`, `false`) or on (anything
/// else, or unset) while [`switch`] is [`Switch::FromEnv`]: read again before every attempt at
/// an installed site, so that it can be changed without a rebuild (or, in a process that sets it
/// itself, without a restart).
pub const ENV_SWITCH: &str = "RETRY_CHAOS";

/// The environment variable that gives a site installed without [`Site::seed`] its seed, to
/// replay a run whose seed was printed.
pub const ENV_SEED: &str = "RETRY_CHAOS_SEED";

/// The global switch: every site at once, as Polly's `EnabledGenerator`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    /// The environment decides ([`ENV_SWITCH`]); the default.
    FromEnv,
    /// Every site is on (each site's own switch still applies).
    On,
    /// Every site is off: no fault is injected anywhere.
    Off,
}

static SWITCH: AtomicU8 = AtomicU8::new(0);

/// Turns the global switch: the attempts that start from now on see it.
///
/// ```
/// use retry_chaos::Switch;
///
/// retry_chaos::switch(Switch::Off);
/// assert!(!retry_chaos::enabled());
/// retry_chaos::switch(Switch::FromEnv);
/// ```
pub fn switch(to: Switch) {
    let value = match to {
        Switch::FromEnv => 0,
        Switch::On => 1,
        Switch::Off => 2,
    };
    SWITCH.store(value, Ordering::Relaxed);
}

/// Whether the global switch is on now: [`switch`]'s, or the environment's.
pub fn enabled() -> bool {
    match SWITCH.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => match std::env::var(ENV_SWITCH) {
            Ok(value) => !matches!(
                value.trim().to_ascii_lowercase().as_str(),
                "off" | "0" | "false" | "no"
            ),
            Err(_) => true,
        },
    }
}

/// The seed of a site installed without one.
fn seed_of(site: &Site) -> u64 {
    if let Some(seed) = site.seed {
        return seed;
    }
    if let Some(seed) = std::env::var(ENV_SEED)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return seed;
    }
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write(site.name.as_bytes());
    hasher.finish()
}

pub(crate) fn install(site: Site) -> Installed {
    let seed = seed_of(&site);
    let name = site.name;
    let state = Arc::new(SiteState::new(site, seed));
    SITES
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(name, Arc::clone(&state));
    INJECTOR.call_once(|| faults::install(Arc::new(Registry)));
    // The seed, so that a run can be replayed: on stderr, where a test's or a staging job's
    // output keeps it, and as an event.
    eprintln!(
        "retry-chaos: site `{name}` installed with seed {seed} ({ENV_SEED}={seed} replays it)"
    );
    #[cfg(feature = "tracing")]
    tracing::info!(site = name, seed, "retry-chaos: fault injection installed");
    Installed { state }
}

pub(crate) fn remove(state: &Arc<SiteState>) {
    let mut sites = SITES.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(sites) = sites.as_mut() {
        // Only this installation: a site installed again under the same name stays.
        if sites
            .get(state.name)
            .is_some_and(|installed| Arc::ptr_eq(installed, state))
        {
            sites.remove(state.name);
        }
    }
}

fn lookup(name: &str) -> Option<Arc<SiteState>> {
    SITES
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()?
        .get(name)
        .cloned()
}

/// The runtime's injector: the site of the attempt's name, its first rule that fires among the
/// loop's kinds.
struct Registry;

impl Inject for Registry {
    fn before(&self, site: &'static str, attempt: u32) -> Option<Fault> {
        let state = lookup(site)?;
        match state.decide(attempt, true)?.kind {
            Kind::Error => Some(Fault::Error),
            Kind::Latency(latency) => Some(Fault::Latency(latency)),
            Kind::Status { .. } | Kind::Grpc { .. } => None,
        }
    }
}
