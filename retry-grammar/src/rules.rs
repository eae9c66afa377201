//! The rules across keys. Each names the key whose part is wrong; a key written with a refused
//! value has already been reported, so the rules compare only values that were read, never a
//! default standing in for a refused one.

use crate::keys::{
    ATTEMPTS, BASE, DEADLINE, FACTOR, HEDGE, KEYS, Key, MAX, MAX_DELAY, MAX_HEDGES, POLICY, Pass,
};
use crate::read::{BACKOFF_FORMS, Setting};
use crate::settings::{Context, Problem, Settings, Violation};

/// A rule across keys.
pub struct Rule {
    /// The rule as the documentation states it: what is refused.
    pub doc: fn() -> String,
    /// What its error points at, as the documentation states it.
    pub at: &'static str,
    /// Adds a [`Violation`] for each breach.
    pub check: fn(&Settings, &Context, &mut Vec<Violation>),
}

/// The rules, in the order the documentation lists them and the checks run.
pub static RULES: &[Rule] = &[
    Rule {
        doc: || format!("`{}` with `{}`", MAX.name, ATTEMPTS.name),
        at: "`attempts`",
        check: max_or_attempts,
    },
    Rule {
        doc: || format!("`{}` below `{}`", MAX_DELAY.name, BASE.name),
        at: "`max_delay`'s value",
        check: max_delay_below_base,
    },
    Rule {
        doc: || {
            format!(
                "`{}` below `{}` when `{} > 0`",
                DEADLINE.name, BASE.name, MAX.name
            )
        },
        at: "`deadline`'s value",
        check: deadline_below_base,
    },
    Rule {
        doc: || {
            let others: Vec<String> = BACKOFF_FORMS[1..]
                .iter()
                .map(|f| format!("`backoff = {}`", f.word))
                .collect();
            format!("`{}` with {}", FACTOR.name, others.join(" or "))
        },
        at: "`factor`",
        check: factor_needs_exponential,
    },
    Rule {
        doc: || {
            let timing: Vec<String> = KEYS
                .iter()
                .filter(|k| k.is_timing())
                .map(|k| format!("`{}`", k.name))
                .collect();
            format!(
                "`{}` given as an expression, with a timing key ({}); beside a name they are the default",
                POLICY.name,
                timing.join(", ")
            )
        },
        at: "the timing key",
        check: policy_replaces_timings,
    },
    Rule {
        doc: || {
            let keys: Vec<String> = KEYS
                .iter()
                .filter(|k| k.async_only.is_some())
                .map(|k| format!("`{}`", k.name))
                .collect();
            let (last, init) = keys
                .split_last()
                .map_or((String::new(), &[][..]), |(l, i)| (l.clone(), i));
            let keys = if init.is_empty() {
                last
            } else {
                format!("{} or {last}", init.join(", "))
            };
            format!("{keys} on a sync function")
        },
        at: "the key",
        check: async_only,
    },
    Rule {
        doc: || format!("`{}` without `{}`", MAX_HEDGES.name, HEDGE.name),
        at: "`max_hedges`",
        check: max_hedges_needs_hedge,
    },
];

fn max_hedges_needs_hedge(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    if settings.get(&MAX_HEDGES).is_some() && settings.get(&HEDGE).is_none() {
        out.push(at_key(
            &MAX_HEDGES,
            format!(
                "`{}` counts the copies that `{}` starts, and there is no `{1}`; add `{}`, or remove `{0}`",
                MAX_HEDGES.name,
                HEDGE.name,
                HEDGE.with_example()
            ),
        ));
    }
}

fn at_key(key: &'static Key, message: String) -> Violation {
    Violation {
        key,
        problem: Problem::key(message),
    }
}

fn at_value(key: &'static Key, message: String) -> Violation {
    Violation {
        key,
        problem: Problem::value(message),
    }
}

fn max_or_attempts(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    if let (Some(max), Some(_)) = (settings.get(&MAX), settings.get(&ATTEMPTS)) {
        let same = match max.setting {
            Some(Setting::Count(n)) => format!(
                ": `{} = {n}` is `{} = {}`",
                MAX.name,
                ATTEMPTS.name,
                u64::from(n) + 1
            ),
            _ => String::new(),
        };
        out.push(at_key(
            &ATTEMPTS,
            format!(
                "give `{}` (retries after the first call) or `{}` (calls in all), not both{same}",
                MAX.name, ATTEMPTS.name
            ),
        ));
    }
}

/// `base` as written, or its default if it was not written; `None` if its value was refused.
/// With the text that names it in a message.
fn base(settings: &Settings) -> Option<(u64, String)> {
    match settings.get(&BASE) {
        Some(entry) => match entry.setting {
            Some(Setting::Duration(nanos)) => {
                Some((nanos, format!("`{} = {}`", BASE.name, entry.written)))
            }
            _ => None,
        },
        None => Some((
            crate::DEFAULT_BASE,
            format!(
                "`{} = {}` (the default)",
                BASE.name,
                BASE.default.trim_matches('`')
            ),
        )),
    }
}

/// A key's duration as read, with its text as written.
fn duration<'s>(settings: &'s Settings, key: &Key) -> Option<(u64, &'s str)> {
    let entry = settings.get(key)?;
    match entry.setting {
        Some(Setting::Duration(nanos)) => Some((nanos, &entry.written)),
        _ => None,
    }
}

fn max_delay_below_base(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    if let (Some((cap, written)), Some((base, base_text))) =
        (duration(settings, &MAX_DELAY), base(settings))
    {
        if cap < base {
            out.push(at_value(
                &MAX_DELAY,
                format!(
                    "`{} = {written}` is shorter than {base_text}: no pause may exceed `{0}`, so not even the first pause could be taken; raise `{0}` or set a shorter `{1}`",
                    MAX_DELAY.name, BASE.name
                ),
            ));
        }
    }
}

fn deadline_below_base(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    let retries = match (settings.get(&MAX), settings.get(&ATTEMPTS)) {
        (None, None) => Some(crate::DEFAULT_MAX),
        _ => settings.timings().max,
    };
    if let (Some((deadline, written)), Some((base, base_text)), Some(retries)) =
        (duration(settings, &DEADLINE), base(settings), retries)
    {
        if retries > 0 && deadline < base {
            out.push(at_value(
                &DEADLINE,
                format!(
                    "`{} = {written}` is shorter than {base_text}: the first pause would already end past the deadline, so no retry could ever happen; raise `{0}`, set a shorter `{1}`, or write `{2} = 0` for a single call",
                    DEADLINE.name, BASE.name, MAX.name
                ),
            ));
        }
    }
}

fn factor_needs_exponential(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    if settings.get(&FACTOR).is_none() {
        return;
    }
    let Some(Setting::Backoff(form)) = settings.setting(&crate::BACKOFF) else {
        return;
    };
    if form == crate::Backoff::Exponential {
        return;
    }
    if let Some(form) = BACKOFF_FORMS.iter().find(|f| f.form == form) {
        out.push(at_key(
            &FACTOR,
            format!(
                "`{0}` has no effect with `backoff = {1}` (pause n is `{2}`); remove `{0}`, or write `backoff = {3}`",
                FACTOR.name, form.word, form.pause, BACKOFF_FORMS[0].word
            ),
        ));
    }
}

fn policy_replaces_timings(settings: &Settings, _: &Context, out: &mut Vec<Violation>) {
    // Beside a name (`policy = "contract-service"`) the timings are the default; a refused
    // value is a string too, meant as a name.
    let Some(policy) = settings
        .get(&POLICY)
        .filter(|entry| entry.setting == Some(Setting::Expr))
    else {
        return;
    };
    for entry in settings.entries() {
        if let Pass::Policy(builder) = entry.key.pass {
            out.push(at_key(
                entry.key,
                format!(
                    "`{}` cannot be combined with `{} = {}`: the policy sets every timing; set it in the policy (`Policy::new().{builder}(...)`), or remove `{1}`",
                    entry.key.name, POLICY.name, policy.written
                ),
            ));
        }
    }
}

fn async_only(settings: &Settings, context: &Context, out: &mut Vec<Violation>) {
    if context.is_async != Some(false) {
        return;
    }
    for entry in settings.entries() {
        if let Some(why) = entry.key.async_only {
            let message = if context.block {
                // The same reason, said of the block: `=> async { ... }` is its `async fn`.
                format!(
                    "`{}` needs an async block (`=> async {{ ... }}`): {}",
                    entry.key.name,
                    why.replace("function", "block")
                )
            } else {
                format!("`{}` needs an `async fn`: {why}", entry.key.name)
            };
            out.push(at_key(entry.key, message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{At, Scope, Value};

    fn check(text: &str, is_async: Option<bool>) -> Vec<(String, At, String)> {
        let mut settings = Settings::new(Scope::Attribute);
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, value) = part.split_once('=').expect("key = value");
            let value = value.trim();
            let _ = settings.read(name.trim(), Some(&Value::from_text(value)), value);
        }
        settings
            .check(&Context {
                is_async,
                block: false,
            })
            .into_iter()
            .map(|v| (v.key.name.to_owned(), v.problem.at, v.problem.message))
            .collect()
    }

    #[test]
    fn each_rule_names_its_key_and_part() {
        let found = check("max = 3, attempts = 4", None);
        assert_eq!(found[0].0, "attempts");
        assert_eq!(found[0].1, At::Key);
        assert!(found[0].2.ends_with(": `max = 3` is `attempts = 4`"));

        let found = check("max_delay = \"500ms\"", None);
        assert_eq!(
            found,
            [(
                "max_delay".to_owned(),
                At::Value,
                "`max_delay = \"500ms\"` is shorter than `base = \"1s\"` (the default): no pause may exceed `max_delay`, so not even the first pause could be taken; raise `max_delay` or set a shorter `base`".to_owned()
            )]
        );
        assert_eq!(check("deadline = 500ms, base = 1s", None)[0].0, "deadline");
        assert!(check("deadline = 500ms, base = 1s, max = 0", None).is_empty());
        assert!(
            check("deadline = 500ms, base = 1 sec", None).is_empty(),
            "a refused base is not compared"
        );
        assert_eq!(
            check("factor = 2, backoff = linear", None)[0].2,
            "`factor` has no effect with `backoff = linear` (pause n is `base·n`); remove `factor`, or write `backoff = exponential`"
        );
        let found = check("policy = P, base = 1s, jitter = full", None);
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0].2,
            "`base` cannot be combined with `policy = P`: the policy sets every timing; set it in the policy (`Policy::new().base(...)`), or remove `policy`"
        );
        assert!(
            check(
                "policy = \"contract-service\", base = 1s, jitter = full",
                None
            )
            .is_empty(),
            "beside a name the timings are the default"
        );
        assert_eq!(
            check("policy = \"contract-service\", max_delay = 10ms", None)[0].0,
            "max_delay",
            "and follow their rules"
        );
        assert_eq!(check("timeout = 2s, sleep = f", Some(false)).len(), 2);
        assert!(check("timeout = 2s, sleep = f", Some(true)).is_empty());
        assert!(check("timeout = 2s, sleep = f", None).is_empty());
    }

    #[test]
    fn a_blocks_async_only_keys_speak_of_the_block() {
        let mut settings = Settings::new(Scope::Block);
        let _ = settings.read("sleep", Some(&Value::from_text("f")), "f");
        let found = settings.check(&Context {
            is_async: Some(false),
            block: true,
        });
        assert_eq!(
            found[0].problem.message,
            "`sleep` needs an async block (`=> async { ... }`): a sync block pauses with `std::thread::sleep`; remove `sleep`"
        );
    }

    #[test]
    fn the_docs() {
        let docs: Vec<String> = RULES.iter().map(|r| (r.doc)()).collect();
        assert_eq!(
            docs,
            [
                "`max` with `attempts`",
                "`max_delay` below `base`",
                "`deadline` below `base` when `max > 0`",
                "`factor` with `backoff = linear` or `backoff = constant`",
                "`policy` given as an expression, with a timing key (`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`); beside a name they are the default",
                "`timeout`, `sleep`, `hedge` or `max_hedges` on a sync function",
                "`max_hedges` without `hedge`",
            ]
        );
    }
}
