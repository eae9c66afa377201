//! The annotated function: its signature kept as written, its body kept as raw tokens.
//!
//! The body is never parsed, so a typo inside it is reported by rustc as usual and the function
//! does not vanish from the IDE while it is being written.

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::{
    Attribute, FnArg, GenericArgument, PathArguments, ReturnType, Signature, Token, Type,
    Visibility,
};

pub(crate) struct RetryFn {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub sig: Signature,
    /// The `{ ... }` group, untouched.
    pub body: Group,
}

impl Parse for RetryFn {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let sig: Signature = input.parse()?;
        if input.peek(Token![;]) {
            return Err(syn::Error::new_spanned(
                &sig,
                "this function has no body, so there is nothing to run again; put the attribute on the function's implementation (for a trait method, on the method in each `impl`)",
            ));
        }
        let body: Group = input.parse()?;
        if body.delimiter() != Delimiter::Brace {
            return Err(syn::Error::new(
                body.span(),
                "expected the function body `{ ... }`",
            ));
        }
        Ok(RetryFn {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

impl ToTokens for RetryFn {
    fn to_tokens(&self, tokens: &mut TokenStream) {
        for attr in &self.attrs {
            attr.to_tokens(tokens);
        }
        self.vis.to_tokens(tokens);
        self.sig.to_tokens(tokens);
        self.body.to_tokens(tokens);
    }
}

/// Parses the item, or says why it is not a function `#[attr]` can go on.
pub(crate) fn parse(attr: &str, item: TokenStream) -> syn::Result<RetryFn> {
    syn::parse2::<RetryFn>(item.clone()).map_err(|error| match syn::parse2::<syn::Item>(item) {
        // A function, or a declaration without a body (`Verbatim`): `RetryFn` said what is wrong.
        Ok(syn::Item::Fn(_) | syn::Item::Verbatim(_)) | Err(_) => error,
        Ok(other) => syn::Error::new_spanned(
            item_head(&other),
            format!(
                "`#[{attr}]` goes on a function (`fn` or `async fn`) with a body, not on {}",
                item_kind(&other)
            ),
        ),
    })
}

fn item_kind(item: &syn::Item) -> &'static str {
    use syn::Item::*;
    match item {
        Struct(_) => "a `struct`",
        Enum(_) => "an `enum`",
        Union(_) => "a `union`",
        Const(_) => "a `const`",
        Static(_) => "a `static`",
        Trait(_) | TraitAlias(_) => "a `trait`; put it on a method with a body",
        Impl(_) => "an `impl` block; put it on a method inside",
        Mod(_) => "a module",
        Type(_) => "a type alias",
        Use(_) => "a `use` declaration",
        ExternCrate(_) => "an `extern crate`",
        ForeignMod(_) => "an `extern` block",
        Macro(_) => "a macro",
        _ => "this item",
    }
}

/// The tokens up to an item's name, so the error underlines `struct Foo`, not the whole item.
fn item_head(item: &syn::Item) -> TokenStream {
    use quote::quote;
    use syn::Item::*;
    match item {
        Struct(i) => {
            let (keyword, name) = (&i.struct_token, &i.ident);
            quote!(#keyword #name)
        }
        Enum(i) => {
            let (keyword, name) = (&i.enum_token, &i.ident);
            quote!(#keyword #name)
        }
        Const(i) => {
            let (keyword, name) = (&i.const_token, &i.ident);
            quote!(#keyword #name)
        }
        Static(i) => {
            let (keyword, name) = (&i.static_token, &i.ident);
            quote!(#keyword #name)
        }
        Trait(i) => {
            let (keyword, name) = (&i.trait_token, &i.ident);
            quote!(#keyword #name)
        }
        Mod(i) => {
            let (keyword, name) = (&i.mod_token, &i.ident);
            quote!(#keyword #name)
        }
        Impl(i) => i.impl_token.to_token_stream(),
        other => other.to_token_stream(),
    }
}

/// Is the path's last segment `name`? Attributes are found by their last segment, so both
/// `#[retry]` and `#[retry_runtime::retry]` count.
pub(crate) fn is_attr(attr: &Attribute, name: &str) -> bool {
    attr.path().segments.last().is_some_and(|s| s.ident == name)
}

/// The error type's place in `Result<T, E>` or an alias such as `io::Result<T>`.
pub(crate) fn result_type(output: &ReturnType) -> Option<&Type> {
    let ReturnType::Type(_, ty) = output else {
        return None;
    };
    let mut ty: &Type = ty;
    loop {
        match ty {
            Type::Paren(inner) => ty = &inner.elem,
            Type::Group(inner) => ty = &inner.elem,
            Type::Path(path) if path.qself.is_none() => {
                let last = path.path.segments.last()?;
                return last.ident.to_string().ends_with("Result").then_some(ty);
            }
            _ => return None,
        }
    }
}

/// `E` in `Result<T, E>` (or any `…Result<T, E>`); `None` for an alias such as `io::Result<T>`.
pub(crate) fn error_type(output: &ReturnType) -> Option<&Type> {
    let Type::Path(path) = result_type(output)? else {
        return None;
    };
    let PathArguments::AngleBracketed(args) = &path.path.segments.last()?.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|arg| match arg {
        GenericArgument::Type(ty) => Some(ty),
        _ => None,
    });
    match (types.next(), types.next(), types.next()) {
        (Some(_), Some(error), None) => Some(error),
        _ => None,
    }
}

/// The error types that one of the runtime's features classifies, by the last two segments of
/// their path, with the runtime's classifier for each (`__private::by_feature::sqlx`, ...): with
/// the feature off, its compile error names the feature. The aliases `sqlx::Result<T>` and
/// `reqwest::Result<T>` count too.
const FEATURE_CLASSIFIED: &[(&str, &str, &str)] = &[
    ("sqlx", "Error", "sqlx"),
    ("sqlx", "Result", "sqlx"),
    ("tokio_postgres", "Error", "tokio_postgres"),
    ("reqwest", "Error", "reqwest"),
    ("reqwest", "Result", "reqwest"),
    ("tonic", "Status", "tonic"),
];

/// The runtime's classifier for the function's error type if a feature classifies it
/// (`Result<T, sqlx::Error>`, `sqlx::Result<T>`, `Result<T, ::tonic::Status>`): recognised by
/// its path as written, so a type imported under another name (`use sqlx::Error;`) gets the
/// general classifier and its general message.
pub(crate) fn feature_classifier(output: &ReturnType) -> Option<&'static str> {
    let path = match error_type(output) {
        Some(Type::Path(path)) if path.qself.is_none() => path,
        Some(_) => return None,
        // An alias such as `sqlx::Result<T>`: the return type itself.
        None => match result_type(output)? {
            Type::Path(path) if path.qself.is_none() => path,
            _ => return None,
        },
    };
    let segments: Vec<String> = path
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    let [.., krate, name] = segments.as_slice() else {
        return None;
    };
    FEATURE_CLASSIFIED
        .iter()
        .find(|(k, n, _)| k == krate && n == name)
        .map(|(_, _, classify)| *classify)
}

/// The return type with every `impl Trait` replaced by `_`, for places where a type must be
/// written inside the body (a closure's return type, a turbofish).
pub(crate) fn erase_impl_trait(ty: &Type) -> Type {
    let mut ty = ty.clone();
    erase(&mut ty);
    ty
}

fn erase(ty: &mut Type) {
    match ty {
        Type::ImplTrait(_) => *ty = syn::parse_quote!(_),
        Type::Paren(t) => erase(&mut t.elem),
        Type::Group(t) => erase(&mut t.elem),
        Type::Reference(t) => erase(&mut t.elem),
        Type::Ptr(t) => erase(&mut t.elem),
        Type::Slice(t) => erase(&mut t.elem),
        Type::Array(t) => erase(&mut t.elem),
        Type::Tuple(t) => t.elems.iter_mut().for_each(erase),
        Type::Path(t) => {
            for segment in &mut t.path.segments {
                if let PathArguments::AngleBracketed(args) = &mut segment.arguments {
                    for arg in &mut args.args {
                        if let GenericArgument::Type(inner) = arg {
                            erase(inner);
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// The parameters that can carry an idempotency key.
pub(crate) struct KeyParams<'a> {
    /// Parameters marked `#[idempotency_key]`.
    pub marked: Vec<&'a syn::PatType>,
    /// Parameters whose type is `IdempotencyKey` (or a reference to one).
    pub typed: Vec<&'a syn::PatType>,
}

pub(crate) fn key_params(sig: &Signature) -> KeyParams<'_> {
    let mut params = KeyParams {
        marked: Vec::new(),
        typed: Vec::new(),
    };
    for input in &sig.inputs {
        if let FnArg::Typed(param) = input {
            if param
                .attrs
                .iter()
                .any(|a| a.path().is_ident("idempotency_key"))
            {
                params.marked.push(param);
            }
            if is_key_type(&param.ty) {
                params.typed.push(param);
            }
        }
    }
    params
}

fn is_key_type(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => is_key_type(&r.elem),
        Type::Paren(t) => is_key_type(&t.elem),
        Type::Group(t) => is_key_type(&t.elem),
        Type::Path(p) => p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "IdempotencyKey"),
        _ => false,
    }
}

/// Removes `#[idempotency_key]` from the parameters: rustc knows no such attribute, and the
/// macros have read it.
pub(crate) fn strip_key_marks(sig: &mut Signature) {
    for input in &mut sig.inputs {
        if let FnArg::Typed(param) = input {
            param
                .attrs
                .retain(|a| !a.path().is_ident("idempotency_key"));
        }
    }
}

/// The parameter whose value is the idempotency key: the one marked `#[idempotency_key]`, else
/// the first of type `IdempotencyKey`; `None` unless it is bound to a plain name (a marked one
/// that is not is an error, see `validate`).
pub(crate) fn key_param(sig: &Signature) -> Option<KeyParam> {
    let params = key_params(sig);
    let param = params.marked.first().or(params.typed.first())?;
    match &*param.pat {
        syn::Pat::Ident(p) => Some(KeyParam {
            name: p.ident.clone(),
            ty: (*param.ty).clone(),
        }),
        _ => None,
    }
}

/// The key parameter: its name, and its type, where a type that cannot be a key is reported.
pub(crate) struct KeyParam {
    pub name: syn::Ident,
    pub ty: Type,
}

/// How many references the type is behind: 1 for `&str`, 0 for `u64`.
pub(crate) fn references(ty: &Type) -> usize {
    match ty {
        Type::Reference(r) => 1 + references(&r.elem),
        Type::Paren(p) => references(&p.elem),
        Type::Group(g) => references(&g.elem),
        _ => 0,
    }
}

/// The type past its references: `str` for `&str`.
pub(crate) fn referent(ty: &Type) -> &Type {
    match ty {
        Type::Reference(r) => referent(&r.elem),
        Type::Paren(p) => referent(&p.elem),
        Type::Group(g) => referent(&g.elem),
        _ => ty,
    }
}
