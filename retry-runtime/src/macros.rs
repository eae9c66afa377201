//! The crate's own `macro_rules!`, declared before every module so that all of them can use them.

/// Const builder methods that set one field each, with their docs:
///
/// ```text
/// setters! {
///     /// The pause before the first retry.
///     pub fn base(base: Duration) => self.base;
///     /// At least 1.
///     pub fn min_limit(limit: u32) => self.min = if limit == 0 { 1 } else { limit };
/// }
/// ```
///
/// becomes `pub const fn base(mut self, base: Duration) -> Self { self.base = base; self }`, and
/// likewise with the value after `=` where one is given.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($arg:ident: $ty:ty) => self.$($field:ident).+ $(= $value:expr)?;
    )*) => {
        $(
            $(#[$attr])*
            $vis const fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = setters!(@value $arg $(, $value)?);
                self
            }
        )*
    };
    (@value $arg:ident) => { $arg };
    (@value $arg:ident, $value:expr) => { $value };
}

/// Declares the functions of an `impl` block `const`, except in the crate's loom build, whose
/// atomics and mutexes have no `const` constructors (see `crate::sync`).
macro_rules! loom_const_fn {
    (impl $ty:ty { $($(#[$attr:meta])* $vis:vis fn $name:ident($($params:tt)*) -> $ret:ty $body:block)* }) => {
        impl $ty {
            $(
                #[cfg(not(all(test, loom)))]
                $(#[$attr])* $vis const fn $name($($params)*) -> $ret $body
                #[cfg(all(test, loom))]
                $(#[$attr])* $vis fn $name($($params)*) -> $ret $body
            )*
        }
    };
}

/// `impl Default for Type` as `Type::new()`, for the types whose `new` is their default:
/// `default_is_new!(Policy);`.
macro_rules! default_is_new {
    ($ty:ty) => {
        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

/// An error that the loop makes itself (a timed-out attempt, an open circuit, a shed attempt):
/// its `std::error::Error` impl, and a trait that stands for `E: From<$ty>` in the loop's bounds,
/// so that an error type without the `From` impl that a key needs gets a message that names the
/// key:
///
/// ```text
/// loop_error! {
///     /// The error for a timed-out attempt.
///     FromElapsed::from_elapsed(Elapsed),
///     message = "`{Self}` cannot carry a timeout, which `#[retry(timeout = ...)]` needs",
///     label = "...", note = "...",
/// }
/// ```
macro_rules! loop_error {
    (
        $(#[$doc:meta])*
        $trait:ident::$method:ident($ty:ty),
        message = $message:literal, label = $label:literal, note = $note:literal $(,)?
    ) => {
        impl std::error::Error for $ty {}

        #[doc = concat!("`E: From<", stringify!($ty), ">`, with an error message that says so.")]
        #[diagnostic::on_unimplemented(message = $message, label = $label, note = $note)]
        pub(crate) trait $trait {
            $(#[$doc])*
            fn $method(from: $ty) -> Self;
        }

        impl<E: From<$ty>> $trait for E {
            fn $method(from: $ty) -> Self {
                E::from(from)
            }
        }
    };
}
