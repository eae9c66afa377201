//! The idempotency key: one value that every attempt of a non-idempotent call carries.

use std::fmt;
use std::sync::Arc;

/// A key that lets the receiver of a state-changing call recognise a repeat.
///
/// A payout whose response was lost looks like a failure to the caller; retrying it without a
/// key would pay twice. With a key, the receiver stores the first response under it and answers a
/// repeat with the stored response instead of acting again (the IETF `Idempotency-Key` header).
///
/// Create the key once per operation, before the first attempt, and pass it to the annotated
/// function: every attempt then sees the same key, because the key is a parameter.
/// `#[non_idempotent]` functions must take one to be retried, or a parameter of another type
/// that identifies the operation (an order number, a `Uuid`), marked `#[idempotency_key]`.
/// Inside the body, [`attempt()`](crate::attempt)`.key()` gives the key as an `IdempotencyKey`
/// whatever the parameter's type.
///
/// ```
/// use retry_runtime::IdempotencyKey;
///
/// let random = IdempotencyKey::new(); // a UUID v4 from a cryptographic generator
/// assert_eq!(random.as_str().len(), 36);
///
/// let derived = IdempotencyKey::from("claim-4711-payout-1"); // derived from the operation
/// assert_eq!(derived.to_string(), "claim-4711-payout-1");
/// assert_eq!(IdempotencyKey::HEADER, "Idempotency-Key");
/// ```
/// Cloning is cheap (a shared, immutable string), so a key can be kept, logged or sent to
/// another task.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdempotencyKey(Arc<str>);

impl IdempotencyKey {
    /// The HTTP header that carries the key: `Idempotency-Key`.
    pub const HEADER: &'static str = "Idempotency-Key";

    /// A fresh key: 128 bits from an OS-seeded cryptographic generator, rendered as a lowercase
    /// UUID version 4 (`xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`).
    pub fn new() -> Self {
        // ThreadRng is ChaCha-based and seeded from the operating system.
        let bits: u128 = rand::random();
        // Version 4 (bits 76-79) and the variant of RFC 9562 (bits 62-63).
        let uuid = bits & !(0xf << 76 | 0x3 << 62) | 0x4 << 76 | 0x2 << 62;
        let mut text = format!("{uuid:032x}");
        for at in [20, 16, 12, 8] {
            text.insert(at, '-');
        }
        Self(text.into())
    }

    /// A key parameter's text, as its `Display` writes it, for `attempt().key()`.
    pub(crate) fn render(key: &(dyn fmt::Display + 'static)) -> Self {
        Self(key.to_string().into())
    }

    /// The key as text, ready for a header or a database column.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for IdempotencyKey {
    /// Same as [`IdempotencyKey::new`]: a fresh random key.
    fn default() -> Self {
        Self::new()
    }
}

impl From<String> for IdempotencyKey {
    fn from(key: String) -> Self {
        Self(key.into())
    }
}

impl From<&str> for IdempotencyKey {
    fn from(key: &str) -> Self {
        Self(key.into())
    }
}

impl From<&IdempotencyKey> for IdempotencyKey {
    fn from(key: &IdempotencyKey) -> Self {
        key.clone()
    }
}

impl From<&String> for IdempotencyKey {
    fn from(key: &String) -> Self {
        Self(key.as_str().into())
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> Self {
        key.0.as_ref().to_owned()
    }
}

impl AsRef<str> for IdempotencyKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn new_keys_are_uuid_v4_and_distinct() {
        let keys: HashSet<_> = (0..1_000).map(|_| IdempotencyKey::new()).collect();
        assert_eq!(keys.len(), 1_000);
        for key in &keys {
            let s = key.as_str();
            let groups: Vec<_> = s.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{s}");
            assert!(
                s.chars()
                    .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert_eq!(&s[14..15], "4", "version nibble in {s}");
            assert!(
                matches!(&s[19..20], "8" | "9" | "a" | "b"),
                "variant nibble in {s}"
            );
        }
    }

    #[test]
    fn derived_keys_keep_their_text() {
        let key = IdempotencyKey::from(String::from("claim-4711-payout-1"));
        assert_eq!(key, IdempotencyKey::from("claim-4711-payout-1"));
        assert_eq!(format!("{key}"), "claim-4711-payout-1");
        assert_eq!(
            format!("{key:?}"),
            "IdempotencyKey(\"claim-4711-payout-1\")"
        );
        assert_eq!(String::from(key), "claim-4711-payout-1");
    }
}
