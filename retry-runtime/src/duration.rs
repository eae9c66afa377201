//! Duration strings: `"250ms"`, `"1.5s"`, `"2m"`.
//!
//! The same grammar as the macro's `retry-macro/src/duration.rs`, which cannot depend on this
//! crate (this crate depends on it); `tests/tests/policy.rs` checks that both agree.

/// The forms a newcomer should see when a duration is wrong.
pub(crate) const ACCEPTED: &str = "expected a duration like `\"250ms\"`, `\"1.5s\"` or `\"2m\"`: an unsigned decimal number followed by `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`";

/// Parses a duration string into whole nanoseconds, or says what is wrong with it.
pub(crate) fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("empty duration; {ACCEPTED}"));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!("`{text}` does not start with a number; {ACCEPTED}"));
    }
    let unit_nanos: u64 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => return Err(format!("`{text}` has no unit; {ACCEPTED}")),
        other => {
            return Err(format!(
                "unknown unit `{}` in `{text}`; {ACCEPTED}",
                other.trim()
            ));
        }
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    if whole.is_empty() || number.ends_with('.') || fraction.contains('.') {
        return Err(format!("`{text}` is not a decimal number; {ACCEPTED}"));
    }
    let too_long =
        || format!("`{text}` is too long: durations must fit in 584 years of nanoseconds");
    let whole: u128 = whole.parse().map_err(|_| too_long())?;
    let mut nanos = whole
        .checked_mul(u128::from(unit_nanos))
        .ok_or_else(too_long)?;
    if !fraction.is_empty() {
        // Exact decimal arithmetic: "1.5s" is 1_500_000_000 ns, not a rounded float.
        let digits = u32::try_from(fraction.len()).map_err(|_| too_long())?;
        let scale = 10u128.checked_pow(digits).ok_or_else(too_long)?;
        let fraction: u128 = fraction.parse().map_err(|_| too_long())?;
        let scaled = fraction * u128::from(unit_nanos);
        if scaled % scale != 0 {
            return Err(format!(
                "`{text}` is finer than a nanosecond; round it, or use a smaller unit"
            ));
        }
        nanos += scaled / scale;
    }
    u64::try_from(nanos).map_err(|_| too_long())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse("250ms"), Ok(250_000_000));
        assert_eq!(parse("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse("2m"), Ok(120_000_000_000));
        assert_eq!(parse("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse("0ns"), Ok(0));
        assert_eq!(parse("7us"), Ok(7_000));
        assert_eq!(parse("7µs"), Ok(7_000));
        assert_eq!(parse("0.25ms"), Ok(250_000));
    }

    #[test]
    fn rejected_forms() {
        for bad in [
            "",
            "1 sec",
            "-1s",
            "1x",
            "5",
            "s",
            "1.s",
            ".5s",
            "1.2.3s",
            "1.5ns",
            "1000000000h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
