//! `retry_block!(arguments => { body })` and `retry_block!(arguments => async { body })`: the
//! attribute's arguments, read by the same grammar and checked by the same rules, for a block
//! that borrows its surroundings; and the same loop over the runtime's state.

use crate::args::{self, Args};
use crate::errors::Errors;
use crate::expand::{at, local, pass_through, policy_binding, timer};
use proc_macro2::{Delimiter, Group, Ident, Spacing, Span, TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use retry_grammar::{self as grammar, Context, Scope};

/// The block after `=>`, as written.
enum Body {
    /// `{ ... }`.
    Sync(Group),
    /// `async { ... }` or `async move { ... }`.
    Async {
        async_token: Ident,
        move_token: Option<Ident>,
        group: Group,
    },
}

impl Body {
    fn is_async(&self) -> bool {
        matches!(self, Body::Async { .. })
    }

    fn group(&self) -> &Group {
        match self {
            Body::Sync(group) | Body::Async { group, .. } => group,
        }
    }

    /// The block as written: what is emitted beside an error, so that the code inside it is
    /// still checked and seen by the IDE. A sync block runs as a closure, as it would in the
    /// loop (`?` and `return` end it there too).
    fn as_written(&self) -> TokenStream {
        match self {
            Body::Sync(group) => quote!((|| #group)()),
            Body::Async {
                async_token,
                move_token,
                group,
            } => quote!(#async_token #move_token #group),
        }
    }
}

/// Input: `max = 3, on = is_transient => async { client.coverage(&claim).await }`.
/// Output: an `async` block that loops over the runtime's state (see [`expand`]), or the errors
/// beside the block as written.
pub(crate) fn retry_block(input: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let (arguments, body) = split(input, &mut errors);
    let args = args::parse_in(Scope::Block, arguments, &mut errors);
    let Some(body) = body else {
        return errors.finish().err().map_or_else(TokenStream::new, |e| {
            let e = e.to_compile_error();
            quote!({ #e })
        });
    };
    let context = Context {
        is_async: Some(body.is_async()),
        block: true,
    };
    for violation in args.settings.check(&context) {
        if let Some(arg) = args.written(violation.key) {
            errors.push(Args::error(arg, &violation.problem));
        }
    }
    if let Some(mark) = args.written(&grammar::NON_IDEMPOTENT) {
        if args.written(&grammar::KEY).is_none() {
            errors.spanned(
                &mark.ident,
                "this block is `non_idempotent`, so a retry without an idempotency key could act twice (the first call may have succeeded and only its response been lost); add `key = ...`, the value every attempt sends: an `IdempotencyKey` created once before the block with `IdempotencyKey::new()`, or what already identifies the operation (an order number, a `Uuid`; any type that implements `Display` and owns its data)",
            );
        }
    }
    // The name is a label of the metrics' series, which must not change from one run to the
    // next: a string literal, as a function's name is.
    if let Some(name) = args.expr(&grammar::NAME) {
        if !matches!(
            name,
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(_),
                ..
            })
        ) {
            errors.spanned(
                name,
                "`name` takes a string literal, `name = \"coverage_lookup\"`: it is the block's name in the events and the `function` label of its metrics, fixed when the crate is compiled so that its series keep their name",
            );
        }
    }
    // Hedging starts copies of the body beside each other; a block's body is one closure that
    // may borrow its surroundings mutably, which copies could not share.
    for key in [&grammar::HEDGE, &grammar::MAX_HEDGES] {
        if let Some(arg) = args.written(key) {
            errors.spanned(
                &arg.ident,
                format_args!(
                    "`{0}` is not available on `retry_block!`: hedging runs the body several times at once, and a block may borrow its surroundings mutably; hedge a closure with `Retrier::new(&policy).run_hedged(&hedge, || async {{ ... }})`, or move the block into an `async fn` that takes its inputs by shared reference and write `#[retry({0} = ...)]` on it",
                    key.name
                ),
            );
        }
    }
    match errors.finish() {
        Ok(()) => expand(&args, &body),
        Err(error) => {
            let error = error.to_compile_error();
            let written = body.as_written();
            quote!({ #error #written })
        }
    }
}

/// The arguments before the first `=>` outside any brackets, and the block after it.
fn split(input: TokenStream, errors: &mut Errors) -> (TokenStream, Option<Body>) {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let arrow = tokens.windows(2).position(|pair| match pair {
        [TokenTree::Punct(eq), TokenTree::Punct(gt)] => {
            eq.as_char() == '=' && eq.spacing() == Spacing::Joint && gt.as_char() == '>'
        }
        _ => false,
    });
    let Some(arrow) = arrow else {
        // Without `=>`: the block is taken to be the last token (after an optional `async` and
        // `move`), so that the arguments before it are still checked in the same compile.
        let (body, start) = last_block(&tokens);
        let at = match &body {
            Some(body) => body.group().span_open(),
            None => tokens.last().map_or_else(Span::call_site, TokenTree::span),
        };
        errors.push(syn::Error::new(
            at,
            "`retry_block!` needs `=>` between its arguments and the block to retry: `retry_block!(max = 3 => { ... })`, `retry_block!(max = 3 => async { ... }).await`, or `retry_block!(=> { ... })` with the defaults",
        ));
        let mut arguments = &tokens[..start];
        if let [init @ .., TokenTree::Punct(comma)] = arguments {
            if comma.as_char() == ',' {
                arguments = init;
            }
        }
        return (arguments.iter().cloned().collect(), body);
    };
    let arguments: TokenStream = tokens[..arrow].iter().cloned().collect();
    let rest = &tokens[arrow + 2..];
    let body = match last_block(rest) {
        (Some(body), 0) => Some(body),
        _ => None,
    };
    if body.is_none() {
        let after: TokenStream = rest.iter().cloned().collect();
        let message = "expected the block to retry after `=>`: `{ ... }`, or `async { ... }` for an async one (then awaited: `retry_block!(... => async { ... }).await`); to retry a call, write it in braces: `=> { read_config(&path) }`";
        if after.is_empty() {
            errors.push(syn::Error::new(tokens[arrow + 1].span(), message));
        } else {
            errors.spanned(after, message);
        }
    }
    (arguments, body)
}

/// The block at the end of `tokens` (`{ ... }`, `async { ... }`, `async move { ... }`), and
/// where it starts; `(None, tokens.len())` if they end otherwise.
fn last_block(tokens: &[TokenTree]) -> (Option<Body>, usize) {
    let n = tokens.len();
    let body = |async_token: &Ident, move_token: Option<&Ident>, group: &Group| Body::Async {
        async_token: async_token.clone(),
        move_token: move_token.cloned(),
        group: group.clone(),
    };
    match tokens {
        [.., TokenTree::Group(g)] if g.delimiter() != Delimiter::Brace => (None, n),
        [
            ..,
            TokenTree::Ident(a),
            TokenTree::Ident(m),
            TokenTree::Group(g),
        ] if a == "async" && m == "move" => (Some(body(a, Some(m), g)), n - 3),
        [.., TokenTree::Ident(a), TokenTree::Group(g)] if a == "async" => {
            (Some(body(a, None, g)), n - 2)
        }
        [.., TokenTree::Group(g)] => (Some(Body::Sync(g.clone())), n - 1),
        _ => (None, n),
    }
}

/// Input: `max = 3, base = "1s", on = is_transient => { read_config(&path) }`.
///
/// Output:
///
/// ```text
/// {
///     use ::retry_runtime::__private as __retry_rt;
///     const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new().max(3).base(..);
///     let mut __retry_body = || { read_config(&path) };
///     each_attempt_runs_the_block_again_so_clone_what_it_moves(&__retry_body); // FnMut
///     let mut __retry = __retry_rt::Shape::of(&__retry_body)
///         .start(&__RETRY_POLICY, "my_app::config:12", is_transient, __retry_rt::Unset);
///     let __retry_faults = __retry.probe().maker();
///     __retry = __retry.faults(__retry_faults);
///     loop {
///         let __retry_outcome = __retry.attempt(&mut __retry_body);
///         #[allow(unreachable_code)]
///         {
///             __retry = match __retry.next(__retry_outcome) {
///                 ControlFlow::Break(__retry_result) => break __retry_result,
///                 ControlFlow::Continue(__retry_next) => __retry_next,
///             };
///             __retry.pause_blocking();
///         }
///     }
/// }
/// ```
///
/// The block is bound to a closure first, so that its output type, inferred from the body, is
/// known when the state starts (`Shape::of` reads it), as the return type is for the
/// attribute. An async block is an `async` block around the same loop, its body an async
/// closure (`async || { ... }`, which lends its captures to each attempt's future; the shape
/// `Shape::of_async`, the timer `__retry_rt::ASYNC`), each attempt
/// `__retry.run(__retry_body()).await` and each pause `__retry.pause().await`. With
/// `key = k`, `let __retry_key = &(k);` before the closure and `__retry.key(__retry_key).run(...)`,
/// as the attribute lends a key parameter.
fn expand(args: &Args, body: &Body) -> TokenStream {
    let runtime = match args.krate() {
        Some(path) => path.to_token_stream(),
        None => quote!(::retry_runtime),
    };
    let state = local("__retry");
    let closure = local("__retry_body");
    let key_local = local("__retry_key");
    let outcome = local("__retry_outcome");
    let result = local("__retry_result");
    let next = local("__retry_next");
    let is_async = body.is_async();

    let (policy_item, policy_ref, named) = policy_binding(args);
    let classify = match args.expr(&grammar::ON) {
        Some(on) => quote!(#on),
        None => quote!(|__retry_error| __retry_rt::block_is_transient(__retry_error)),
    };
    let start_span = args
        .expr(&grammar::ON)
        .map_or_else(Span::call_site, |on| at(&on.to_token_stream()));
    let start = Ident::new("start", start_span);
    let shape = if is_async {
        quote!(of_async)
    } else {
        quote!(of)
    };
    let timer = timer(is_async, args);
    // `name = "..."`, or else its module and line, which `cargo expand` and a log show alike
    // wherever the crate is checked out (and which an edit above the block changes).
    let name = match args.expr(&grammar::NAME) {
        Some(name) => {
            let at = at(&name.to_token_stream());
            quote_spanned!(at=> #name)
        }
        None => quote!(::core::concat!(
            ::core::module_path!(),
            ":",
            ::core::line!()
        )),
    };
    let builder = quote_spanned!(start_span=>
        __retry_rt::Shape::#shape(&#closure).#start(#policy_ref, #name, #classify, #timer));
    let mut builder = pass_through(
        args,
        builder,
        &quote!(__retry_rt::Shape::#shape(&#closure)),
        is_async,
    );
    builder.extend(named);
    let (key_item, attempt_state) = match args.expr(&grammar::KEY) {
        Some(expr) => {
            let at = at(&expr.to_token_stream());
            (
                quote_spanned!(at=> let #key_local = &(#expr);),
                quote_spanned!(at=> #state.key(#key_local)),
            )
        }
        None => (TokenStream::new(), quote!(#state)),
    };
    let group = body.group();
    let (closure_item, attempt, sleep) = match body {
        Body::Async {
            async_token,
            move_token,
            ..
        } => {
            let run = if args.accepted(&grammar::TIMEOUT).is_some()
                || args.accepted(&grammar::GATE).is_some()
            {
                quote!(run_timed)
            } else {
                quote!(run)
            };
            (
                quote!(let mut #closure = #async_token #move_token || #group;),
                quote!(#attempt_state.#run(#closure()).await),
                quote!(#state.pause().await),
            )
        }
        Body::Sync(_) => (
            quote!(let mut #closure = || #group;),
            quote!(#attempt_state.attempt(&mut #closure)),
            quote!(#state.pause_blocking()),
        ),
    };
    // Each attempt runs the block again, so its closure is `FnMut` (`AsyncFnMut`). Asked here,
    // by a function whose name is the reason, so that a block that moves a captured value out
    // (`send(request)` where `send(request.clone())` was meant) gets rustc's E0525, pointing at
    // the variable, "required by a bound in `each_attempt_runs_the_block_again_so_clone_what_
    // it_moves`", and not a bound of the runtime's hidden items.
    let again = Ident::new(
        "each_attempt_runs_the_block_again_so_clone_what_it_moves",
        Span::mixed_site(),
    );
    let again_bound = if is_async {
        quote!(::core::ops::AsyncFnMut() -> __R)
    } else {
        quote!(::core::ops::FnMut() -> __R)
    };
    let again_item = quote!(fn #again<__B: #again_bound, __R>(_: &__B) {});
    let again_check = quote!(#again(&#closure););
    let has_fallback = args.accepted(&grammar::FALLBACK).is_some()
        || grammar::KEYS
            .iter()
            .any(|key| key.name == "on_give_up" && args.accepted(key).is_some());
    let decision = quote!(#state.next(#outcome));
    let finish = if is_async && has_fallback {
        quote!(__retry_rt::finish(#result).await)
    } else {
        quote!(#result)
    };
    let statements = quote! {
        use #runtime::__private as __retry_rt;
        #again_item
        #policy_item
        #key_item
        #closure_item
        #again_check
        let mut #state = #builder;
        // Fault injection's probe, as the attribute's (`expand.rs`).
        let __retry_faults = #state.probe().maker();
        #state = #state.faults(__retry_faults);
        loop {
            let #outcome = #attempt;
            #[allow(unreachable_code)]
            {
                #state = match #decision {
                    __retry_rt::ControlFlow::Break(#result) => break #finish,
                    __retry_rt::ControlFlow::Continue(#next) => #next,
                };
                #sleep;
            }
        }
    };
    if is_async {
        quote!(async { #statements })
    } else {
        quote!({ #statements })
    }
}
