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

/// How the events show an error: with its `Debug` ([`ByDebug`]) or, for a type without it (or a
/// generic error type without the bound), by its type name ([`ByName`]). A type, so that the loop
/// carries nothing for it.
pub(crate) trait Show<E> {
    /// Writes `error` for an event.
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// The error is shown with its `Debug` impl.
#[derive(Clone, Copy, Debug)]
pub enum ByDebug {}
/// The error has no `Debug` impl (or a generic error type has no `Debug` bound): it is shown by
/// its type name.
#[derive(Clone, Copy, Debug)]
pub enum ByName {}

impl<E: fmt::Debug> Show<E> for ByDebug {
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(error, f)
    }
}

impl<E> Show<E> for ByName {
    fn show(_: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a `{}` (no `Debug`)", std::any::type_name::<E>())
    }
}
