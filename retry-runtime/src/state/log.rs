//! `log_level = "..."`, and how a log event shows an error without `Debug`.

use std::fmt;

/// The level of the one event logged when a call that failed ends (`log_level = "..."`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogLevel {
    /// `ERROR`, the default.
    #[default]
    Error,
    /// `WARN`.
    Warn,
    /// `INFO`.
    Info,
    /// `DEBUG`.
    Debug,
    /// `TRACE`.
    Trace,
}

/// The levels `log_level = "..."` names, as [`Retrier::log_level`](crate::Retrier::log_level)
/// takes them: `level::Warn`, ...
pub mod level {
    use super::LogLevel;

    macro_rules! levels {
        ($($name:ident,)*) => {$(
            #[doc = concat!("`log_level = \"", stringify!($name), "\"`.")]
            #[derive(Clone, Copy, Debug)]
            pub struct $name;
            impl From<$name> for LogLevel {
                fn from(_: $name) -> LogLevel {
                    LogLevel::$name
                }
            }
        )*};
    }

    levels!(Error, Warn, Info, Debug, Trace,);
}

/// How an event shows an error whose type has no `Debug` (or a generic error type without the
/// bound): by its type name.
pub(crate) fn by_name<E>(_: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "a `{}` (no `Debug`)", std::any::type_name::<E>())
}
