//! The documentation tables, rendered from the key table and the forms, so that the README and
//! the crate docs cannot drift from what the macro accepts. `retry-runtime` checks its docs and
//! the README against these in a test (and rewrites them with `RETRY_DOCS=overwrite`).

use crate::keys::{KEYS, MAX};
use crate::read::{BACKOFF_FORMS, JITTER_FORMS, describe};
use crate::rules::RULES;

/// Where a table is shown.
#[derive(Clone, Copy, Debug)]
pub enum Flavor<'a> {
    /// The README, on GitHub and crates.io: plain Markdown.
    Readme,
    /// rustdoc: `` `Name` `` becomes the intra-doc link `` [`Name`] `` for each of these names,
    /// and a form names its variant of `enum_name`.
    Rustdoc {
        /// The items in scope that the table may link to.
        links: &'a [&'a str],
    },
}

impl Flavor<'_> {
    fn text(&self, text: &str) -> String {
        match self {
            Flavor::Readme => text.to_owned(),
            Flavor::Rustdoc { links } => links.iter().fold(text.to_owned(), |text, name| {
                text.replace(&format!("`{name}`"), &format!("[`{name}`]"))
                    .replace(&format!("[[`{name}`]]"), &format!("[`{name}`]"))
            }),
        }
    }

    /// `` `Variant` `` as plain code, or linked to `enum_name::variant`.
    fn variant(&self, enum_name: &str, shown: &str, variant: &str) -> String {
        match self {
            Flavor::Readme => format!("`{shown}`"),
            Flavor::Rustdoc { .. } => format!("[`{shown}`]({enum_name}::{variant})"),
        }
    }
}

/// The argument table: key, value, meaning, default, one row per key of [`KEYS`].
pub fn arguments(flavor: Flavor<'_>) -> String {
    let mut table = String::from("| key | value | meaning | default |\n|---|---|---|---|\n");
    for key in KEYS {
        let mut value = describe(&key.kind);
        if key.async_only.is_some() {
            value.push_str(", `async fn` only");
        }
        table.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            key.name,
            flavor.text(&value),
            flavor.text(key.doc),
            flavor.text(key.default)
        ));
    }
    table
}

/// The rules: what is refused and where the error points, the [`RULES`] across keys first.
pub fn rules(flavor: Flavor<'_>) -> String {
    let mut table = String::from("| refused | the error points at |\n|---|---|\n");
    for rule in RULES {
        table.push_str(&format!(
            "| {} | {} |\n",
            flavor.text(&(rule.doc)()),
            rule.at
        ));
    }
    let per_key = [
        (
            "a value its key does not take: `factor` below 1, a jitter number outside (0, 1], `timeout = \"0s\"`, a duration finer than a nanosecond, a string where a number belongs".to_owned(),
            "the value",
        ),
        (
            format!(
                "an unknown key (the message lists the valid keys and suggests the closest, or the one that does that job: `{}` → `{}`)",
                MAX.aliases[0], MAX.name
            ),
            "the key",
        ),
        ("a repeated key".to_owned(), "the second one"),
    ];
    for (doc, at) in per_key {
        table.push_str(&format!("| {} | {at} |\n", flavor.text(&doc)));
    }
    table
}

/// The jitter forms: in the README the spelling first, in rustdoc the variant.
pub fn jitter(flavor: Flavor<'_>) -> String {
    let mut table = match flavor {
        Flavor::Readme => String::from("| `#[retry]` | pause |\n|---|---|\n"),
        Flavor::Rustdoc { .. } => String::from("| form | pause | `#[retry]` |\n|---|---|---|\n"),
    };
    for form in JITTER_FORMS {
        let name = form.variant.split('(').next().unwrap_or(form.variant);
        let row = match flavor {
            Flavor::Readme => format!("| {} | {} |\n", form.spelling, form.pause),
            Flavor::Rustdoc { .. } => format!(
                "| {} | {} | {} |\n",
                flavor.variant("Jitter", form.variant, name),
                form.pause,
                form.spelling
            ),
        };
        table.push_str(&row);
    }
    table
}

/// The backoff forms, with pause `n` of each (`n` counting from 1).
pub fn backoff(flavor: Flavor<'_>) -> String {
    let mut table = String::from("| form | pause `n` | `#[retry]` |\n|---|---|---|\n");
    for form in BACKOFF_FORMS {
        table.push_str(&format!(
            "| {} | `{}` | `backoff = {}` |\n",
            flavor.variant("Backoff", form.variant, form.variant),
            form.pause,
            form.word
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustdoc_links_names_once() {
        let flavor = Flavor::Rustdoc {
            links: &["Jitter", "Policy"],
        };
        assert_eq!(
            flavor.text("see `Jitter`, a `Policy` or `&Policy`"),
            "see [`Jitter`], a [`Policy`] or `&Policy`"
        );
        assert!(arguments(flavor).contains("| `jitter` | "));
        assert!(jitter(flavor).contains("[`Proportional(f)`](Jitter::Proportional)"));
    }

    #[test]
    fn every_key_has_a_row() {
        let table = arguments(Flavor::Readme);
        assert_eq!(table.lines().count(), KEYS.len() + 2);
        assert!(table.contains(
            "| `timeout` | duration string > 0, `async fn` only | each attempt is cut off"
        ));
    }
}
