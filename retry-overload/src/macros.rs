//! The crate's own `macro_rules!`, declared before every module so that all of them can use them:
//! the same as retry-runtime's (`retry-runtime/src/macros.rs`), whose builders these types share.

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

/// A settings type whose fields are written once, each with its default, which `new` (a
/// `const fn`, with the docs given after the fields) and `Default` give:
///
/// ```text
/// settings! {
///     /// The type's docs.
///     pub struct Aimd {
///         initial: u32 = 20,
///         timeout: Duration = Duration::from_secs(5),
///     }
///     /// Netflix's defaults: ...
///     new
/// }
/// ```
///
/// The fields are `pub(super)`; the type derives `Clone`, `Copy`, `Debug` and `PartialEq`.
macro_rules! settings {
    (
        $(#[$attr:meta])*
        pub struct $name:ident {
            $($(#[$field_attr:meta])* $field:ident: $ty:ty = $default:expr,)*
        }
        $(#[$new_attr:meta])*
        new
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $($(#[$field_attr])* pub(super) $field: $ty,)*
        }

        impl $name {
            $(#[$new_attr])*
            pub const fn new() -> Self {
                Self { $($field: $default,)* }
            }
        }

        default_is_new!($name);
    };
}
