//! `log_level = "..."` and how a log event shows the error: with `Debug` or by its type name.

use std::fmt;

/// How the loop logs: how it shows the error (`D`: [`ByDebug`] or [`ByName`]) and the level of
/// the final event (`V`, one of [`level`]). Zero-sized: a type parameter of the loop state.
pub struct Log<D, V>(std::marker::PhantomData<fn() -> (D, V)>);

/// The error is shown with its `Debug` impl.
pub enum ByDebug {}
/// The error has no `Debug` impl (or a generic error type has no `Debug` bound): it is shown
/// by its type name.
pub enum ByName {}

/// The levels `log_level = "..."` names, each a zero-sized type.
pub mod level {
    use super::LogLevel;

    /// A level of the final event.
    pub trait Level {
        /// The level.
        const LEVEL: LogLevel;
    }

    macro_rules! levels {
        ($($name:ident,)*) => {$(
            #[doc = concat!("`log_level = \"", stringify!($name), "\"`.")]
            #[derive(Clone, Copy, Debug)]
            pub struct $name;
            impl Level for $name {
                const LEVEL: LogLevel = LogLevel::$name;
            }
        )*};
    }

    levels!(Error, Warn, Info, Debug, Trace,);
}

/// The level of the one event logged when a call that failed ends (`log_level = "..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `ERROR`, the default.
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

/// How the loop shows an error of type `E` and at which level it logs the final event.
pub trait Logs<E> {
    /// The final event's level.
    const LEVEL: LogLevel;
    /// Writes `error` for a log event.
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<E: fmt::Debug, V: level::Level> Logs<E> for Log<ByDebug, V> {
    const LEVEL: LogLevel = V::LEVEL;
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(error, f)
    }
}

impl<E, V: level::Level> Logs<E> for Log<ByName, V> {
    const LEVEL: LogLevel = V::LEVEL;
    fn show(_: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a `{}` (no `Debug`)", std::any::type_name::<E>())
    }
}
