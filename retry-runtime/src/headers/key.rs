//! The `Idempotency-Key` header, as the IETF draft writes it.

use crate::IdempotencyKey;
use std::error::Error;
use std::fmt;

/// The value of the `Idempotency-Key` header for `key`, as the IETF draft writes it: a
/// structured-field string (RFC 8941 §3.3.3), the key in double quotes with `"` and `\` escaped.
/// Send it with every attempt of the call, under [`IdempotencyKey::HEADER`].
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::headers::key_header_value;
///
/// let key = IdempotencyKey::from("8e03978e-40d5-43e8-bc93-6894a57f9324");
/// assert_eq!(key_header_value(&key), "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"");
/// assert_eq!(key_header_value(&IdempotencyKey::from(r#"a"b\c"#)), r#""a\"b\\c""#);
/// ```
pub fn key_header_value(key: &IdempotencyKey) -> String {
    let escaped = key.as_str().replace('\\', r"\\").replace('"', r#"\""#);
    format!("\"{escaped}\"")
}

/// The `Idempotency-Key` header's value, read as the draft writes it (a quoted structured-field
/// string, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`) or bare, as many clients send it.
///
/// Whether a route requires a key is the service's decision; one that does answers
/// [`KeyError::Missing`] and [`KeyError::Invalid`] with 400 Bad Request
/// ([`KeyError::status`]). Takes anything that is bytes, such as an `http::HeaderValue`:
/// `key_from_header(headers.get(IdempotencyKey::HEADER))`.
///
/// ```
/// use retry_runtime::IdempotencyKey;
/// use retry_runtime::headers::{KeyError, key_from_header};
///
/// let quoted = key_from_header(Some("\"8e03978e-40d5-43e8-bc93-6894a57f9324\""));
/// assert_eq!(quoted, Ok(IdempotencyKey::from("8e03978e-40d5-43e8-bc93-6894a57f9324")));
/// assert_eq!(key_from_header(Some("payout-4711")), Ok(IdempotencyKey::from("payout-4711")));
///
/// assert_eq!(key_from_header(None::<&str>), Err(KeyError::Missing));
/// assert_eq!(key_from_header(Some("\"\"")), Err(KeyError::Invalid));
/// assert_eq!(KeyError::Missing.status(), 400);
/// ```
pub fn key_from_header(value: Option<impl AsRef<[u8]>>) -> Result<IdempotencyKey, KeyError> {
    let value = value.ok_or(KeyError::Missing)?;
    let value = value.as_ref().trim_ascii();
    let key = match value.strip_prefix(b"\"") {
        Some(quoted) => parse_sf_string(quoted)?,
        None => value.to_vec(),
    };
    // The header's own grammar: a structured-field string is ASCII (RFC 8941 §3.3.3), and a
    // bare value has no space or quote. The rest is the rule of every key, `validate_key`.
    if !key.is_ascii() {
        return Err(KeyError::Invalid);
    }
    if value.first() != Some(&b'"') && key.iter().any(|b| matches!(b, b' ' | b'"')) {
        return Err(KeyError::Invalid);
    }
    let key = String::from_utf8(key).map_err(|_| KeyError::Invalid)?;
    validate_key(&key)?;
    Ok(IdempotencyKey::from(key))
}

/// The rule every idempotency key follows, in every store and from the header: 1 to
/// [`KeyError::MAX_LEN`] (255) characters of printable text, that is no control character
/// (U+0000 to U+001F, U+007F to U+009F: NUL, tab, newline, escape, ...). Other Unicode is
/// allowed, spaces and letters of any script included (stored as UTF-8, at most 1,020 bytes);
/// the `Idempotency-Key` header itself carries printable ASCII only ([`key_from_header`]).
///
/// The limit is the IETF draft's and Stripe's. Every store of `retry_durable::store` checks it
/// in `begin_scoped` before any database work and refuses another key with
/// `StoreError::InvalidKey` (400), so that a huge key or a NUL byte never reaches an index or a
/// driver.
///
/// ```
/// use retry_runtime::headers::{KeyError, validate_key};
///
/// assert_eq!(validate_key("8e03978e-40d5-43e8-bc93-6894a57f9324"), Ok(()));
/// assert_eq!(validate_key("Zahlung 4711 für Müller"), Ok(()));
/// assert_eq!(validate_key(&"k".repeat(255)), Ok(()));
/// assert_eq!(validate_key(&"k".repeat(256)), Err(KeyError::Invalid));
/// assert_eq!(validate_key("a\0b"), Err(KeyError::Invalid));
/// assert_eq!(validate_key(""), Err(KeyError::Invalid));
/// ```
pub fn validate_key(key: &str) -> Result<(), KeyError> {
    // Counted up to one past the limit: a long header is not read to its end.
    let chars = key.chars().take(KeyError::MAX_LEN + 1).count();
    if (1..=KeyError::MAX_LEN).contains(&chars) && !key.chars().any(char::is_control) {
        Ok(())
    } else {
        Err(KeyError::Invalid)
    }
}

/// The rule of every key, as the messages of [`KeyError::Invalid`] and the stores' refusals
/// state it.
pub const KEY_RULE: &str = "a key is 1 to 255 characters of printable text, without control \
                        characters (U+0000 to U+001F, U+007F to U+009F)";

/// The rest of a structured-field string after its opening quote (RFC 8941 §3.3.3): `\"` and
/// `\\` are the only escapes; parameters after the closing quote (`;name=value`) are ignored.
fn parse_sf_string(rest: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut key = Vec::with_capacity(rest.len());
    let mut bytes = rest.iter();
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&escaped @ (b'"' | b'\\')) => key.push(escaped),
                _ => return Err(KeyError::Invalid),
            },
            b'"' => {
                let after = bytes.as_slice().trim_ascii_start();
                return if after.is_empty() || after.starts_with(b";") {
                    Ok(key)
                } else {
                    Err(KeyError::Invalid)
                };
            }
            _ => key.push(b),
        }
    }
    Err(KeyError::Invalid) // no closing quote
}

/// Why a request has no usable idempotency key. A route that requires one answers 400.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyError {
    /// The request has no `Idempotency-Key` header.
    Missing,
    /// The key breaks the rule of every key ([`validate_key`]: 1 to [`KeyError::MAX_LEN`]
    /// characters, no control character), or the header is not printable ASCII, or an
    /// unterminated or malformed quoted string.
    Invalid,
}

impl KeyError {
    /// The longest key accepted, in characters, so that a client cannot fill the store with
    /// huge keys: 255, as the IETF draft and common payment APIs allow.
    pub const MAX_LEN: usize = 255;

    /// The HTTP status to answer with: 400 Bad Request.
    pub const fn status(&self) -> u16 {
        400
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Missing => f.write_str("the request has no `Idempotency-Key` header"),
            KeyError::Invalid => write!(
                f,
                "the idempotency key is not valid: {KEY_RULE}; the `Idempotency-Key` header \
                 carries it in printable ASCII, bare or as a quoted string"
            ),
        }
    }
}

impl Error for KeyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values() {
        let ok = |value: &str| key_from_header(Some(value)).map(|k| k.to_string());
        assert_eq!(ok("\"abc\""), Ok("abc".to_owned()));
        assert_eq!(ok("  \"abc\"  "), Ok("abc".to_owned()));
        assert_eq!(ok("\"a b\""), Ok("a b".to_owned()));
        assert_eq!(ok(r#""a\"b\\c""#), Ok(r#"a"b\c"#.to_owned()));
        assert_eq!(ok("\"abc\";v=1"), Ok("abc".to_owned()));
        assert_eq!(ok("abc-123_X"), Ok("abc-123_X".to_owned()));
        let too_long = "k".repeat(KeyError::MAX_LEN + 1);
        for bad in [
            "",
            "  ",
            "\"\"",
            "\"abc",
            "\"abc\" x",
            r#""a\b""#,
            "a b",
            "a\"b",
            "\"é\"",
            "é",
            "\"tab\there\"",
            &too_long,
        ] {
            assert_eq!(
                key_from_header(Some(bad)),
                Err(KeyError::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(
            key_from_header(Some(b"\xff".as_slice())),
            Err(KeyError::Invalid)
        );
        assert_eq!(key_from_header(None::<&[u8]>), Err(KeyError::Missing));
        assert_eq!(
            ok(&"k".repeat(KeyError::MAX_LEN)).map(|k| k.len()),
            Ok(KeyError::MAX_LEN)
        );
    }

    #[test]
    fn key_errors_are_400_and_say_what_is_wrong() {
        assert_eq!(KeyError::Missing.status(), 400);
        assert_eq!(KeyError::Invalid.status(), 400);
        assert_eq!(
            KeyError::Missing.to_string(),
            "the request has no `Idempotency-Key` header"
        );
    }
}
