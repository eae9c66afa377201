//! A minimal `--flag value` reader, so the binaries need no argument-parsing dependency.

use std::collections::HashMap;
use std::error::Error;
use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;

/// Runs a binary's `run`, printing its error and failing the process if there is one.
pub fn exit_code(run: impl FnOnce() -> Result<(), Box<dyn Error>>) -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The command line as `--name value` pairs.
#[derive(Debug)]
pub struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    /// Reads `std::env::args()`, accepting only the names in `known` (each written without `--`).
    pub fn parse(known: &[&str], usage: &str) -> Result<Self, String> {
        Self::from_iter(std::env::args().skip(1), known, usage)
    }

    /// Reads `args`, accepting only the names in `known`.
    pub fn from_iter(
        args: impl IntoIterator<Item = String>,
        known: &[&str],
        usage: &str,
    ) -> Result<Self, String> {
        let mut values = HashMap::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                return Err(usage.to_owned());
            }
            let name = arg
                .strip_prefix("--")
                .filter(|name| known.contains(name))
                .ok_or_else(|| format!("unknown argument `{arg}`\n{usage}"))?;
            let value = args
                .next()
                .ok_or_else(|| format!("`{arg}` needs a value\n{usage}"))?;
            values.insert(name.to_owned(), value);
        }
        Ok(Self { values })
    }

    /// The value of `--name`, or `default` when it was not given.
    pub fn get<T>(&self, name: &str, default: T) -> Result<T, String>
    where
        T: FromStr,
        T::Err: Display,
    {
        self.optional(name).map(|value| value.unwrap_or(default))
    }

    /// The value of `--name`, if given.
    pub fn optional<T>(&self, name: &str) -> Result<Option<T>, String>
    where
        T: FromStr,
        T::Err: Display,
    {
        self.values
            .get(name)
            .map(|text| text.parse().map_err(|e| format!("`--{name} {text}`: {e}")))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Result<Flags, String> {
        Flags::from_iter(
            args.iter().map(|s| s.to_string()),
            &["outage", "plot"],
            "usage",
        )
    }

    #[test]
    fn reads_known_flags_and_defaults() {
        let f = flags(&["--outage", "7.5"]).unwrap();
        assert_eq!(f.get("outage", 5.0).unwrap(), 7.5);
        assert_eq!(f.optional::<String>("plot").unwrap(), None);
    }

    #[test]
    fn rejects_unknown_and_missing_values() {
        assert!(
            flags(&["--customers", "3"])
                .unwrap_err()
                .contains("unknown")
        );
        assert!(flags(&["--plot"]).unwrap_err().contains("needs a value"));
        assert!(
            flags(&["--outage", "x"])
                .unwrap()
                .get("outage", 5.0)
                .is_err()
        );
    }
}
