//! Rules across the arguments and the function; produces the [`Plan`] that `expand` prints.

use crate::args::{Args, BackoffForm, JitterForm, Nested, Setting};
use crate::errors::Errors;
use crate::item::{self, RetryFn};
use quote::ToTokens;
use syn::{Expr, ReturnType, Type};

/// The policy with only the values the user wrote; the runtime's defaults fill the rest.
#[derive(Default)]
pub(crate) struct PolicySpec {
    pub max_retries: Option<u32>,
    pub base: Option<u64>,
    pub factor: Option<f64>,
    pub backoff: Option<BackoffForm>,
    pub max_delay: Option<u64>,
    pub deadline: Option<u64>,
    pub jitter: Option<JitterForm>,
}

/// Everything the expansion needs, already checked.
pub(crate) struct Plan {
    pub func: RetryFn,
    /// The return type with `impl Trait` erased, for the attempt's type annotation.
    pub output: Type,
    /// The error type as written (`E` in `Result<T, E>`, else the whole return type, as in
    /// `io::Result<T>`), whose span the default classifier takes so that a missing `Transient`
    /// impl is reported there.
    pub error_type_tokens: proc_macro2::TokenStream,
    pub policy: PolicySpec,
    /// `policy = expr`, which replaces the literal timings.
    pub policy_expr: Option<Expr>,
    pub on: Option<Expr>,
    pub on_result: Option<Expr>,
    pub notify: Option<Expr>,
    pub on_give_up: Option<Expr>,
    pub sleep: Option<Expr>,
    pub budget: Option<Expr>,
    pub breaker: Option<Expr>,
    /// `timeout`, and the value's tokens for the span of a missing `From<Elapsed>`.
    pub timeout: Option<(u64, proc_macro2::TokenStream)>,
    pub nested_retry: bool,
    /// The parameter that carries the idempotency key, for `attempt().key()`.
    pub key: Option<syn::Ident>,
}

const DEFAULT_BASE: u64 = 1_000_000_000;
const DEFAULT_RETRIES: u32 = 3;

/// Checks the rules across the arguments and the function, adding to the `errors` that parsing
/// found.
pub(crate) fn plan(args: Args, mut func: RetryFn, mut errors: Errors) -> syn::Result<Plan> {
    // In the order a reader meets them: the arguments, then the function.
    let policy = policy(&args, &mut errors);
    check_signature(&func, &mut errors);
    check_idempotency(&func, &mut errors);
    check_function_kind(&args, &func, &mut errors);
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
    let value = |setting: Option<Setting<Expr>>| setting.map(|s| s.value);
    errors.or(Plan {
        func,
        output,
        error_type_tokens,
        policy,
        policy_expr: value(args.policy),
        on: value(args.on),
        on_result: value(args.on_result),
        notify: value(args.notify),
        on_give_up: value(args.on_give_up),
        sleep: value(args.sleep),
        budget: value(args.budget),
        breaker: value(args.breaker),
        timeout: args.timeout.map(|s| (s.value, s.tokens)),
        nested_retry: args.nested.is_some_and(|s| s.value == Nested::Retry),
        key,
    })
}

/// Arguments that only make sense for async functions, and `policy` against literal timings.
fn check_function_kind(args: &Args, func: &RetryFn, errors: &mut Errors) {
    if func.sig.asyncness.is_none() {
        if let Some(timeout) = args.written("timeout") {
            errors.spanned(
                timeout,
                "`timeout` needs an `async fn`: a blocking call cannot be cut off from outside; give the call its own timeout (a socket read timeout, a client timeout), or make the function `async`",
            );
        }
        if let Some(sleep) = args.written("sleep") {
            errors.spanned(
                sleep,
                "`sleep` is for `async fn`s; a sync function pauses with `std::thread::sleep`, so remove `sleep`",
            );
        }
    }
    if let Some(policy) = &args.policy {
        for key in args.timing_keys() {
            errors.spanned(
                key,
                format!(
                    "`{key}` cannot be combined with `policy = {}`: the policy sets every timing; set it in the policy (`Policy::new().{}(...)`), or remove `policy`",
                    policy.tokens,
                    builder_of(&key.to_string())
                ),
            );
        }
    }
}

fn builder_of(key: &str) -> &str {
    match key {
        "max" | "attempts" => "max",
        "base" => "base",
        "factor" => "factor",
        "backoff" => "backoff",
        "max_delay" => "max_delay",
        "deadline" => "deadline",
        _ => "jitter",
    }
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
                "`{name}` is `#[non_idempotent]`, so a retry without an idempotency key could act twice (the first call may have succeeded and only its response been lost); add a parameter `key: &IdempotencyKey` that the caller creates once with `IdempotencyKey::new()`, so that every attempt sends the same key, or mark the parameter that already carries a key with `#[idempotency_key]`"
            ),
        ));
    } else if params.marked.is_empty() && params.typed.len() > 1 {
        errors.spanned(
            params.typed[1],
            "two parameters are `IdempotencyKey`s; mark the one that every attempt sends with `#[idempotency_key]`",
        );
    }
}

fn policy(args: &Args, errors: &mut Errors) -> PolicySpec {
    let mut spec = PolicySpec {
        max_retries: args.max.as_ref().map(|s| s.value),
        base: args.base.as_ref().map(|s| s.value),
        factor: args.factor.as_ref().map(|s| s.value),
        backoff: args.backoff.as_ref().map(|s| s.value),
        max_delay: args.max_delay.as_ref().map(|s| s.value),
        deadline: args.deadline.as_ref().map(|s| s.value),
        jitter: args.jitter.as_ref().map(|s| s.value),
    };
    // A key written with a rejected value has already been reported; the rules below compare
    // only values that were read, never a default standing in for a rejected one.
    match (args.written("max"), args.written("attempts")) {
        (Some(_), Some(attempts)) => {
            let same = match &args.max {
                Some(max) => format!(
                    ": `max = {}` is `attempts = {}`",
                    max.value,
                    u64::from(max.value) + 1
                ),
                None => String::new(),
            };
            errors.spanned(
                attempts,
                format!(
                    "give `max` (retries after the first call) or `attempts` (calls in all), not both{same}"
                ),
            );
        }
        (None, Some(_)) => spec.max_retries = args.attempts.as_ref().map(|s| s.value - 1),
        _ => {}
    }
    let retries = match (args.written("max"), args.written("attempts")) {
        (None, None) => Some(DEFAULT_RETRIES),
        _ => spec.max_retries,
    };
    let base = match (&args.base, args.written("base")) {
        (Some(base), _) => Some((base.value, format!("`base = {}`", base.tokens))),
        (None, None) => Some((DEFAULT_BASE, "`base = \"1s\"` (the default)".to_owned())),
        (None, Some(_)) => None,
    };

    if let (Some(max_delay), Some((base, base_text))) = (&args.max_delay, &base) {
        if max_delay.value < *base {
            errors.spanned(
                &max_delay.tokens,
                format!(
                    "`max_delay = {}` is shorter than {base_text}: no pause may exceed `max_delay`, so not even the first pause could be taken; raise `max_delay` or set a shorter `base`",
                    max_delay.tokens
                ),
            );
        }
    }
    if let (Some(deadline), Some((base, base_text)), Some(retries)) =
        (&args.deadline, &base, retries)
    {
        if retries > 0 && deadline.value < *base {
            errors.spanned(
                &deadline.tokens,
                format!(
                    "`deadline = {}` is shorter than {base_text}: the first pause would already end past the deadline, so no retry could ever happen; raise `deadline`, set a shorter `base`, or write `max = 0` for a single call",
                    deadline.tokens
                ),
            );
        }
    }
    if let Some(factor) = args.written("factor") {
        match args.backoff.as_ref().map(|s| s.value) {
            Some(BackoffForm::Constant) => errors.spanned(
                factor,
                "`factor` has no effect with `backoff = constant` (every pause is `base`); remove `factor`, or write `backoff = exponential`",
            ),
            Some(BackoffForm::Linear) => errors.spanned(
                factor,
                "`factor` has no effect with `backoff = linear` (pause n is `base·n`); remove `factor`, or write `backoff = exponential`",
            ),
            _ => {}
        }
    }
    spec
}
