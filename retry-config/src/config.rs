//! What a configuration file says: named entries, each a policy with its optional budget,
//! breaker, per-attempt timeout and hedge, read through the runtime's own `Deserialize` impls
//! (feature `serde` of retry-runtime: the grammar of the attribute, not a second parser).

use crate::ConfigError;
use retry_runtime::config::Timeout;
use retry_runtime::{CircuitBreaker, Hedge, Policy, RetryBudget};
use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The table under which a file keeps its named policies: `[retry.<name>]`.
pub const TABLE: &str = "retry";

/// The named policies of a configuration, read and validated, not yet running: give them to
/// [`Registry::new`](crate::Registry::new) or [`Registry::reload`](crate::Registry::reload).
///
/// Each name's table holds the attribute's timing keys (`max`, `attempts`, `base`, `factor`,
/// `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`), and optionally `timeout`
/// (a duration: each attempt's limit) and the sub-tables `budget` (`ratio`, `min_per_second`,
/// `max_tokens`), `breaker` (`consecutive_failures`, `failure_rate`, `window`, `min_calls`,
/// `open_for`, `name`) and `hedge` (the runtime's `Hedge` keys). Values are read by the runtime's
/// `Deserialize` impls, with the attribute's units and rules; an error names the key
/// (`retry.contract-service.breaker`), the rule and the value.
///
/// ```
/// use retry_config::Config;
/// use std::time::Duration;
///
/// let config = Config::from_toml(r#"
/// [retry.contract-service]
/// max = 3
/// base = "1s"
/// jitter = "none"
/// timeout = "2s"
/// breaker = { consecutive_failures = 5, open_for = "30s" }
/// "#)?;
/// let entry = config.get("contract-service").expect("read");
/// assert_eq!(entry.policy().get_max(), 3);
/// assert_eq!(entry.timeout(), Some(Duration::from_secs(2)));
/// assert!(entry.breaker().is_some() && entry.budget().is_none());
/// # Ok::<(), retry_config::ConfigError>(())
/// ```
///
/// Any serde format reads it (`Config: Deserialize`, from the table that holds the names: YAML,
/// environment variables through a deserializer of them, a `[retry]` field of your own
/// configuration struct); [`from_toml`](Config::from_toml) and [`from_json`](Config::from_json)
/// read a whole file and take its `retry` table.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub(crate) entries: BTreeMap<&'static str, Entry>,
}

/// One name's settings as read: its policy, and its budget, breaker, timeout and hedge if it
/// has them. The budget and the breaker are fresh objects with the settings read; a registry
/// keeps the running ones when their settings did not change (see
/// [`Registry::reload`](crate::Registry::reload)).
#[derive(Clone, Debug)]
pub struct Entry {
    pub(crate) policy: Policy,
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) breaker: Option<Arc<CircuitBreaker>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) hedge: Option<Arc<Hedge>>,
}

impl Entry {
    /// The timings.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The budget, if the name has one.
    pub fn budget(&self) -> Option<&Arc<RetryBudget>> {
        self.budget.as_ref()
    }

    /// The breaker, if the name has one.
    pub fn breaker(&self) -> Option<&Arc<CircuitBreaker>> {
        self.breaker.as_ref()
    }

    /// Each attempt's limit, if the name has one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The hedge, if the name has one: for the doors that hedge on the engine
    /// (`engine::Settings::hedge`).
    pub fn hedge(&self) -> Option<&Arc<Hedge>> {
        self.hedge.as_ref()
    }

    /// Whether `self` and `other` say the same: the same policy, timeout and hedge, and a
    /// budget and a breaker with the same settings ([`same_settings`]).
    pub(crate) fn same_as(&self, other: &Entry) -> bool {
        self.policy == other.policy
            && self.timeout == other.timeout
            && same_settings(self.hedge.as_deref(), other.hedge.as_deref())
            && same_settings(self.budget.as_deref(), other.budget.as_deref())
            && same_settings(self.breaker.as_deref(), other.breaker.as_deref())
    }
}

/// Whether two stateful objects (or their absence) have the same settings: what each would show
/// if serialized, which is its settings and never its state.
pub(crate) fn same_settings<T: Serialize>(a: Option<&T>, b: Option<&T>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => serde_json::to_value(a).ok() == serde_json::to_value(b).ok(),
        _ => false,
    }
}

impl Config {
    /// No names.
    pub fn new() -> Self {
        Config::default()
    }

    /// The `[retry]` table of a whole TOML file (other tables are the application's, and are
    /// not read). A file without one has no names.
    #[cfg(feature = "toml")]
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let mut file: toml::Table = text.parse().map_err(ConfigError::new)?;
        match file.remove(TABLE) {
            None => Ok(Config::new()),
            Some(table) => {
                let value = serde_json::to_value(table).map_err(ConfigError::new)?;
                Config::from_value(value)
            }
        }
    }

    /// The `"retry"` object of a whole JSON document (other fields are the application's).
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let mut file: Map<String, Value> = serde_json::from_str(text).map_err(ConfigError::new)?;
        match file.remove(TABLE) {
            None => Ok(Config::new()),
            Some(table) => Config::from_value(table),
        }
    }

    /// The names of `table` (a map of name to settings), each validated.
    pub(crate) fn from_value(table: Value) -> Result<Self, ConfigError> {
        let Value::Object(table) = table else {
            return Err(ConfigError::at(
                TABLE,
                format!(
                    "expected a table of named policies (`[retry.contract-service]`), found {}",
                    kind(&table)
                ),
            ));
        };
        let mut entries = BTreeMap::new();
        for (name, settings) in table {
            let key = format!("{TABLE}.{name}");
            check_name(&name).map_err(|rule| ConfigError::at(&key, rule))?;
            let name = retry_runtime::engine::interned(&name);
            entries.insert(name, entry(&key, name, settings)?);
        }
        Ok(Config { entries })
    }

    /// The settings read for `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// The names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.keys().copied()
    }
}

/// The characters of a policy's name: what `#[retry(policy = "...")]` accepts.
fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "a policy's name is made of ASCII letters, digits, `-`, `_` and `.` (as `policy = \"...\"` accepts it); found {name:?}"
        ))
    }
}

/// What a JSON value is, for an error.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

/// One name's table, read at `key`. Its budget and breaker are named after the policy when the
/// file gives them no name of their own, so that their metrics (`retry_budget_*{budget}`,
/// `retry_breaker_*{breaker}`) say which policy they belong to.
fn entry(key: &str, name: &'static str, settings: Value) -> Result<Entry, ConfigError> {
    let Value::Object(mut table) = settings else {
        return Err(ConfigError::at(
            key,
            format!(
                "expected a table of the policy's keys (`max = 3`, `base = \"1s\"`, ...), found {}",
                kind(&settings)
            ),
        ));
    };
    let sub =
        |table: &mut Map<String, Value>, name: &str| (table.remove(name), format!("{key}.{name}"));
    let (budget, at) = sub(&mut table, "budget");
    let budget = read::<RetryBudget>(budget, &at)?.map(|budget| match budget.get_name() {
        "unnamed" => Arc::new(budget.name(name)),
        _ => Arc::new(budget),
    });
    let (breaker, at) = sub(&mut table, "breaker");
    let breaker = read::<CircuitBreaker>(breaker, &at)?.map(|breaker| match breaker.get_name() {
        "unnamed" => Arc::new(breaker.name(name)),
        _ => Arc::new(breaker),
    });
    let (hedge, at) = sub(&mut table, "hedge");
    let hedge = read::<Hedge>(hedge, &at)?.map(Arc::new);
    let (timeout, at) = sub(&mut table, "timeout");
    let timeout = read::<Timeout>(timeout, &at)?.map(|Timeout(limit)| limit);
    let policy = Policy::deserialize(Value::Object(table)).map_err(|e| ConfigError::at(key, e))?;
    Ok(Entry {
        policy,
        budget,
        breaker,
        timeout,
        hedge,
    })
}

/// A sub-table, through the runtime's `Deserialize`.
fn read<T: for<'de> Deserialize<'de>>(
    value: Option<Value>,
    key: &str,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|value| T::deserialize(value).map_err(|e| ConfigError::at(key, e)))
        .transpose()
}

impl<'de> Deserialize<'de> for Config {
    /// The table that holds the names (`[retry]`'s contents), each name validated.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = Value::deserialize(deserializer)?;
        Config::from_value(table).map_err(de::Error::custom)
    }
}

/// What each name runs with, in the keys it is read from: so that a running service can show
/// its policies (`Registry::config`), and a file written from it reads back the same.
impl Serialize for Config {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut table = Map::new();
        for (name, entry) in &self.entries {
            let value = entry.to_value().map_err(serde::ser::Error::custom)?;
            table.insert((*name).to_owned(), value);
        }
        table.serialize(serializer)
    }
}

impl Entry {
    fn to_value(&self) -> Result<Value, serde_json::Error> {
        let mut table = match serde_json::to_value(self.policy)? {
            Value::Object(table) => table,
            _ => Map::new(),
        };
        if let Some(budget) = &self.budget {
            table.insert("budget".into(), serde_json::to_value(&**budget)?);
        }
        if let Some(breaker) = &self.breaker {
            table.insert("breaker".into(), serde_json::to_value(&**breaker)?);
        }
        if let Some(hedge) = &self.hedge {
            table.insert("hedge".into(), serde_json::to_value(&**hedge)?);
        }
        if let Some(timeout) = self.timeout {
            table.insert("timeout".into(), serde_json::to_value(Timeout(timeout))?);
        }
        Ok(Value::Object(table))
    }
}

impl fmt::Display for Config {
    /// The configuration as TOML would show it is left to the caller's format; this is JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(text) => f.write_str(&text),
            Err(_) => Err(fmt::Error),
        }
    }
}
