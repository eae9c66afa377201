//! The `Idempotency-Key` header, as the IETF draft writes it.

use crate::IdempotencyKey;

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
    let key = key.as_str();
    let mut quoted = String::with_capacity(key.len() + 2);
    quoted.push('"');
    for c in key.chars() {
        if matches!(c, '"' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}
