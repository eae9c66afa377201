//! The `#[retry]` and `#[non_idempotent]` attributes.
//!
//! Use them through [`retry-runtime`](https://docs.rs/retry-runtime), which re-exports them and
//! holds the loop's logic; the documentation of each attribute lives there. The stages: [`args`]
//! parses the attribute with the grammar it shares with `Policy::from_str` (`retry-grammar`:
//! the key table, the value grammars, the rules across keys), [`item`] the function,
//! [`validate`] checks rules across both, and [`expand`] prints the result. On any error the original function is emitted beside the error,
//! so the IDE keeps seeing it.
#![forbid(unsafe_code)]

mod args;
mod block;
mod errors;
mod expand;
mod item;
mod validate;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{ToTokens, quote};

/// Turns a function returning `Result` into a retry loop with backoff and jitter.
///
/// See the `retry-runtime` crate for the arguments and the semantics.
#[proc_macro_attribute]
pub fn retry(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = TokenStream2::from(item);
    retry_impl(args.into(), item.clone())
        .unwrap_or_else(|error| with_original(error, item))
        .into()
}

fn retry_impl(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    // Every mistake in one compile: argument errors, item errors and the rules across both.
    let mut errors = errors::Errors::default();
    let args = args::parse(args, &mut errors);
    let func = match item::parse("retry", item) {
        Ok(func) => func,
        Err(e) => {
            errors.push(e);
            return errors.or(TokenStream2::new()); // `Err`: one was just pushed
        }
    };
    let plan = validate::plan(args, func, errors)?;
    Ok(expand::expand(plan))
}

/// Retries a block that borrows its surroundings: `retry_block!(max = 3 => { read(&path) })`,
/// or `retry_block!(max = 3 => async { fetch(&url).await }).await`.
///
/// See the `retry-runtime` crate for the arguments and the semantics.
#[proc_macro]
pub fn retry_block(input: TokenStream) -> TokenStream {
    block::retry_block(input.into()).into()
}

/// Marks a function whose repetition would have a second effect: a payment, an email.
///
/// See the `retry-runtime` crate.
#[proc_macro_attribute]
pub fn non_idempotent(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = TokenStream2::from(item);
    non_idempotent_impl(args.into(), item.clone())
        .unwrap_or_else(|error| with_original(error, item))
        .into()
}

/// Input: `#[non_idempotent] #[retry(...)] fn pay(...)`. Output: `#[retry(...)]
/// #[::retry_runtime::non_idempotent] fn pay(...)` (or the `crate = path` of `#[retry]`), so that `#[retry]`, which does the checking,
/// sees the mark whichever order the two were written in. Without `#[retry]` it only documents
/// the function.
fn non_idempotent_impl(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let mut errors = errors::Errors::default();
    if !args.is_empty() {
        errors.spanned(
            &args,
            "`#[non_idempotent]` takes no arguments; write `#[non_idempotent]`",
        );
    }
    // A declaration without a body, like a trait method: there is nothing to retry, so the mark
    // only documents it.
    if let Ok(mut decl) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        if decl.default.is_none() && !decl.attrs.iter().any(|a| item::is_attr(a, "retry")) {
            errors.finish()?;
            item::strip_key_marks(&mut decl.sig);
            decl.attrs.push(not_idempotent_doc());
            return Ok(quote!(#decl));
        }
    }
    let parsed = item::parse("non_idempotent", item);
    let mut func = match parsed {
        Ok(func) => errors.or(func)?,
        Err(e) => {
            errors.push(e);
            return Err(errors.finish().err().unwrap_or_else(|| {
                syn::Error::new(proc_macro2::Span::call_site(), "invalid item")
            }));
        }
    };
    if let Some(retry) = func.attrs.iter().find(|a| item::is_attr(a, "retry")) {
        // After the existing attributes, so `#[retry]` expands first and sees it; reached
        // where `#[retry(crate = ...)]` says the runtime is.
        let runtime = match &retry.meta {
            syn::Meta::List(list) => {
                args::parse(list.tokens.clone(), &mut errors::Errors::default())
                    .krate()
                    .map(ToTokens::to_token_stream)
            }
            _ => None,
        }
        .unwrap_or_else(|| quote!(::retry_runtime));
        func.attrs
            .push(syn::parse_quote!(#[#runtime::non_idempotent]));
        return Ok(quote!(#func));
    }
    item::strip_key_marks(&mut func.sig);
    func.attrs.push(not_idempotent_doc());
    Ok(quote!(#func))
}

fn not_idempotent_doc() -> syn::Attribute {
    syn::parse_quote! {
        #[doc = "\n\n**Not idempotent**: a repeat would act twice. It is retried only with an idempotency key that every attempt sends."]
    }
}

/// The error, and the function as it was, minus the `#[idempotency_key]` marks that rustc would
/// not know: one error, not a cascade.
fn with_original(error: syn::Error, item: TokenStream2) -> TokenStream2 {
    let errors = error.to_compile_error();
    match syn::parse2::<item::RetryFn>(item.clone()) {
        Ok(mut func) => {
            item::strip_key_marks(&mut func.sig);
            quote!(#errors #func)
        }
        Err(_) => quote!(#errors #item),
    }
}

#[cfg(test)]
mod tests {
    use super::retry_impl;
    use proptest::prelude::*;
    use quote::quote;

    proptest! {
        /// Any arguments, through every stage (parse, validate, expand), sync and async: an
        /// error or a function, never a panic.
        #[test]
        fn any_arguments_expand_or_say_why(
            key in prop::sample::select(
                retry_grammar::KEYS.iter().map(|k| k.name).chain(["colour", "retries"]).collect::<Vec<_>>(),
            ),
            value in prop_oneof![
                ".*".prop_map(|s| format!("{s:?}")),
                "-?[0-9]{1,40}(\\.[0-9]{0,40})?",
                "[a-z_]{1,12}(::[a-z_]{1,8})?",
            ],
            rest in prop_oneof![Just(""), Just(", max = 2"), Just(", base = \"1s\", deadline = \"1ms\"")],
            is_async: bool,
        ) {
            let Ok(args) = format!("{key} = {value}{rest}").parse() else {
                return Ok(());
            };
            let item = if is_async {
                quote!(async fn f() -> Result<(), E> { Ok(()) })
            } else {
                quote!(fn f() -> Result<(), E> { Ok(()) })
            };
            let _ = retry_impl(args, item);
        }

        /// Any tokens as a block's input, and any arguments before a sync or async block: an
        /// error or an expansion, never a panic.
        #[test]
        fn any_block_input_expands_or_says_why(
            text in ".*",
            key in prop::sample::select(
                retry_grammar::KEYS.iter().chain(retry_grammar::BLOCK_KEYS).map(|k| k.name).collect::<Vec<_>>(),
            ),
            value in prop_oneof![Just(""), Just(" = 2"), Just(" = \"1s\""), Just(" = f")],
            body in prop_oneof![Just("=> { Ok(()) }"), Just("=> async { Ok(()) }"), Just("=> async move { x }"), Just("{ }"), Just("=>"), Just("=> f()")],
        ) {
            if let Ok(tokens) = text.parse() {
                let _ = crate::block::retry_block(tokens);
            }
            if let Ok(tokens) = format!("{key}{value} {body}").parse() {
                let _ = crate::block::retry_block(tokens);
            }
        }
    }
}
