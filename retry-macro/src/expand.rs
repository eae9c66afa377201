//! Prints the [`Plan`]: the signature as written, and a body that loops over attempts.

use crate::args::{BackoffForm, JitterForm};
use crate::validate::{Plan, PolicySpec};
use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream};
use quote::{quote, quote_spanned};

/// Input:
///
/// ```text
/// #[retry(max = 3, base = "1s")]
/// async fn check(claim: &Claim) -> Result<Coverage, ContractError> { body }
/// ```
///
/// Output:
///
/// ```text
/// async fn check(claim: &Claim) -> Result<Coverage, ContractError> {
///     const __RETRY_POLICY: Policy = Policy::new().max_retries(3).base(Duration::from_secs(1));
///     let mut __retry = Retry::start_async(&__RETRY_POLICY);
///     loop {
///         let __retry_outcome = async { if false { return output_type::<Result<..>>(); } { body } }.await;
///         match __retry.next(__retry_outcome, is_transient) {
///             ControlFlow::Break(__retry_result) => return __retry_result,
///             ControlFlow::Continue(__retry_pause) => sleep(__retry_pause).await,
///         }
///     }
/// }
/// ```
///
/// A sync function runs each attempt as `attempt(|| -> R { body })` and pauses with
/// `sleep_blocking(__retry_pause)`.
pub(crate) fn expand(plan: Plan) -> TokenStream {
    let Plan {
        func,
        output,
        error_type_tokens,
        policy,
        on,
    } = plan;
    let rt = quote!(::retry_runtime::__private);
    let policy_name = Ident::new("__RETRY_POLICY", Span::call_site());
    let state = local("__retry");
    let outcome = local("__retry_outcome");
    let result = local("__retry_result");
    let pause = local("__retry_pause");
    let policy_value = policy_expr(&policy);
    let body = &func.body;
    let classify = match on {
        Some(on) => quote!(#on),
        // Every token located at the error type, so a missing `Transient` impl is reported
        // there rather than on the whole attribute; the macro's own context is kept, so lints
        // (clippy's `redundant_closure`) know the code is generated. A closure rather than the
        // bare function, so that the bound is checked once, inside it, and not again by
        // `next`'s `FnOnce` bound.
        None => quote_spanned! {Span::call_site().located_at(span_of(&error_type_tokens))=>
            |__retry_error| ::retry_runtime::__private::is_transient(__retry_error)
        },
    };
    let (start, attempt, sleep) = if func.sig.asyncness.is_some() {
        // As the tail of the `async` block, a one-line body `{ Ok(x) }` would draw rustc's
        // `unused_braces` on the user's code; braces with the macro's hygiene (and the body's
        // location, for messages) are exempt.
        let mut body = body.clone();
        body.set_span(Span::call_site().located_at(body.span()));
        (
            quote!(#rt::Retry::start_async(&#policy_name)),
            quote!(async { if false { return #rt::output_type::<#output>(); } #body }.await),
            quote!(#rt::sleep(#pause).await),
        )
    } else {
        (
            quote!(#rt::Retry::start(&#policy_name)),
            quote!(#rt::attempt(|| -> #output #body)),
            quote!(#rt::sleep_blocking(#pause)),
        )
    };
    let attrs = &func.attrs;
    let vis = &func.vis;
    let sig = &func.sig;
    let mut loop_body = Group::new(
        Delimiter::Brace,
        quote! {
            const #policy_name: #rt::Policy = #policy_value;
            let mut #state = #start;
            loop {
                let #outcome = #attempt;
                #[allow(unreachable_code)]
                match #state.next(#outcome, #classify) {
                    #rt::ControlFlow::Break(#result) => return #result,
                    #rt::ControlFlow::Continue(#pause) => #sleep,
                }
            }
        },
    );
    // The function's braces keep the user's span, so that rustc sees the item as written by
    // hand: with the macro's span, an unused function drew no `dead_code` warning and an
    // `unsafe fn` escaped `unsafe_code`.
    loop_body.set_span(func.body.span());
    quote! {
        #(#attrs)*
        #vis #sig #loop_body
    }
}

/// A generated local that the user's body cannot see or shadow.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

fn span_of(tokens: &TokenStream) -> Span {
    tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

/// `Policy::new()` followed by a builder call for each value the user wrote, and nothing else.
fn policy_expr(spec: &PolicySpec) -> TokenStream {
    let rt = quote!(::retry_runtime::__private);
    let mut calls = TokenStream::new();
    if let Some(n) = spec.max_retries {
        let n = Literal::u32_unsuffixed(n);
        calls.extend(quote!(.max_retries(#n)));
    }
    if let Some(base) = spec.base {
        let d = duration(base);
        calls.extend(quote!(.base(#d)));
    }
    if let Some(factor) = spec.factor {
        let f = Literal::f64_unsuffixed(factor);
        calls.extend(quote!(.factor(#f)));
    }
    if let Some(backoff) = spec.backoff {
        let form = match backoff {
            BackoffForm::Exponential => quote!(Exponential),
            BackoffForm::Linear => quote!(Linear),
            BackoffForm::Constant => quote!(Constant),
        };
        calls.extend(quote!(.backoff(#rt::Backoff::#form)));
    }
    if let Some(max_delay) = spec.max_delay {
        let d = duration(max_delay);
        calls.extend(quote!(.max_delay(#d)));
    }
    if let Some(deadline) = spec.deadline {
        let d = duration(deadline);
        calls.extend(quote!(.deadline(#d)));
    }
    if let Some(jitter) = spec.jitter {
        let form = match jitter {
            JitterForm::None => quote!(None),
            JitterForm::Proportional(f) => {
                let f = Literal::f64_unsuffixed(f);
                quote!(Proportional(#f))
            }
            JitterForm::Absolute(nanos) => {
                let d = duration(nanos);
                quote!(Absolute(#d))
            }
            JitterForm::Full => quote!(Full),
            JitterForm::Equal => quote!(Equal),
            JitterForm::Decorrelated => quote!(Decorrelated),
        };
        calls.extend(quote!(.jitter(#rt::Jitter::#form)));
    }
    quote!(#rt::Policy::new() #calls)
}

/// The most readable exact constructor: `from_secs(1)` rather than `from_nanos(1000000000)`.
fn duration(nanos: u64) -> TokenStream {
    let rt = quote!(::retry_runtime::__private);
    let (constructor, n) = if nanos == 0 {
        ("ZERO", 0)
    } else if nanos % 1_000_000_000 == 0 {
        ("from_secs", nanos / 1_000_000_000)
    } else if nanos % 1_000_000 == 0 {
        ("from_millis", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        ("from_micros", nanos / 1_000)
    } else {
        ("from_nanos", nanos)
    };
    let constructor = Ident::new(constructor, Span::call_site());
    if nanos == 0 {
        return quote!(#rt::Duration::#constructor);
    }
    let n = Literal::u64_unsuffixed(n);
    quote!(#rt::Duration::#constructor(#n))
}
