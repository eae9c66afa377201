//! The portal's retry policies, read from a TOML file once at start-up: `examples/portal.toml`,
//! shipped with the example and compiled in ([`SHIPPED`]), or the file given with
//! `--config FILE`. The file's `[retry.contract-service]` table (its timings, budget and
//! breaker) is what [`check_coverage`](super::coverage::check_coverage) runs, through a
//! [`Registry`] installed as the process's resolver; where the name is not configured, the
//! function runs the timings, budget and breaker written beside the name in its attribute.

use super::coverage::CONTRACT_BREAKER;
use retry_config::{Config, Registry};
use retry_runtime::CircuitBreaker;
use retry_runtime::named::Named;
use std::error::Error;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// The policies shipped with the portal, `examples/portal.toml`: what it reads without
/// `--config`.
pub const SHIPPED: &str = include_str!("../../portal.toml");

/// The policies of the portal's rehearsal, `examples/rehearsal.toml`: what `--rehearse` reads
/// without `--config` (the shipped ones with short pauses and no jitter, so that the same seed
/// tells the same story).
pub const REHEARSAL: &str = include_str!("../../rehearsal.toml");

/// The name of the coverage check's policy: `#[retry(policy = "contract-service", ...)]`.
pub const CONTRACT_SERVICE: &str = "contract-service";

/// The policies the process runs, installed once ([`install`]).
static INSTALLED: OnceLock<Policies> = OnceLock::new();

/// The policies read at start-up and installed for the process: the registry, and the entry of
/// [`CONTRACT_SERVICE`] as every coverage check of this process gets it (the portal never
/// reloads, so each lookup finds this one).
#[derive(Debug)]
pub struct Policies {
    registry: Arc<Registry>,
    contract: Option<Arc<Named>>,
    source: String,
}

impl Policies {
    /// Reads the `[retry]` tables of `text`, a TOML file read from `source` (a path, or
    /// "examples/portal.toml (built in)"), without installing them.
    pub fn read(text: &str, source: &str) -> Result<Self, Box<dyn Error>> {
        let config = Config::from_toml(text)
            .map_err(|e| format!("the retry policies in {source} are not valid: {e}"))?;
        let registry = Arc::new(Registry::new(config).name("portal"));
        let contract = registry.get(CONTRACT_SERVICE);
        Ok(Policies {
            registry,
            contract,
            source: source.to_owned(),
        })
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The coverage check's entry, if the file has one.
    pub fn contract(&self) -> Option<&Named> {
        self.contract.as_deref()
    }

    /// The one line the portal prints at start: where the policies came from and their names,
    /// and what the coverage check runs if the file does not name it.
    pub fn summary(&self) -> String {
        let config = self.registry.config();
        let names: Vec<&str> = config.names().collect();
        let mut line = format!(
            "Retry policies from {}: {}",
            self.source,
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
        if self.contract.is_none() {
            line.push_str(&format!(
                " (no `{CONTRACT_SERVICE}`: the coverage check runs the policy written in its attribute)"
            ));
        }
        line
    }
}

/// Reads the policies from `path`, or the shipped ones without a path, and installs them as
/// the process's resolver, once: a second call is an error.
pub fn install(path: Option<&Path>) -> Result<&'static Policies, Box<dyn Error>> {
    install_or(path, SHIPPED, "examples/portal.toml (built in)")
}

/// [`install`], with `text` (read from `source`) as the policies without a path: the
/// rehearsal's [`REHEARSAL`].
pub fn install_or(
    path: Option<&Path>,
    text: &str,
    source: &str,
) -> Result<&'static Policies, Box<dyn Error>> {
    let policies = match path {
        None => Policies::read(text, source)?,
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "cannot read the retry policies from {}: {e}",
                    path.display()
                )
            })?;
            Policies::read(&text, &path.display().to_string())?
        }
    };
    INSTALLED
        .set(policies)
        .map_err(|_| "the portal's retry policies are installed once per process")?;
    let installed = INSTALLED
        .get()
        .ok_or("the portal's retry policies were not kept")?;
    installed.registry.install();
    Ok(installed)
}

/// The contract service's breaker as the coverage checks of this process ask it: the
/// configured one when the installed policies give [`CONTRACT_SERVICE`] a breaker, otherwise
/// the one written in the attribute, [`CONTRACT_BREAKER`]. The worker that drains the queue
/// asks the same one, so that it claims nothing while the customers' checks are refused.
pub fn contract_breaker() -> &'static CircuitBreaker {
    INSTALLED
        .get()
        .and_then(|policies| policies.contract())
        .and_then(Named::get_breaker)
        .unwrap_or(&CONTRACT_BREAKER)
}
