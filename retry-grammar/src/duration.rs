//! Duration strings: `"250ms"`, `"1.5s"`, `"2m"`.
//!
//! An unsigned decimal number and a unit, read exactly (no float rounding) into whole
//! nanoseconds. A value finer than a nanosecond (`"1.5ns"`, `"1.0000000001s"`) is refused, not
//! rounded: the fix is one edit away, and a silently changed value would be worse. Digits past
//! nanosecond precision are fine when they are zeros (`"1.500000000000s"`). Nothing here can
//! overflow, whatever the length of the text.

/// The forms a newcomer should see when a duration is wrong.
pub const ACCEPTED: &str = "expected a duration like `\"250ms\"`, `\"1.5s\"` or `\"2m\"`: an unsigned decimal number followed by `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`";

/// The units, with their length in nanoseconds.
pub const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a duration string into whole nanoseconds, or says what is wrong with it.
pub fn parse(text: &str) -> Result<u64, String> {
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
    let unit_nanos = match UNITS.iter().find(|(name, _)| *name == unit) {
        Some((_, nanos)) => u128::from(*nanos),
        None if unit.is_empty() => return Err(format!("`{text}` has no unit; {ACCEPTED}")),
        None => {
            return Err(format!(
                "unknown unit `{}` in `{text}`; {ACCEPTED}",
                unit.trim()
            ));
        }
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || number.ends_with('.') || fraction.contains('.') {
        return Err(format!("`{text}` is not a decimal number; {ACCEPTED}"));
    }
    let too_long =
        || format!("`{text}` is too long: durations must fit in 584 years of nanoseconds");
    let whole: u128 = whole.parse().map_err(|_| too_long())?;
    let mut nanos = whole.checked_mul(unit_nanos).ok_or_else(too_long)?;
    // Trailing zeros add nothing; what is left must end on a whole nanosecond. The longest
    // unit is 2^13·3^2·5^11 ns, so a fraction with more than 13 significant digits never does,
    // and below that the arithmetic fits in a `u128` (10^20 · 3.6·10^12 < 2^128).
    let fraction = fraction.trim_end_matches('0');
    if !fraction.is_empty() {
        let finer = || {
            format!(
                "`{text}` is finer than a nanosecond; round it to whole nanoseconds, or use a smaller unit"
            )
        };
        if fraction.len() > 20 {
            return Err(finer());
        }
        let scale = 10u128.pow(fraction.len() as u32);
        let digits: u128 = fraction.parse().map_err(|_| finer())?;
        let scaled = digits * unit_nanos;
        if scaled % scale != 0 {
            return Err(finer());
        }
        nanos = nanos.checked_add(scaled / scale).ok_or_else(too_long)?;
    }
    u64::try_from(nanos).map_err(|_| too_long())
}

/// A duration as configuration writes it back: the largest unit in which it is a whole number
/// (`"90s"`, `"250ms"`, `"1h"`, `"1500ms"`; zero is `"0s"`), which [`parse`] reads back
/// exactly. One number and one unit, because that is what [`parse`] reads.
pub fn format(nanos: u64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    // `UNITS` from the longest down, skipping the other spellings of a microsecond.
    let (unit, length) = ["h", "m", "s", "ms", "us", "ns"]
        .iter()
        .filter_map(|name| UNITS.iter().find(|(unit, _)| unit == name))
        .find(|(_, length)| nanos % length == 0)
        .copied()
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / length)
}

/// The duration string someone who wrote `"1 sec"` or `"2 minutes"` meant, if it is clear.
pub fn suggestion(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let split = compact
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(compact.len());
    let (number, unit) = compact.split_at(split);
    let unit = match unit.to_lowercase().as_str() {
        "ns" | "nsec" | "nanos" | "nanosecond" | "nanoseconds" => "ns",
        "us" | "µs" | "μs" | "usec" | "micros" | "microsecond" | "microseconds" => "us",
        "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => "ms",
        "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "m" | "min" | "mins" | "minute" | "minutes" => "m",
        "h" | "hr" | "hrs" | "hour" | "hours" => "h",
        _ => return None,
    };
    let fixed = format!("{number}{unit}");
    parse(&fixed).is_ok().then_some(fixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        assert_eq!(
            parse("1.500000000000000000000000000000s"),
            Ok(1_500_000_000)
        );
        assert_eq!(parse("0.5m"), Ok(30_000_000_000));
        assert_eq!(parse("0.00000000001h"), Ok(36));
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
            "18446744073.709551616s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(parse("18446744073.709551615s"), Ok(u64::MAX));
    }

    /// Issue 13, defect 4: thirty fraction digits overflowed `u128` and panicked the macro.
    #[test]
    fn a_long_fraction_is_refused_without_overflow() {
        let text = "1.999999999999999999999999999999s";
        assert_eq!(
            parse(text),
            Err(format!(
                "`{text}` is finer than a nanosecond; round it to whole nanoseconds, or use a smaller unit"
            ))
        );
        let long = format!("1.{}h", "9".repeat(10_000));
        assert!(parse(&long).is_err());
        let whole = format!("{}s", "9".repeat(10_000));
        assert!(parse(&whole).is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format(0), "0s");
        assert_eq!(format(90_000_000_000), "90s");
        assert_eq!(format(120_000_000_000), "2m");
        assert_eq!(format(250_000_000), "250ms");
        assert_eq!(format(1_500_000_000), "1500ms");
        assert_eq!(format(3_600_000_000_000), "1h");
        assert_eq!(format(7_000), "7us");
        assert_eq!(format(u64::MAX), "18446744073709551615ns");
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggestion("1 sec").as_deref(), Some("1s"));
        assert_eq!(suggestion("2 Minutes").as_deref(), Some("2m"));
        assert_eq!(suggestion("soon"), None);
    }

    proptest! {
        #[test]
        fn any_text_parses_or_says_why(text in ".*") {
            let _ = parse(&text);
            let _ = suggestion(&text);
        }

        #[test]
        fn any_decimal_parses_or_says_why(
            whole in "[0-9]{1,40}",
            fraction in "[0-9]{0,60}",
            unit in prop::sample::select(UNITS.iter().map(|(u, _)| *u).collect::<Vec<_>>()),
        ) {
            let text = format!("{whole}.{fraction}{unit}");
            let _ = parse(&text);
            let _ = parse(&format!("{whole}{unit}"));
        }

        #[test]
        fn a_formatted_duration_reads_back_exactly(nanos: u64) {
            prop_assert_eq!(parse(&format(nanos)), Ok(nanos));
        }

        #[test]
        fn whole_nanoseconds_read_back_exactly(nanos: u64) {
            prop_assert_eq!(parse(&format!("{nanos}ns")), Ok(nanos));
            let text = format!("{}.{:09}s", nanos / 1_000_000_000, nanos % 1_000_000_000);
            prop_assert_eq!(parse(&text), Ok(nanos));
        }
    }
}
