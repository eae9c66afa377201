//! Values written into the SQL text, for the messages that carry several statements: the
//! one-commit mode's claim with its `BEGIN`, a completion with its `COMMIT`. PostgreSQL runs a
//! message of several statements only without bind parameters (the simple query protocol), and
//! sqlx's `begin_with` sends its statement without any, so these values are literals, quoted so
//! that no value can end its literal:
//!
//! - PostgreSQL text in dollar quotes (`$q$…$q$`), with a tag whose delimiter the value does not
//!   contain: no character is special inside them, whatever `standard_conforming_strings` says;
//! - SQLite text in single quotes with each `'` doubled (SQLite has no backslash escapes);
//! - bytes as hexadecimal digits (`decode('…', 'hex')`, `X'…'`), numbers as Rust prints them.
//!
//! Text with a NUL is refused (`None`): both engines end a statement's text at a NUL (it ends
//! the protocol's query string, and SQLite's), and a value must never end a statement. The
//! caller then uses the statements with bind parameters.

use std::fmt::Write;

/// `text` as a PostgreSQL literal in dollar quotes, or `None` for text with a NUL.
pub fn postgres_text(text: &str) -> Option<String> {
    if text.contains('\0') {
        return None;
    }
    // The literal ends at the first delimiter after the opening one: it must be the closing one.
    // The text holds finitely many delimiters: one of `$q$`, `$q0$`, `$q1$`, ... is not there.
    let mut tag = String::from("q");
    let mut n = 0_u64;
    loop {
        let delimiter = format!("${tag}$");
        let body = format!("{text}{delimiter}");
        if body.find(&delimiter) == Some(text.len()) {
            return Some(format!("{delimiter}{body}"));
        }
        tag = format!("q{n}");
        n += 1;
    }
}

/// `text` as a SQLite literal in single quotes, or `None` for text with a NUL.
pub fn sqlite_text(text: &str) -> Option<String> {
    if text.contains('\0') {
        return None;
    }
    Some(format!("'{}'", text.replace('\'', "''")))
}

/// `bytes` as a PostgreSQL `BYTEA` expression.
pub fn postgres_bytes(bytes: &[u8]) -> String {
    format!("decode('{}', 'hex')", hex(bytes))
}

/// `bytes` as a SQLite blob literal.
pub fn sqlite_bytes(bytes: &[u8]) -> String {
    format!("X'{}'", hex(bytes))
}

fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// `n` as an integer expression of both engines (the smallest `i64` has no literal: its
/// magnitude is not an `i64`).
pub fn int(n: i64) -> String {
    if n == i64::MIN {
        return format!("({} - 1)", i64::MIN + 1);
    }
    n.to_string()
}

/// `n`, or `NULL`.
pub fn opt_int(n: Option<i64>) -> String {
    n.map_or_else(|| "NULL".to_owned(), int)
}

/// `template` with each placeholder `$N` replaced by `values[N - 1]`, in one pass over the
/// template, so that a `$N` inside a value is never replaced. A placeholder without a value is
/// left as it is (the database refuses it).
pub fn inline(template: &str, values: &[String]) -> String {
    let mut out =
        String::with_capacity(template.len() + values.iter().map(String::len).sum::<usize>());
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let value = after[..digits]
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| values.get(i));
        match value {
            Some(value) => out.push_str(value),
            None => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_replaced_once() {
        let values = ["'$2'".to_owned(), "7".to_owned()];
        assert_eq!(inline("a = $1 AND b = $2", &values), "a = '$2' AND b = 7");
        assert_eq!(inline("$3 $ $x", &values), "$3 $ $x");
        assert_eq!(inline("$10", &values), "$10");
    }

    #[test]
    fn dollar_quotes_pick_a_tag_the_text_does_not_close() {
        assert_eq!(postgres_text("a'b\\").unwrap(), "$q$a'b\\$q$");
        assert_eq!(postgres_text("x$q$y").unwrap(), "$q0$x$q$y$q0$");
        // The text's end and the closing delimiter together would close early.
        assert_eq!(postgres_text("x$q").unwrap(), "$q0$x$q$q0$");
        assert_eq!(postgres_text("a\0b"), None);
    }

    #[test]
    fn sqlite_quotes_are_doubled() {
        assert_eq!(sqlite_text("it's").unwrap(), "'it''s'");
        assert_eq!(sqlite_text("\0"), None);
        assert_eq!(sqlite_bytes(&[0, 255]), "X'00ff'");
        assert_eq!(postgres_bytes(b""), "decode('', 'hex')");
    }

    #[test]
    fn integers_include_the_smallest() {
        assert_eq!(int(-5), "-5");
        assert_eq!(int(i64::MIN), "(-9223372036854775807 - 1)");
        assert_eq!(opt_int(None), "NULL");
    }
}
