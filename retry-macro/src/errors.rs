//! Collects every error instead of stopping at the first, so one compile shows them all.

use quote::ToTokens;
use std::fmt::Display;

#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn spanned(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn finish(self) -> Result<(), syn::Error> {
        self.0.map_or(Ok(()), Err)
    }

    /// `Ok(value)` when nothing was pushed.
    pub(crate) fn or<T>(self, value: T) -> Result<T, syn::Error> {
        self.finish().map(|()| value)
    }
}
