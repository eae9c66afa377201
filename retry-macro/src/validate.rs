//! Rules across the arguments and the function; produces the [`Plan`] that `expand` prints.

use crate::args::{Args, BackoffForm, JitterForm, Nested, Setting, TIMING_KEYS};
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
    /// The return type as written, whose span the default classifier takes so that a missing
    /// `Transient` impl is reported there.
    pub output_tokens: proc_macro2::TokenStream,
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
    pub timeout: Option<u64>,
    pub nested_retry: bool,
    /// The parameter that carries the idempotency key, for `attempt().key()`.
    pub key: Option<syn::Ident>,
}

const DEFAULT_BASE: u64 = 1_000_000_000;
const DEFAULT_RETRIES: u32 = 3;

pub(crate) fn plan(args: Args, mut func: RetryFn) -> syn::Result<Plan> {
    let mut errors = Errors::default();
    check_signature(&func, &mut errors);
    check_idempotency(&func, &mut errors);
    check_function_kind(&args, &func, &mut errors);
    let policy = policy(&args, &mut errors);
    let key = item::key_param(&func.sig);
    item::strip_key_marks(&mut func.sig);

    let (output, output_tokens) = match &func.sig.output {
        ReturnType::Type(_, ty) => (item::erase_impl_trait(ty), ty.to_token_stream()),
        ReturnType::Default => (syn::parse_quote!(()), func.sig.ident.to_token_stream()),
    };
    let on = args.on.map(|setting| setting.value);
    errors.or(Plan {
        func,
        output,
        output_tokens,
        policy,
        on,
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
        errors.spanned(
            sig,
            format!(
                "`{name}` is `#[non_idempotent]`, so retrying it without an idempotency key could act twice (a lost response, then a second payout); add a parameter `key: &IdempotencyKey` that the caller creates once with `IdempotencyKey::new()` and passes to every attempt, or mark an existing key parameter with `#[idempotency_key]`"
            ),
        );
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
    if let Some(attempts) = &args.attempts {
        match &args.max {
            Some(max) => errors.spanned(
                &attempts.key,
                format!(
                    "give `max` (retries after the first call) or `attempts` (calls in all), not both: `max = {0}` is `attempts = {1}`",
                    max.value,
                    u64::from(max.value) + 1
                ),
            ),
            None => spec.max_retries = Some(attempts.value - 1),
        }
    }
    let retries = spec.max_retries.unwrap_or(DEFAULT_RETRIES);
    let base = spec.base.unwrap_or(DEFAULT_BASE);
    let base_text = written(&args.base, "base = \"1s\" (the default)");

    if let Some(max_delay) = &args.max_delay {
        if max_delay.value < base {
            errors.spanned(
                &max_delay.tokens,
                format!(
                    "`max_delay = {}` is shorter than `{base_text}`: no pause may exceed `max_delay`, so the first one could not be taken; raise `max_delay` or lower `base`",
                    max_delay.tokens
                ),
            );
        }
    }
    if let Some(deadline) = &args.deadline {
        if retries > 0 && deadline.value < base {
            errors.spanned(
                &deadline.tokens,
                format!(
                    "`deadline = {}` is shorter than `{base_text}`: the first pause would already end past the deadline, so no retry could happen; raise `deadline` or lower `base`",
                    deadline.tokens
                ),
            );
        }
    }
    if let Some(factor) = &args.factor {
        if factor.value < 1.0 {
            errors.spanned(
                &factor.tokens,
                format!(
                    "`factor = {}` would shrink each pause; expected a number ≥ 1 (`factor = 1` keeps the pause constant, `factor = 2` doubles it)",
                    factor.tokens
                ),
            );
        }
        match args.backoff.as_ref().map(|s| s.value) {
            Some(BackoffForm::Constant) => errors.spanned(
                &factor.key,
                "`factor` has no effect with `backoff = constant` (every pause is `base`); remove `factor`, or use `backoff = exponential`",
            ),
            Some(BackoffForm::Linear) => errors.spanned(
                &factor.key,
                "`factor` has no effect with `backoff = linear` (pause n is `base·n`); remove `factor`, or use `backoff = exponential`",
            ),
            _ => {}
        }
    }
    spec
}

/// `key = value` as the user wrote it, or the default's description.
fn written<T>(setting: &Option<Setting<T>>, default: &str) -> String {
    match setting {
        Some(s) => format!("{} = {}", s.key, s.tokens),
        None => default.to_owned(),
    }
}
