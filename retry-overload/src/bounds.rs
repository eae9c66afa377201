//! The settings' clamping, usable in the builders' `const fn`s (a copy of retry-runtime's
//! `bounds.rs`: this crate depends on nothing of the runtime).

/// `x` within [lo, hi], or `nan` for NaN.
pub(crate) const fn clamp_or(x: f64, lo: f64, hi: f64, nan: f64) -> f64 {
    if x > hi {
        hi
    } else if x >= lo {
        x
    } else if x < lo {
        lo
    } else {
        nan
    }
}

/// `n` within [lo, hi].
pub(crate) const fn clamp_u32(n: u32, lo: u32, hi: u32) -> u32 {
    if n < lo {
        lo
    } else if n > hi {
        hi
    } else {
        n
    }
}

/// `n`, or 1 for 0: a count that must not stop everything.
pub(crate) const fn at_least_one(n: u32) -> u32 {
    clamp_u32(n, 1, u32::MAX)
}
