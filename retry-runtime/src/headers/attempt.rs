//! The attempt number as a header, so that a service knows its caller retries.

use crate::attempt;

/// An attempt-count header: the client writes the attempt number, the service reads it to
/// know that its caller retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptHeader {
    name: &'static str,
}

impl AttemptHeader {
    /// `Retry-Attempt`.
    pub const DEFAULT: AttemptHeader = AttemptHeader::named("Retry-Attempt");

    /// A header with another name, such as `X-Retry-Attempt`.
    pub const fn named(name: &'static str) -> Self {
        AttemptHeader { name }
    }

    /// The header's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The header to send with the current attempt: its name and the attempt number.
    pub fn for_current_attempt(&self) -> (&'static str, String) {
        (self.name, attempt().number().to_string())
    }

    /// Reads the header's value: the caller's attempt number, or `None` when it is not a
    /// positive whole number.
    pub fn parse(&self, value: &str) -> Option<u32> {
        value.trim().parse().ok().filter(|n| *n >= 1)
    }

    /// `true` when the request carries a valid attempt number, so its caller is a
    /// retrying client and this service should not retry on its behalf.
    pub fn caller_retries(&self, value: Option<&str>) -> bool {
        value.and_then(|v| self.parse(v)).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_parsing() {
        let h = AttemptHeader::DEFAULT;
        assert_eq!(h.parse(" 3 "), Some(3));
        assert_eq!(h.parse("0"), None);
        assert_eq!(h.parse("-1"), None);
        assert_eq!(h.parse("x"), None);
        assert!(h.caller_retries(Some("1")));
        assert!(!h.caller_retries(None));
        assert_eq!(AttemptHeader::named("X-Try").name(), "X-Try");
    }
}
