//! Durations as the protobuf JSON mapping writes them (`google.protobuf.Duration`): seconds with
//! up to nine decimals and an `s`, such as `"0.1s"`, `".5s"` or `"30s"`.

use std::time::Duration;

/// The largest number of seconds a `google.protobuf.Duration` holds (10,000 years).
pub const MAX_SECONDS: u64 = 315_576_000_000;

/// Reads a protobuf JSON duration: optional `-`, digits, optionally `.` and one to nine digits,
/// then `s`; at least one digit. The grammar is C-core's (`"1.s"` and `"1e3s"` are refused);
/// `".5s"` (no whole part) is accepted as C-core, grpc-go and grpc-java accept it.
///
/// A negative duration is read and then refused with its own message, since no field of the
/// service config accepts one.
///
/// ```
/// use retry_grpc::duration::parse;
/// use std::time::Duration;
///
/// assert_eq!(parse("0.1s"), Ok(Duration::from_millis(100)));
/// assert_eq!(parse(".01s"), Ok(Duration::from_millis(10)));
/// assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
/// assert!(parse("100ms").unwrap_err().contains("seconds with an `s`"));
/// ```
pub fn parse(text: &str) -> Result<Duration, String> {
    let expected = || {
        format!(
            "expected a duration as seconds with an `s`, like \"0.1s\" or \"30s\" (the protobuf JSON form), got {text:?}"
        )
    };
    let Some(number) = text.strip_suffix('s') else {
        return Err(expected());
    };
    let (negative, number) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number),
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || fraction.is_some_and(|f| f.is_empty() || !all_digits(f)) {
        return Err(expected());
    }
    if whole.is_empty() && fraction.is_none() {
        return Err(expected());
    }
    let fraction = fraction.unwrap_or("");
    if fraction.len() > 9 {
        return Err(format!(
            "at most 9 digits after the decimal point (nanoseconds), got {text:?}"
        ));
    }
    let seconds = if whole.is_empty() {
        0
    } else {
        // Digits only, so the only failure is overflow.
        whole.parse::<u64>().unwrap_or(u64::MAX)
    };
    if seconds > MAX_SECONDS {
        return Err(format!(
            "must be at most {MAX_SECONDS} seconds (the range of google.protobuf.Duration), got {text:?}"
        ));
    }
    let mut nanos: u32 = 0;
    for (i, digit) in fraction.bytes().enumerate() {
        nanos += u32::from(digit - b'0') * 10u32.pow(8 - i as u32);
    }
    if negative && (seconds > 0 || nanos > 0) {
        return Err(format!("must not be negative, got {text:?}"));
    }
    Ok(Duration::new(seconds, nanos))
}

/// Writes a duration in the protobuf JSON form, with 0, 3, 6 or 9 decimals as protobuf's own
/// printer does: `"0.100s"`, `"30s"`.
///
/// ```
/// use retry_grpc::duration::format;
/// use std::time::Duration;
///
/// assert_eq!(format(Duration::from_millis(100)), "0.100s");
/// assert_eq!(format(Duration::from_secs(30)), "30s");
/// assert_eq!(format(Duration::from_nanos(1_500)), "0.000001500s");
/// ```
pub fn format(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let nanos = duration.subsec_nanos();
    if nanos == 0 {
        format!("{seconds}s")
    } else if nanos % 1_000_000 == 0 {
        format!("{seconds}.{:03}s", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        format!("{seconds}.{:06}s", nanos / 1_000)
    } else {
        format!("{seconds}.{nanos:09}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("-0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("0.000000001s"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("315576000000s"), Ok(Duration::from_secs(MAX_SECONDS)));
    }

    #[test]
    fn refused_forms() {
        for text in [
            "", "s", ".s", "1", "1.s", "1..5s", "1e3s", " 1s", "+1s", "1,5s", "0x10s", "1.5ms",
        ] {
            assert!(parse(text).is_err(), "{text:?} was accepted");
        }
        assert!(
            parse("0.0000000001s")
                .unwrap_err()
                .contains("at most 9 digits")
        );
        assert!(
            parse("315576000001s")
                .unwrap_err()
                .contains("at most 315576000000")
        );
        assert!(
            parse("99999999999999999999999s")
                .unwrap_err()
                .contains("at most")
        );
        assert!(parse("-1s").unwrap_err().contains("must not be negative"));
    }

    #[test]
    fn format_reads_back() {
        for nanos in [
            0,
            1,
            1_000,
            1_000_000,
            100_000_000,
            1_234_567_891,
            30_000_000_000,
        ] {
            let duration = Duration::from_nanos(nanos);
            assert_eq!(parse(&format(duration)), Ok(duration));
        }
    }
}
