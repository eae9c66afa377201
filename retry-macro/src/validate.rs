//! Rules across the arguments and the function; produces the [`Plan`] that `expand` prints.

use crate::args::Args;
use crate::errors::Errors;
use crate::item::{self, RetryFn};
use quote::ToTokens;
use retry_grammar::Context;
use syn::{ReturnType, Type};

/// Everything the expansion needs, already checked.
pub(crate) struct Plan {
    pub func: RetryFn,
    /// The return type with `impl Trait` erased, for the attempt's type annotation.
    pub output: Type,
    /// The error type as written (`E` in `Result<T, E>`, else the whole return type, as in
    /// `io::Result<T>`), whose span the default classifier takes so that a missing `Transient`
    /// impl is reported there.
    pub error_type_tokens: proc_macro2::TokenStream,
    /// The arguments, every one accepted.
    pub args: Args,
    /// The parameter that carries the idempotency key, which each attempt lends to
    /// `attempt().key()`.
    pub key: Option<item::KeyParam>,
}

/// Checks the rules across the arguments and the function, adding to the `errors` that parsing
/// found.
pub(crate) fn plan(args: Args, mut func: RetryFn, mut errors: Errors) -> syn::Result<Plan> {
    // In the order a reader meets them: the arguments, then the function.
    let context = Context {
        is_async: Some(func.sig.asyncness.is_some()),
        block: false,
    };
    for violation in args.settings.check(&context) {
        if let Some(arg) = args.written(violation.key) {
            errors.push(Args::error(arg, &violation.problem));
        }
    }
    check_signature(&func, &mut errors);
    check_idempotency(&func, &mut errors);
    if args.written(&retry_grammar::HEDGE).is_some() {
        check_hedge(&func, &mut errors);
    }
    let key = item::key_param(&func.sig);
    item::strip_key_marks(&mut func.sig);

    let (output, error_type_tokens) = match &func.sig.output {
        ReturnType::Type(_, ty) => (
            item::erase_impl_trait(ty),
            item::error_type(&func.sig.output)
                .unwrap_or(ty)
                .to_token_stream(),
        ),
        ReturnType::Default => (syn::parse_quote!(()), func.sig.ident.to_token_stream()),
    };
    errors.or(Plan {
        func,
        output,
        error_type_tokens,
        args,
        key,
    })
}

fn check_signature(func: &RetryFn, errors: &mut Errors) {
    let sig = &func.sig;
    if let Some(constness) = &sig.constness {
        errors.spanned(
            constness,
            "`#[retry]` cannot go on a `const fn`: its loop pauses between attempts, which constant evaluation cannot do; remove `const`",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.spanned(
            abi,
            "`#[retry]` cannot go on an `extern` function: a foreign caller has no `Result` to retry on; retry in a Rust function and call it from a thin `extern` wrapper",
        );
    }
    match &sig.output {
        ReturnType::Default => errors.spanned(
            &sig.ident,
            format!(
                "`{}` returns nothing, so there is no error to retry on; `#[retry]` needs a function that returns `Result<T, E>`, like `-> Result<(), MyError>`",
                sig.ident
            ),
        ),
        ReturnType::Type(_, ty) if item::result_type(&sig.output).is_none() => {
            let found = ty.to_token_stream().to_string().replace(" < ", "<").replace(" >", ">").replace("< ", "<");
            let hint = if found.starts_with("Option") {
                "; an `Option` cannot say why a value is missing, so return `Result` with an error whose transient variants say when to retry"
            } else {
                ""
            };
            errors.spanned(
                ty,
                format!(
                    "`#[retry]` retries on `Err`, so the function must return `Result<T, E>` or an alias whose name ends in `Result` (like `io::Result<T>`), not `{found}`{hint}"
                ),
            );
        }
        ReturnType::Type(..) => {}
    }
}

fn check_idempotency(func: &RetryFn, errors: &mut Errors) {
    let params = item::key_params(&func.sig);
    if let Some(extra) = params.marked.get(1) {
        errors.spanned(
            extra,
            "only one parameter can be the `#[idempotency_key]`: every attempt sends the same single key; remove the mark from all but one",
        );
    }
    if let Some(key) = params.marked.first().or(params.typed.first()) {
        let referent = item::referent(&key.ty);
        if let Some(borrow) = borrowed_part(referent.to_token_stream()) {
            errors.spanned(
                referent,
                format!(
                    "`{}` cannot be an idempotency key because it borrows (`{borrow}`): each attempt lends the key to `attempt().key()` through a thread-local, which holds only a type that owns its data; take the key as a type that owns its text (`u64`, `Uuid`, `String`, `IdempotencyKey`), or a reference to one (`&str`, `&IdempotencyKey`)",
                    referent.to_token_stream().to_string().replace(" < ", "<").replace(" >", ">").replace("< ", "<").replace(" ,", ",")
                ),
            );
        }
    }
    if let Some(marked) = params.marked.first() {
        if !matches!(&*marked.pat, syn::Pat::Ident(_)) {
            errors.spanned(
                &marked.pat,
                "the `#[idempotency_key]` parameter must be a plain name, so that every attempt can lend it to `attempt().key()`; write a name in place of the pattern, like `order: OrderNumber`, and take the value apart in the body",
            );
        }
    }
    let non_idempotent = func
        .attrs
        .iter()
        .find(|a| item::is_attr(a, "non_idempotent"));
    if non_idempotent.is_none() {
        return;
    }
    let sig = &func.sig;
    if params.marked.is_empty() && params.typed.is_empty() {
        let name = &sig.ident;
        // At the parameter list, where the key is missing.
        errors.push(syn::Error::new(
            sig.paren_token.span.join(),
            format!(
                "`{name}` is `#[non_idempotent]`, so a retry without an idempotency key could act twice (the first call may have succeeded and only its response been lost); add a parameter `key: &IdempotencyKey` that the caller creates once with `IdempotencyKey::new()`, so that every attempt sends the same key, or mark the parameter that already identifies the operation with `#[idempotency_key]` (any type that implements `Display`, like an order number or a `Uuid`)"
            ),
        ));
    } else if params.marked.is_empty() && params.typed.len() > 1 {
        errors.spanned(
            params.typed[1],
            "two parameters are `IdempotencyKey`s; mark the one that every attempt sends with `#[idempotency_key]`",
        );
    }
}

/// `hedge = ...` runs the body several times at once: a `&mut` receiver or parameter cannot be
/// lent to more than one copy.
fn check_hedge(func: &RetryFn, errors: &mut Errors) {
    for input in &func.sig.inputs {
        // `fix`: how a copy gets a handle of its own, in the parameter's own words.
        let (at, what, fix): (proc_macro2::TokenStream, String, String) = match input {
            syn::FnArg::Receiver(receiver)
                if match &receiver.kind {
                    syn::ReceiverKind::Reference(_, _, mutability) => mutability.is_some(),
                    syn::ReceiverKind::Typed(_, ty) => has_mut_reference(ty.to_token_stream()),
                    _ => false,
                } =>
            {
                (
                    receiver.to_token_stream(),
                    format!(
                        "`{}`",
                        receiver
                            .to_token_stream()
                            .to_string()
                            .replace("& ", "&")
                            .replace(" :", ":")
                    ),
                    "take `&self`, and in the body clone the client each copy uses (`let mut client = self.client.clone();`)".to_owned(),
                )
            }
            syn::FnArg::Typed(param) if has_mut_reference(param.ty.to_token_stream()) => {
                let name = param.pat.to_token_stream().to_string().replace(' ', "");
                let shared = param
                    .ty
                    .to_token_stream()
                    .to_string()
                    .replace("& mut ", "&")
                    .replace("&mut ", "&")
                    .replace(" < ", "<")
                    .replace(" >", ">")
                    .replace("& ", "&");
                (
                    param.ty.to_token_stream(),
                    format!("the `&mut` in parameter `{name}`"),
                    format!(
                        "take `{name}: {shared}`, and in the body clone it for each copy (`let mut {name} = {name}.clone();`)"
                    ),
                )
            }
            _ => continue,
        };
        errors.spanned(
            at,
            format!(
                "`hedge` runs the body several times at once, and {what} can be lent to one of them only. For a client that is a cheap `Clone` handle (a tonic client, a `reqwest::Client`, an `Arc`), {fix}; state the copies must share goes behind a shared reference with a `Mutex` or an atomic inside; or remove `hedge`"
            ),
        );
    }
}

/// Whether a type holds a `&mut` anywhere: `&mut T`, `Option<&mut T>`.
fn has_mut_reference(tokens: proc_macro2::TokenStream) -> bool {
    use proc_macro2::TokenTree;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().any(|(i, token)| match token {
        TokenTree::Punct(p) if p.as_char() == '&' => {
            // `&mut` or `&'a mut`.
            let next = match tokens.get(i + 1) {
                Some(TokenTree::Punct(q)) if q.as_char() == '\'' => tokens.get(i + 3),
                next => next,
            };
            matches!(next, Some(TokenTree::Ident(word)) if word == "mut")
        }
        TokenTree::Group(group) => has_mut_reference(group.stream()),
        _ => false,
    })
}

/// The first lifetime other than `'static` in a key's type (`'_` in `Cow<'_, str>`), or `impl`
/// for an `impl Trait` without `+ 'static`: a type the attempt context cannot hold.
fn borrowed_part(tokens: proc_macro2::TokenStream) -> Option<String> {
    use proc_macro2::TokenTree;
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut is_impl = false;
    let mut has_static = false;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Punct(p) if p.as_char() == '\'' => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    if name == "static" {
                        has_static = true;
                    } else {
                        return Some(format!("'{name}"));
                    }
                }
            }
            TokenTree::Ident(word) if word == "impl" => is_impl = true,
            TokenTree::Group(group) => {
                if let Some(found) = borrowed_part(group.stream()) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    (is_impl && !has_static).then(|| "impl".to_owned())
}
