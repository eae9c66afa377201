//! What the [`Retrier`](crate::Retrier)'s methods name in their bounds: the forms a hook may
//! take, what a classifier and a fallback return, what `sleep` accepts, and the options as a
//! type. The attribute's options take the same forms.
//!
//! You rarely name these: they appear in the `Retrier`'s signatures and in compile errors,
//! whose messages say what each one asks.

pub use crate::state::{
    AnyRun, AsyncForm, AsyncOnly, ByTransient, Classifier, ErrorForm, ErrorOnly, FallbackOutput,
    FallbackTakes, GiveUpHook, IntoVerdict, NotifyHook, On, OutcomeForm, RetrierFallback,
    RunsBlocking, SyncForm,
};
pub use crate::timer::{FnForm, IntoSleeper, TypeForm};
