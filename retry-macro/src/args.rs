//! Parses `#[retry(...)]` into [`Args`]: each `key = value` read by the grammar that
//! `Policy::from_str` shares (`retry-grammar`), with the tokens kept for spans and expansion.

use crate::errors::Errors;
use proc_macro2::TokenStream;
use quote::ToTokens;
use retry_grammar::{self as grammar, At, Key, Problem, Scope, Setting, Settings, Value};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, PathArguments, Token, UnOp};

/// One `key` or `key = value` as written.
struct RawArg {
    key: Ident,
    value: Option<Expr>,
}

impl Parse for RawArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            // `max: 3`, `max 3`, `max(3)`: say what belongs after the key.
            let example = grammar::key(&key.unraw().to_string()).map_or("...", |k| k.example);
            return Err(input.error(format!(
                "expected `=` after `{key}`, like `{key} = {example}`"
            )));
        };
        Ok(RawArg { key, value })
    }
}

/// A key of the table as written: its name's token and its value's.
pub(crate) struct Arg {
    pub key: &'static Key,
    pub ident: Ident,
    pub value: Option<Expr>,
}

/// The tokens an error about `at` points at: the value, or the key when it has none.
fn tokens_at(at: At, key: &Ident, value: Option<&Expr>) -> TokenStream {
    match (at, value) {
        (At::Value, Some(value)) => value.to_token_stream(),
        _ => key.to_token_stream(),
    }
}

/// `#[retry(...)]`: what the grammar read, and the tokens of each key of the table that was
/// written (the first time), valid or not.
pub(crate) struct Args {
    pub settings: Settings,
    written: Vec<Arg>,
}

impl Args {
    /// The key as written, valid or not.
    pub(crate) fn written(&self, key: &Key) -> Option<&Arg> {
        self.written.iter().find(|arg| arg.key.is(key))
    }

    /// The key as written and its value as read, if the grammar accepted it.
    pub(crate) fn accepted(&self, key: &Key) -> Option<(&Arg, Setting)> {
        Some((self.written(key)?, self.settings.setting(key)?))
    }

    /// The expression written for `key`, if accepted.
    pub(crate) fn expr(&self, key: &Key) -> Option<&Expr> {
        self.accepted(key)?.0.value.as_ref()
    }

    /// `crate = path`, if given.
    pub(crate) fn krate(&self) -> Option<&syn::Path> {
        match self.expr(&grammar::CRATE)? {
            Expr::Path(path) => Some(&path.path),
            _ => None,
        }
    }

    /// The error for a problem with `arg`, at its key or its value.
    pub(crate) fn error(arg: &Arg, problem: &Problem) -> syn::Error {
        syn::Error::new_spanned(
            tokens_at(problem.at, &arg.ident, arg.value.as_ref()),
            &problem.message,
        )
    }
}

/// Parses the attribute's arguments, pushing every mistake to `errors`. The settings that are
/// valid are kept, so the rules across arguments can still be checked in the same compile.
pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Args {
    parse_in(Scope::Attribute, tokens, errors)
}

/// [`parse`] for `scope`: the attribute's arguments, or a block's (which also take the
/// [`BLOCK_KEYS`](grammar::BLOCK_KEYS)).
pub(crate) fn parse_in(scope: Scope, tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args {
        settings: Settings::new(scope),
        written: Vec::new(),
    };
    let raw = syn::parse::Parser::parse2(Punctuated::<RawArg, Token![,]>::parse_terminated, tokens);
    let raw = match raw {
        Ok(raw) => raw,
        Err(e) => {
            let how = match scope {
                Scope::Block => {
                    "`retry_block!` takes `key = value` pairs separated by commas, then `=>` and the block, like `retry_block!(max = 3, base = \"1s\" => { ... })`"
                }
                _ => {
                    "`#[retry]` takes `key = value` pairs separated by commas, like `#[retry(max = 3, base = \"1s\")]`"
                }
            };
            errors.push(syn::Error::new(e.span(), format!("{e}; {how}")));
            return args;
        }
    };
    for RawArg { key: ident, value } in raw {
        let name = ident.unraw().to_string();
        let written = value
            .as_ref()
            .map(|v| v.to_token_stream().to_string())
            .unwrap_or_default();
        let first = grammar::key(&name)
            .or_else(|| match scope {
                Scope::Block => grammar::BLOCK_KEYS.iter().find(|k| k.name == name),
                _ => None,
            })
            .filter(|key| args.settings.get(key).is_none());
        let read = args
            .settings
            .read(&name, value.as_ref().map(value_of).as_ref(), &written);
        if let Err(problem) = &read {
            errors.spanned(
                tokens_at(problem.at, &ident, value.as_ref()),
                &problem.message,
            );
        }
        if let Some(key) = first {
            args.written.push(Arg { key, ident, value });
        }
    }
    args
}

/// The value as the grammar sees it.
fn value_of(expr: &Expr) -> Value {
    match expr {
        Expr::Lit(ExprLit { lit, .. }) => match lit {
            Lit::Int(int) => Value::Int {
                digits: int.base10_digits().to_owned(),
                suffix: int.suffix().to_owned(),
            },
            Lit::Float(float) => Value::Float {
                digits: float.base10_digits().to_owned(),
                suffix: float.suffix().to_owned(),
            },
            Lit::Str(text) => Value::Str(text.value()),
            Lit::Bool(b) => Value::Bool(b.value),
            _ => Value::Other,
        },
        Expr::Group(group) => value_of(&group.expr),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_), ..
        }) => Value::Negative,
        Expr::Path(path)
            if path.qself.is_none()
                && path.attrs.is_empty()
                && path
                    .path
                    .segments
                    .iter()
                    .all(|s| matches!(s.arguments, PathArguments::None)) =>
        {
            match path.path.get_ident() {
                Some(ident) => Value::Word(ident.unraw().to_string()),
                None => Value::Path(path.path.to_token_stream().to_string().replace(' ', "")),
            }
        }
        _ => Value::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_str(text: &str) -> (Args, Option<syn::Error>) {
        let mut errors = Errors::default();
        let tokens: TokenStream = text.parse().expect("tokens");
        let args = parse(tokens, &mut errors);
        (args, errors.finish().err())
    }

    #[test]
    fn values_reach_the_grammar_as_written() {
        let (args, error) = parse_str(
            "max = 3, base = \"1.5s\", jitter, factor = 1.5, nested = retry, crate = ::a::b",
        );
        assert!(error.is_none(), "{error:?}");
        let timings = args.settings.timings();
        assert_eq!(timings.max, Some(3));
        assert_eq!(timings.base, Some(1_500_000_000));
        assert_eq!(timings.factor, Some(1.5));
        assert_eq!(timings.jitter, Some(grammar::DEFAULT_JITTER));
        assert!(args.krate().is_some());
    }

    /// Issue 13, defect 4: this panicked with "attempt to multiply with overflow".
    #[test]
    fn a_long_fraction_is_an_error_not_a_panic() {
        let (_, error) = parse_str("max_delay = \"1.999999999999999999999999999999s\"");
        let error = error.expect("refused").to_string();
        assert!(error.contains("is finer than a nanosecond"), "{error}");
    }

    proptest! {
        /// Any string as any key's value: an error or a value, never a panic.
        #[test]
        fn any_string_value_reads_or_says_why(
            text in ".*",
            key in prop::sample::select(grammar::KEYS.iter().map(|k| k.name).collect::<Vec<_>>()),
        ) {
            let _ = parse_str(&format!("{key} = {text:?}"));
        }

        /// Any tokens at all: an error or arguments, never a panic.
        #[test]
        fn any_tokens_read_or_say_why(text in ".*") {
            if let Ok(tokens) = text.parse::<TokenStream>() {
                let mut errors = Errors::default();
                let _ = parse(tokens, &mut errors);
            }
        }

        /// Numbers of any length and sign, for the counts, durations, factor and jitter.
        #[test]
        fn any_number_reads_or_says_why(
            number in "-?[0-9]{1,60}(\\.[0-9]{0,60})?([eE][0-9]{1,3})?",
            key in prop::sample::select(vec!["max", "attempts", "factor", "jitter", "base", "timeout"]),
        ) {
            let _ = parse_str(&format!("{key} = {number}"));
        }
    }
}
