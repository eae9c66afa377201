//! Prints the [`Plan`]: the signature as written, and a body that loops over attempts.

use crate::args::{BackoffForm, JitterForm};
use crate::validate::{Plan, PolicySpec};
use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt;

/// Input:
///
/// ```text
/// #[retry(max = 3, base = "1s", notify = log_retry)]
/// async fn check(claim: &Claim) -> Result<Coverage, ContractError> { body }
/// ```
///
/// Output:
///
/// ```text
/// async fn check(claim: &Claim) -> Result<Coverage, ContractError> {
///     const __RETRY_POLICY: Policy = Policy::new().max(3).base(Duration::from_secs(1));
///     let mut __retry = Retry::<Result<Coverage, ContractError>>::start_async(
///         &__RETRY_POLICY, "check", |e| is_transient(e)).notify(log_retry);
///     loop {
///         let __retry_outcome = __retry.run(async { if false { return output_type::<..>(); } { body } }).await;
///         __retry = match __retry.next(__retry_outcome) {
///             ControlFlow::Break(__retry_result) => return __retry_result,
///             ControlFlow::Continue(__retry_next) => __retry_next,
///         };
///         __retry.pause().await;
///     }
/// }
/// ```
///
/// A sync function runs each attempt as `__retry.attempt(|| { body })` and pauses with
/// `__retry.pause_blocking()`. The return type in the turbofish lets the closure or `async`
/// block infer what `?` and `return` in the body convert to. `next` takes the loop state by
/// value and gives it back for the next attempt, so that the compiler can keep it in registers.
pub(crate) fn expand(plan: Plan) -> TokenStream {
    let rt = quote!(::retry_runtime::__private);
    let policy_name = Ident::new("__RETRY_POLICY", Span::call_site());
    let policy_local = local("__retry_policy");
    let state = local("__retry");
    let outcome = local("__retry_outcome");
    let result = local("__retry_result");
    let next = local("__retry_next");
    let func = &plan.func;
    let body = &func.body;
    let output = &plan.output;
    let is_async = func.sig.asyncness.is_some();

    let (policy_item, policy_ref) = match &plan.policy_expr {
        // Located at the expression, so a value that is not a `Policy` is reported there.
        Some(expr) => (
            quote!(let #policy_local = #expr;),
            quote_spanned!(at(&expr.to_token_stream())=>
                ::retry_runtime::__private::policy_ref(&#policy_local)),
        ),
        None => {
            let value = policy_expr(&plan.policy);
            (
                quote!(const #policy_name: #rt::Policy = #value;),
                quote!(&#policy_name),
            )
        }
    };
    let classify = match &plan.on {
        Some(on) => quote!(#on),
        // Every token located at the error type, so a missing `Transient` impl is reported
        // there rather than on the whole attribute; the macro's own context is kept, so lints
        // (clippy's `redundant_closure`) know the code is generated.
        None => quote_spanned! {at(&plan.error_type_tokens)=>
            |__retry_error| ::retry_runtime::__private::is_transient(__retry_error)
        },
    };
    let name = Literal::string(&func.sig.ident.unraw().to_string());
    // With `sleep = f` the function needs no default timer: `start`, then `.sleep(f)`.
    let start = if is_async && plan.sleep.is_none() {
        "start_async"
    } else {
        "start"
    };
    // Located at `on`'s value if given, so a classifier that returns neither `bool` nor
    // `Verdict` is reported there.
    let start_span = plan
        .on
        .as_ref()
        .map_or_else(Span::call_site, |on| at(&on.to_token_stream()));
    let start = Ident::new(start, start_span);
    let mut builder = quote_spanned!(start_span=>
        ::retry_runtime::__private::Retry::<#output>::#start(#policy_ref, #name, #classify));
    if let Some(f) = &plan.on_result {
        builder.extend(quote!(.on_result(#f)));
    }
    if let Some(f) = &plan.notify {
        builder.extend(quote!(.notify(#f)));
    }
    if let Some(f) = &plan.on_give_up {
        builder.extend(quote!(.on_give_up(#f)));
    }
    if let Some(f) = &plan.sleep {
        builder.extend(quote!(.sleep(#f)));
    }
    if let Some((nanos, tokens)) = &plan.timeout {
        let limit = duration(*nanos);
        // Located at the value, so a missing `From<Elapsed>` is reported there.
        builder.extend(quote_spanned!(at(tokens)=> .timeout(#limit)));
    }
    if let Some(budget) = &plan.budget {
        builder.extend(quote!(.budget(&#budget)));
    }
    if let Some(breaker) = &plan.breaker {
        builder.extend(quote_spanned!(at(&breaker.to_token_stream())=> .breaker(&#breaker)));
    }
    if let Some(key) = &plan.key {
        builder.extend(quote!(.key(&#key)));
    }
    if plan.nested_retry {
        builder.extend(quote!(.nested_retry()));
    }

    let (attempt, sleep) = if is_async {
        // The `if false { return ... }` fixes the `async` block's output type before its body,
        // so that the body's tail coerces (`Ok(&self.name)` as `Result<&str, E>`) as it would
        // in the function itself. The body's braces take the macro's context (keeping their
        // location), or a one-line body `{ Ok(x) }` would draw `unused_braces`.
        let mut body = body.clone();
        body.set_span(Span::call_site().located_at(body.span()));
        let output_type = quote!(if false { return #rt::output_type::<#output>(); });
        (
            if plan.timeout.is_some() {
                quote!(#state.run_timed(async { #output_type #body }).await)
            } else {
                quote!(#state.run(async { #output_type #body }).await)
            },
            quote!(#state.pause().await),
        )
    } else {
        (
            quote!(#state.attempt(|| #body)),
            quote!(#state.pause_blocking()),
        )
    };
    let attrs = &func.attrs;
    let vis = &func.vis;
    let sig = &func.sig;
    let mut loop_body = Group::new(
        Delimiter::Brace,
        quote! {
            #policy_item
            let mut #state = #builder;
            loop {
                let #outcome = #attempt;
                #[allow(unreachable_code)]
                {
                    #state = match #state.next(#outcome) {
                        #rt::ControlFlow::Break(#result) => return #result,
                        #rt::ControlFlow::Continue(#next) => #next,
                    };
                    #sleep;
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

/// The macro's own span context at the location of `tokens`: errors point at the user's
/// tokens, while lints still see generated code.
fn at(tokens: &TokenStream) -> Span {
    Span::call_site().located_at(span_of(tokens))
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
        calls.extend(quote!(.max(#n)));
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
