//! What the [`Retrier`](crate::Retrier)'s methods name in their bounds: the forms a hook may
//! take, what a classifier and a fallback return, what `sleep` accepts, and the options as a
//! type. The attribute's options take the same forms.
//!
//! You rarely name these: they appear in the `Retrier`'s signatures and in compile errors,
//! whose messages say what each one asks.

pub use crate::retrier::{AnyRun, AsyncOnly, FallbackTakes, On, RetrierFallback, RunsBlocking};
pub use crate::state::{
    AsyncForm, ByTransient, Classifier, ErrorForm, ErrorOnly, FallbackOutput, GiveUpHook,
    IntoVerdict, NotifyHook, OutcomeForm, SyncForm,
};
pub use crate::timer::{FnForm, IntoSleeper, TypeForm};
