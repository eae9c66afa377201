//! Prints the [`Plan`]: the signature as written, and a body that loops over attempts.

use crate::args::Args;
use crate::item;
use crate::validate::Plan;
use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use retry_grammar::{self as grammar, Backoff, Jitter, KEYS, Kind, Pass, Setting};
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
///     use ::retry_runtime::__private as __retry_rt;
///     const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new().max(3).base(__retry_rt::Duration::from_secs(1));
///     let mut __retry = __retry_rt::Shape::<Result<Coverage, ContractError>>::new()
///         .start(&__RETRY_POLICY, "check", |e| __retry_rt::is_transient(e), __retry_rt::ASYNC)
///         .notify(log_retry);
///     let __retry_faults = __retry.probe().maker();
///     __retry = __retry.faults(__retry_faults);
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
/// The runtime is named once, in the `use` (`crate = path` replaces `::retry_runtime`), which
/// also brings the `start` of an error type without `Debug` into scope: Rust picks the inherent
/// `start` when the error type has `Debug`, that one otherwise, so the error is logged with
/// `Debug` or by its type name without a bound on the function. The `Shape` carries the return
/// type, so that the closure or `async` block infers what `?` and `return` in the body convert
/// to. The `Probe` finds out, where the error type is known, whether an injected fault can be
/// made into it (`From<retry_runtime::faults::Injected>`, with the runtime's `faults` feature),
/// without a bound on the function; without the feature, it and `faults` are nothing. With an
/// async `fallback`, the `Break` arm is `return __retry_rt::finish(__retry_result).await`.
/// A sync function runs each attempt as `__retry.attempt(|| { body })` and pauses with
/// `__retry.pause_blocking()`. A function with a key parameter lends it to every attempt (and
/// through its outcome to the fallback): `__retry.key(&key).run(...)`. `next` takes the loop
/// state by value and gives it back for the next attempt, so
/// that the compiler can keep it in registers.
pub(crate) fn expand(plan: Plan) -> TokenStream {
    // `crate = path`, or the runtime's own name.
    let runtime = match plan.args.krate() {
        Some(path) => path.to_token_stream(),
        None => quote!(::retry_runtime),
    };
    let state = local("__retry");
    let outcome = local("__retry_outcome");
    let result = local("__retry_result");
    let next = local("__retry_next");
    let func = &plan.func;
    let body = &func.body;
    let output = &plan.output;
    let args = &plan.args;
    let is_async = func.sig.asyncness.is_some();

    let (policy_item, policy_ref, named) = policy_binding(args);
    let classify = match args.expr(&grammar::ON) {
        Some(on) => quote!(#on),
        // Every token located at the error type, so a missing `Transient` impl is reported
        // there rather than on the whole attribute; the macro's own context is kept, so lints
        // (clippy's `redundant_closure`) know the code is generated.
        None => match item::feature_classifier(&func.sig.output) {
            // A client's error type that a feature of the runtime classifies: the same, but
            // with the feature off the error names the feature to turn on.
            Some(classify) => {
                let classify = Ident::new(classify, Span::call_site());
                quote_spanned! {at(&plan.error_type_tokens)=>
                    |__retry_error| __retry_rt::by_feature::#classify(__retry_error)
                }
            }
            None => quote_spanned! {at(&plan.error_type_tokens)=>
                |__retry_error| __retry_rt::is_transient(__retry_error)
            },
        },
    };
    let name = Literal::string(&func.sig.ident.unraw().to_string());
    // Located at `on`'s value if given, so a classifier that returns neither `bool` nor
    // `Verdict` is reported there.
    let start_span = args
        .expr(&grammar::ON)
        .map_or_else(Span::call_site, |on| at(&on.to_token_stream()));
    let start = Ident::new("start", start_span);
    let timer = timer(is_async, args);
    let builder = quote_spanned!(start_span=>
        __retry_rt::Shape::<#output>::new().#start(#policy_ref, #name, #classify, #timer));
    let mut builder = pass_through(
        args,
        builder,
        &quote!(__retry_rt::Shape::<#output>::new()),
        is_async,
    );
    builder.extend(named);
    // A function with an idempotency key lends it to each attempt (and through the attempt's
    // outcome to its fallback): `__retry.key(&key).run(...)`. Located at the parameter's type
    // (past any `&`), so that a type without `Display` is reported there.
    let attempt_state = match &plan.key {
        Some(key) => {
            let at = at(&item::referent(&key.ty).to_token_stream());
            let mut name = key.name.clone();
            name.set_span(at);
            // Past the parameter's own references (`&*key` for `key: &str`), so that the runtime
            // lends the key's type itself, which must borrow nothing.
            let derefs = (0..item::references(&key.ty)).map(|_| quote_spanned!(at=> *));
            quote_spanned!(at=> #state.key(&#(#derefs)*#name))
        }
        None => quote!(#state),
    };
    // `hedge = ...`: the function's `Hedge`, a `static` that keeps its observed latency.
    let mut hedge_item = TokenStream::new();

    let (attempt, sleep) = if is_async {
        // The `if false { return ... }` fixes the `async` block's output type before its body,
        // so that the body's tail coerces (`Ok(&self.name)` as `Result<&str, E>`) as it would
        // in the function itself. The body's braces take the macro's context (keeping their
        // location), or a one-line body `{ Ok(x) }` would draw `unused_braces`.
        let mut body = body.clone();
        body.set_span(Span::call_site().located_at(body.span()));
        let output_type = quote!(if false { return __retry_rt::output_type::<#output>(); });
        let attempt = match hedge_static(args) {
            // Each copy of a hedged attempt is a new `async` block; `run_hedged` times each one
            // itself with `timeout`.
            Some(hedge) => {
                hedge_item = hedge;
                quote!(#attempt_state.run_hedged(&__RETRY_HEDGE, || async { #output_type #body }).await)
            }
            None => {
                let run = if args.accepted(&grammar::TIMEOUT).is_some()
                    || args.accepted(&grammar::GATE).is_some()
                {
                    quote!(run_timed)
                } else {
                    quote!(run)
                };
                quote!(#attempt_state.#run(async { #output_type #body }).await)
            }
        };
        (attempt, quote!(#state.pause().await))
    } else {
        (
            quote!(#attempt_state.attempt(|| #body)),
            quote!(#state.pause_blocking()),
        )
    };
    // An async fallback or `on_give_up` is awaited when the loop ends (a sync one is wrapped in a
    // ready future).
    let has_fallback = args.accepted(&grammar::FALLBACK).is_some()
        || KEYS
            .iter()
            .any(|key| key.name == "on_give_up" && args.accepted(key).is_some());
    let decision = quote!(#state.next(#outcome));
    let finish = if is_async && has_fallback {
        quote!(__retry_rt::finish(#result).await)
    } else {
        quote!(#result)
    };
    let attrs = &func.attrs;
    let vis = &func.vis;
    let sig = &func.sig;
    let mut loop_body = Group::new(
        Delimiter::Brace,
        quote! {
            use #runtime::__private as __retry_rt;
            #policy_item
            #hedge_item
            let mut #state = #builder;
            // Fault injection's probe: `E::from(Injected)` if the error type has it and the
            // runtime's `faults` feature is on, else nothing (`retry_runtime::faults::Probe`).
            // Made from the state, whose `T` may still be inferred (an `impl Trait` output).
            let __retry_faults = #state.probe().maker();
            #state = #state.faults(__retry_faults);
            loop {
                let #outcome = #attempt;
                #[allow(unreachable_code)]
                {
                    #state = match #decision {
                        __retry_rt::ControlFlow::Break(#result) => return #finish,
                        __retry_rt::ControlFlow::Continue(#next) => #next,
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

/// The timer the loop starts with: `ASYNC` (tokio's) for an async function or block
/// without `sleep`, `Unset` otherwise (a sync loop, whose pauses block, or one whose `sleep`
/// builder names the timer next).
pub(crate) fn timer(is_async: bool, args: &Args) -> TokenStream {
    if is_async && args.accepted(&grammar::SLEEP).is_none() {
        quote!(__retry_rt::ASYNC)
    } else {
        quote!(__retry_rt::Unset)
    }
}

/// The macro's own span context at the location of `tokens`: errors point at the user's
/// tokens, while lints still see generated code.
pub(crate) fn at(tokens: &TokenStream) -> Span {
    Span::call_site().located_at(span_of(tokens))
}

/// A generated local that the user's body cannot see or shadow.
pub(crate) fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// The type a reference points to (through any number of `&`), else the type itself.
fn span_of(tokens: &TokenStream) -> Span {
    tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |t| t.span())
}

/// Input: the builder so far (`Shape::<R>::new().start(...)`) and `notify = log_retry,
/// timeout = "2s", budget = BUDGET, nested = retry`. Output: the builder with
/// `.timeout(__retry_rt::Duration::from_secs(2)).notify(log_retry).budget(&BUDGET)
/// .nested_retry()`, one builder call per pass-through key given, in the table's order, each
/// located at its value so that an unmet bound of the builder (`E: From<Elapsed>` for
/// `timeout`, `E: From<CircuitOpen>` for `breaker`) is reported there. A fallback named by its
/// path wraps the builder so far instead (see [`fallback`]).
pub(crate) fn pass_through(
    args: &Args,
    mut builder: TokenStream,
    shape: &TokenStream,
    is_async: bool,
) -> TokenStream {
    for key in KEYS {
        let Some((arg, setting)) = args.accepted(key) else {
            continue;
        };
        // `sleep`'s bound is required again by `pause()`, at the attribute; at the same place,
        // rustc reports it once.
        let span = if key.is(&grammar::SLEEP) {
            Span::call_site()
        } else {
            at(&arg.value.to_token_stream())
        };
        let value = || match (setting, &arg.value) {
            (Setting::Expr, Some(expr)) => expr.to_token_stream(),
            (setting, _) => setting_tokens(setting),
        };
        match key.pass {
            Pass::Value if key.is(&grammar::FALLBACK) => {
                builder = fallback(builder, shape, value(), span, is_async);
            }
            // A sync loop cannot await a hook: `notify_sync` and `on_give_up_sync` say so.
            Pass::Value if !is_async && matches!(key.name, "notify" | "on_give_up") => {
                let name = Ident::new(&format!("{}_sync", key.name), span);
                let value = value();
                builder.extend(quote_spanned!(span=> .#name(#value)));
            }
            Pass::Value => {
                let (name, value) = (Ident::new(key.name, span), value());
                builder.extend(quote_spanned!(span=> .#name(#value)));
            }
            Pass::Ref => {
                let (name, value) = (Ident::new(key.name, span), value());
                builder.extend(quote_spanned!(span=> .#name(&#value)));
            }
            Pass::Switch(name) => {
                let on = matches!((key.kind, setting), (Kind::Words([first, ..]), Setting::Word(word)) if first == word);
                if on {
                    let name = Ident::new(name, span);
                    builder.extend(quote_spanned!(span=> .#name()));
                }
            }
            Pass::Policy(_) | Pass::Macro => {}
        }
    }
    builder
}

/// Input: the builder so far and `fallback = f`. Output: for a closure,
/// `builder.fallback(|error, why| ...)` (`fallback_sync` in a sync function or block), whose
/// bound gives the closure's parameters their types;
/// for anything else (a path, the usual form), `__retry_rt::Fallback(shape, f).attach(builder)`
/// (`attach_sync` in a sync function or block), every token of the call located at `f`, where
/// `shape` carries the result type (`Shape::<R>::new()`, or a block's `Shape::of(&body)`).
///
/// `attach` reads the fallback's first parameter off `f` and compares it with what the loop
/// gives it (the error, or beside `on_result` the outcome) in a bound of its own, so that a
/// fallback of another shape (`fn(&E, GiveUp)`, the error form beside `on_result`) is one error
/// at `f` that names both types. Through `.fallback(f)`, it was rustc's E0631, which named
/// `retry_runtime::state::Retry::<'p, T, E, O>::fallback` (beside `on_result` a second time, from
/// a check of the macro's own) and suggested a closure with a placeholder (`cached(/* E */, arg1)`).
fn fallback(
    builder: TokenStream,
    shape: &TokenStream,
    f: TokenStream,
    span: Span,
    is_async: bool,
) -> TokenStream {
    let mut tokens = f.clone().into_iter();
    let first = tokens.next();
    let last = tokens.last();
    match (syn::parse2::<syn::ExprClosure>(f.clone()), first) {
        (Err(_), Some(first)) => {
            // The call spans `f`: it starts at `f`'s first token and ends at its last.
            let last = at(&last.unwrap_or_else(|| first.clone()).into());
            let first = at(&first.into());
            let mut receiver = Group::new(Delimiter::Parenthesis, quote!(#shape, #f));
            receiver.set_span(last);
            let mut loop_ = Group::new(Delimiter::Parenthesis, builder);
            loop_.set_span(last);
            // A sync loop's fallback is sync: `attach_sync` settles the form first.
            let attach = Ident::new(if is_async { "attach" } else { "attach_sync" }, first);
            quote_spanned!(first=> __retry_rt::Fallback #receiver . #attach #loop_)
        }
        _ => {
            // A sync loop's fallback is sync: `fallback_sync` settles the form first.
            let name = Ident::new(
                if is_async {
                    "fallback"
                } else {
                    "fallback_sync"
                },
                span,
            );
            quote_spanned!(span=> #builder .#name(#f))
        }
    }
}

/// Input: `policy = RUNTIME_POLICY`, `policy = "contract-service"` or the timing keys.
/// Output: the items that hold the policy, the `&Policy` the loop starts with, and what the
/// builder ends with:
///
/// - `policy = RUNTIME_POLICY`: `let __retry_policy = RUNTIME_POLICY;`,
///   `__retry_rt::policy_ref(&__retry_policy)`, nothing;
/// - the timing keys: `const __RETRY_POLICY: Policy = ...;`, `&__RETRY_POLICY`, nothing;
/// - `policy = "contract-service"` (the timing keys beside it are the default): the same `const`
///   and `let __retry_named = __retry_rt::named("contract-service");`, which the call holds for
///   all its attempts, `__retry_rt::named_policy(&__retry_named, &__RETRY_POLICY)`, and
///   `.named(&__retry_named)` (the name's budget and breaker).
///
/// Shared by the attribute and `retry_block!`.
pub(crate) fn policy_binding(args: &Args) -> (TokenStream, TokenStream, TokenStream) {
    let policy_name = Ident::new("__RETRY_POLICY", Span::call_site());
    let written = policy_expr(args);
    let written = quote!(const #policy_name: __retry_rt::Policy = #written;);
    match (args.accepted(&grammar::POLICY), args.expr(&grammar::POLICY)) {
        (Some((_, Setting::Name)), Some(name)) => {
            let named = local("__retry_named");
            (
                quote!(#written let #named = __retry_rt::named(#name);),
                quote!(__retry_rt::named_policy(&#named, &#policy_name)),
                quote!(.named(&#named)),
            )
        }
        // Located at the expression, so a value that is not a `Policy` is reported there.
        (_, Some(expr)) => {
            let policy = local("__retry_policy");
            (
                quote!(let #policy = #expr;),
                quote_spanned!(at(&expr.to_token_stream())=> __retry_rt::policy_ref(&#policy)),
                TokenStream::new(),
            )
        }
        (_, None) => (written, quote!(&#policy_name), TokenStream::new()),
    }
}

/// Input: `hedge = "50ms", max_hedges = 2`. Output: `static __RETRY_HEDGE: __retry_rt::Hedge =
/// __retry_rt::Hedge::after(__retry_rt::Duration::from_millis(50)).max_hedges(2);`
/// (`Hedge::percentile(95)` for `hedge = "p95"`); `None` without `hedge`.
fn hedge_static(args: &Args) -> Option<TokenStream> {
    let (arg, setting) = args.accepted(&grammar::HEDGE)?;
    let span = at(&arg.value.to_token_stream());
    let hedge = match setting {
        Setting::Percentile(p) => {
            let p = Literal::f64_unsuffixed(p);
            quote_spanned!(span=> __retry_rt::Hedge::percentile(#p))
        }
        setting => {
            let delay = setting_tokens(setting);
            quote_spanned!(span=> __retry_rt::Hedge::after(#delay))
        }
    };
    let max = match args.settings.setting(&grammar::MAX_HEDGES) {
        Some(Setting::Count(n)) => {
            let n = Literal::u32_unsuffixed(n);
            quote!(.max_hedges(#n))
        }
        _ => TokenStream::new(),
    };
    Some(quote!(static __RETRY_HEDGE: __retry_rt::Hedge = #hedge #max;))
}

/// `Policy::new()` followed by a builder call for each timing the user wrote, and nothing else.
pub(crate) fn policy_expr(args: &Args) -> TokenStream {
    let timings = args.settings.timings();
    let mut calls = TokenStream::new();
    if let Some(n) = timings.max {
        let n = Literal::u32_unsuffixed(n);
        calls.extend(quote!(.max(#n)));
    }
    if let Some(base) = timings.base {
        let d = duration(base);
        calls.extend(quote!(.base(#d)));
    }
    if let Some(factor) = timings.factor {
        let f = Literal::f64_unsuffixed(factor);
        calls.extend(quote!(.factor(#f)));
    }
    if let Some(backoff) = timings.backoff {
        let form = setting_tokens(Setting::Backoff(backoff));
        calls.extend(quote!(.backoff(#form)));
    }
    if let Some(max_delay) = timings.max_delay {
        let d = duration(max_delay);
        calls.extend(quote!(.max_delay(#d)));
    }
    if let Some(throttle_base) = timings.throttle_base {
        let d = duration(throttle_base);
        calls.extend(quote!(.throttle_base(#d)));
    }
    if let Some(deadline) = timings.deadline {
        let d = duration(deadline);
        calls.extend(quote!(.deadline(#d)));
    }
    if let Some(jitter) = timings.jitter {
        let form = setting_tokens(Setting::Jitter(jitter));
        calls.extend(quote!(.jitter(#form)));
    }
    quote!(__retry_rt::Policy::new() #calls)
}

/// A value the grammar read, as the runtime's type: `__retry_rt::Duration::from_secs(2)`,
/// `__retry_rt::Jitter::Full`, a word's [`Word::value`](grammar::Word::value).
fn setting_tokens(setting: Setting) -> TokenStream {
    match setting {
        Setting::Count(n) => Literal::u32_unsuffixed(n).into_token_stream(),
        Setting::Duration(nanos) => duration(nanos),
        Setting::Factor(f) | Setting::Number(f) => Literal::f64_unsuffixed(f).into_token_stream(),
        Setting::Bool(b) => quote!(#b),
        Setting::Backoff(form) => {
            let variant = match form {
                Backoff::Exponential => quote!(Exponential),
                Backoff::Linear => quote!(Linear),
                Backoff::Constant => quote!(Constant),
            };
            quote!(__retry_rt::Backoff::#variant)
        }
        Setting::Jitter(form) => {
            let variant = match form {
                Jitter::None => quote!(None),
                Jitter::Proportional(f) => {
                    let f = Literal::f64_unsuffixed(f);
                    quote!(Proportional(#f))
                }
                Jitter::Absolute(nanos) => {
                    let d = duration(nanos);
                    quote!(Absolute(#d))
                }
                Jitter::Full => quote!(Full),
                Jitter::Equal => quote!(Equal),
                Jitter::Decorrelated => quote!(Decorrelated),
            };
            quote!(__retry_rt::Jitter::#variant)
        }
        Setting::Percentile(p) => Literal::f64_unsuffixed(p).into_token_stream(),
        Setting::Word(word) => match word.value.parse::<TokenStream>() {
            Ok(value) => quote!(__retry_rt::#value),
            Err(_) => quote!(::core::compile_error!(
                "a word of the key table is not an expression"
            )),
        },
        // An expression is passed as written, by the caller; a flag is read by the macro.
        Setting::Expr | Setting::Flag | Setting::Name => TokenStream::new(),
    }
}

/// The most readable exact constructor: `from_secs(1)` rather than `from_nanos(1000000000)`.
fn duration(nanos: u64) -> TokenStream {
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
        return quote!(__retry_rt::Duration::#constructor);
    }
    let n = Literal::u64_unsuffixed(n);
    quote!(__retry_rt::Duration::#constructor(#n))
}
