//! What the [`Retrier`](crate::Retrier)'s methods name in their bounds and its type: the forms a
//! hook may take, what a classifier and a fallback take and return, what `sleep` accepts, and
//! the markers of what a run needs (how errors are judged, whether `run` can honour the
//! options). The attribute's options take the same forms.
//!
//! You rarely name these: they appear in the `Retrier`'s signatures and in compile errors,
//! whose messages say what each one asks.

pub use crate::retrier::{
    AnyRun, AsyncOnly, FallbackTakes, HasTimer, On, OwnTimer, RetrierFallback, RunKind,
    RunsBlocking,
};
pub use crate::state::{
    AsyncForm, ByTransient, Classifier, ErrorForm, ErrorOnly, FallbackOutput, GiveUpHook,
    IntoVerdict, NotifyHook, OutcomeForm, SyncForm,
};
pub use crate::timer::{FnForm, IntoSleeper, TypeForm};
