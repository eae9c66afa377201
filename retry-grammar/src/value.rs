//! A value as written, the same for the attribute's tokens and a policy string's text.

/// A value as written, before a grammar reads it. The macro makes one from a `syn::Expr`, a
/// policy string from text with [`Value::from_text`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An integer literal: `3`, `5u32` (`suffix` `"u32"`), `2s` (`suffix` `"s"`).
    Int {
        /// The digits, without `_` separators.
        digits: String,
        /// The suffix, empty if none.
        suffix: String,
    },
    /// A floating-point literal: `1.5`, `0.5f64`.
    Float {
        /// The number, without `_` separators or suffix.
        digits: String,
        /// The suffix, empty if none.
        suffix: String,
    },
    /// A string: `"1s"` (the text between the quotes).
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// A single identifier: `full`, `is_transient`.
    Word(String),
    /// A path of more than one segment: `my_runtime::sleep`, `::retry_runtime`.
    Path(String),
    /// A negated expression: `-1`.
    Negative,
    /// Any other expression: a closure, a call, a reference.
    Other,
}

impl Value {
    /// Reads a value of a policy string (`max=3, base=1s`), where a value may be quoted or not
    /// and a duration needs no quotes: `"1s"` and `1s` are both the string `1s`, `"3"` and `3`
    /// both the number 3.
    pub fn from_text(text: &str) -> Value {
        let text = text.trim();
        let text = match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(inner) => inner,
            None => text,
        };
        if let Some(rest) = text.strip_prefix('-') {
            if is_int(rest.trim_start()) || is_float(rest.trim_start()) {
                return Value::Negative;
            }
        }
        match text {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        if is_int(text) {
            return Value::Int {
                digits: text.to_owned(),
                suffix: String::new(),
            };
        }
        if is_float(text) {
            return Value::Float {
                digits: text.to_owned(),
                suffix: String::new(),
            };
        }
        if is_ident(text) {
            return Value::Word(text.to_owned());
        }
        let segments = text.strip_prefix("::").unwrap_or(text);
        if segments.split("::").all(|s| is_ident(s.trim())) {
            return Value::Path(text.to_owned());
        }
        Value::Str(text.to_owned())
    }

    /// What kind of value this is, for messages: "a string", "a number".
    pub fn describe(&self) -> &'static str {
        match self {
            Value::Int { .. } | Value::Float { .. } | Value::Negative => "a number",
            Value::Str(_) => "a string",
            Value::Bool(_) => "a boolean",
            Value::Word(_) | Value::Path(_) => "a name",
            Value::Other => "an expression",
        }
    }
}

fn is_int(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// `1.5`, `2.`, `1e3`, `0.5e-2`: a decimal float as Rust writes it, no sign, no suffix.
fn is_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_digit)
        && bytes
            .iter()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && text.parse::<f64>().is_ok()
}

fn is_ident(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
        && text != "_"
}

#[cfg(test)]
mod tests {
    use super::Value;

    fn int(digits: &str) -> Value {
        Value::Int {
            digits: digits.into(),
            suffix: String::new(),
        }
    }

    #[test]
    fn text_reads_as_the_attribute_would() {
        assert_eq!(Value::from_text("3"), int("3"));
        assert_eq!(Value::from_text("\"3\""), int("3"));
        assert_eq!(
            Value::from_text(" 1.5 "),
            Value::Float {
                digits: "1.5".into(),
                suffix: String::new()
            }
        );
        assert_eq!(Value::from_text("1s"), Value::Str("1s".into()));
        assert_eq!(Value::from_text("\"1 sec\""), Value::Str("1 sec".into()));
        assert_eq!(Value::from_text("-1"), Value::Negative);
        assert_eq!(Value::from_text("-1s"), Value::Str("-1s".into()));
        assert_eq!(Value::from_text("full"), Value::Word("full".into()));
        assert_eq!(Value::from_text("inf"), Value::Word("inf".into()));
        assert_eq!(Value::from_text("true"), Value::Bool(true));
        assert_eq!(Value::from_text("a::b"), Value::Path("a::b".into()));
        assert_eq!(Value::from_text(""), Value::Str(String::new()));
        assert_eq!(Value::from_text("_"), Value::Str("_".into()));
    }
}
