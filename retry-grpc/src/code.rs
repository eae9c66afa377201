//! Status codes as the service config writes them: the canonical names (`"UNAVAILABLE"`) or
//! the numbers (`14`), and a small set of codes.

use std::fmt;
use tonic::Code;

/// Every code with its canonical name, in numeric order (the index is the code's number).
const NAMES: [(Code, &str); 17] = [
    (Code::Ok, "OK"),
    (Code::Cancelled, "CANCELLED"),
    (Code::Unknown, "UNKNOWN"),
    (Code::InvalidArgument, "INVALID_ARGUMENT"),
    (Code::DeadlineExceeded, "DEADLINE_EXCEEDED"),
    (Code::NotFound, "NOT_FOUND"),
    (Code::AlreadyExists, "ALREADY_EXISTS"),
    (Code::PermissionDenied, "PERMISSION_DENIED"),
    (Code::ResourceExhausted, "RESOURCE_EXHAUSTED"),
    (Code::FailedPrecondition, "FAILED_PRECONDITION"),
    (Code::Aborted, "ABORTED"),
    (Code::OutOfRange, "OUT_OF_RANGE"),
    (Code::Unimplemented, "UNIMPLEMENTED"),
    (Code::Internal, "INTERNAL"),
    (Code::Unavailable, "UNAVAILABLE"),
    (Code::DataLoss, "DATA_LOSS"),
    (Code::Unauthenticated, "UNAUTHENTICATED"),
];

/// The canonical name of a code, as the service config and `google.rpc.Code` spell it.
///
/// ```
/// use retry_grpc::code::code_name;
/// use tonic::Code;
///
/// assert_eq!(code_name(Code::Unavailable), "UNAVAILABLE");
/// ```
pub fn code_name(code: Code) -> &'static str {
    NAMES[code_number(code) as usize].1
}

/// The code of a canonical name, exactly as written (the names are upper case; C-core and
/// grpc-java compare them exactly too).
///
/// ```
/// use retry_grpc::code::code_from_name;
/// use tonic::Code;
///
/// assert_eq!(code_from_name("RESOURCE_EXHAUSTED"), Some(Code::ResourceExhausted));
/// assert_eq!(code_from_name("unavailable"), None);
/// ```
pub fn code_from_name(name: &str) -> Option<Code> {
    NAMES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(code, _)| *code)
}

/// The code of a number in 0..=16.
///
/// ```
/// use retry_grpc::code::code_from_number;
/// use tonic::Code;
///
/// assert_eq!(code_from_number(14), Some(Code::Unavailable));
/// assert_eq!(code_from_number(17), None);
/// ```
pub fn code_from_number(number: u64) -> Option<Code> {
    usize::try_from(number)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map(|(code, _)| *code)
}

/// The number of a code (`Code::Unavailable` is 14).
pub fn code_number(code: Code) -> u32 {
    // `Code` is a fieldless enum whose discriminants are the gRPC numbers.
    code as i32 as u32
}

/// A set of status codes: `retryableStatusCodes` or `nonFatalStatusCodes`. `Copy`, one word.
///
/// ```
/// use retry_grpc::CodeSet;
/// use tonic::Code;
///
/// let codes = CodeSet::from_codes([Code::Unavailable, Code::ResourceExhausted]);
/// assert!(codes.contains(Code::Unavailable));
/// assert!(!codes.contains(Code::Internal));
/// assert_eq!(codes.to_string(), "[RESOURCE_EXHAUSTED, UNAVAILABLE]");
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CodeSet(u32);

impl CodeSet {
    /// No code.
    pub const EMPTY: CodeSet = CodeSet(0);

    /// The set of the given codes.
    pub fn from_codes(codes: impl IntoIterator<Item = Code>) -> Self {
        codes
            .into_iter()
            .fold(Self::EMPTY, |set, code| set.with(code))
    }

    /// This set and `code`.
    #[must_use]
    pub fn with(self, code: Code) -> Self {
        CodeSet(self.0 | 1 << code_number(code))
    }

    /// Whether `code` is in the set.
    pub fn contains(self, code: Code) -> bool {
        self.0 & 1 << code_number(code) != 0
    }

    /// Whether the set has no code.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The number of codes in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The codes, in numeric order.
    pub fn iter(self) -> impl Iterator<Item = Code> {
        NAMES
            .iter()
            .map(|(code, _)| *code)
            .filter(move |code| self.contains(*code))
    }
}

impl FromIterator<Code> for CodeSet {
    fn from_iter<I: IntoIterator<Item = Code>>(iter: I) -> Self {
        Self::from_codes(iter)
    }
}

impl fmt::Debug for CodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(code_name)).finish()
    }
}

impl fmt::Display for CodeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, code) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(code_name(code))?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_agree_with_tonic() {
        for (number, (code, name)) in NAMES.iter().enumerate() {
            assert_eq!(Code::from_i32(number as i32), *code);
            assert_eq!(code_number(*code), number as u32);
            assert_eq!(code_from_name(name), Some(*code));
            assert_eq!(code_from_number(number as u64), Some(*code));
        }
    }

    #[test]
    fn a_set_holds_what_it_was_given() {
        let set = CodeSet::from_codes([Code::Ok, Code::Unauthenticated, Code::Unavailable]);
        assert_eq!(set.len(), 3);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Code::Ok, Code::Unavailable, Code::Unauthenticated]
        );
        assert!(CodeSet::EMPTY.is_empty());
    }
}
