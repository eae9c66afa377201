//! `Retry-After` (RFC 9110 §10.2.3): the pause a server asks for, in seconds or as a date.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header's name, `Retry-After`, as RFC 9110 spells it. Header names are case-insensitive:
/// compare with [`str::eq_ignore_ascii_case`], or look it up in a header map that does.
///
/// ```
/// assert!("retry-after".eq_ignore_ascii_case(retry_runtime::headers::RETRY_AFTER));
/// ```
pub const RETRY_AFTER: &str = "Retry-After";

/// The pause a `Retry-After` value asks for, counted from `now`; `None` if the value is neither
/// form of RFC 9110 §10.2.3.
///
/// - **delay-seconds**: one or more ASCII digits, `"120"`. No sign, no fraction, no exponent.
///   A value too large for a [`Duration`] saturates at `u64::MAX` seconds instead of failing;
///   the loop then gives up at once, as for any pause beyond its `max_delay`.
/// - **HTTP-date**: the preferred IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, and the two
///   obsolete forms that RFC 9110 §5.6.7 says a recipient must accept: RFC 850
///   `Sunday, 06-Nov-94 08:49:37 GMT` and C's asctime `Sun Nov  6 08:49:37 1994`. The pause is
///   the time from `now` to that instant; a date that has passed gives [`Duration::ZERO`] (the
///   server allows a retry now, and the policy's own pause applies).
///
/// What is accepted, exactly:
///
/// - spaces and tabs around the value are ignored (a header's optional whitespace); inside it
///   the grammar is followed to the character, case-sensitively, as RFC 9110 asks;
/// - the calendar is checked: `31 Feb`, `29 Feb 2023`, hour 24 or minute 60 give `None`. Second
///   60 (a leap second) is accepted and counts as the next minute's first second;
/// - **a weekday that does not match the date is rejected** (`None`): such a value contradicts
///   itself, so the safer reading is to ignore it and let the policy choose the pause;
/// - an RFC 850 two-digit year is read as the year with those last two digits nearest to
///   `now`'s: within 50 years before or after it, as RFC 9110 §5.6.7 asks;
/// - IMF-fixdate and asctime years are exactly 4 digits (`0000`–`9999`).
///
/// Dates are read by the [`httpdate`](https://docs.rs/httpdate) crate (which hyper uses), with
/// the leap second, years before 1970 and the RFC 850 century rule added.
///
/// Never panics, whatever the input.
///
/// ```
/// use retry_runtime::headers::parse_retry_after;
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
///
/// // RFC 9110's own examples.
/// let now = UNIX_EPOCH + Duration::from_secs(946_684_799 - 90); // 1999-12-31 23:58:29 UTC
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now),
///     Some(Duration::from_secs(90)),
/// );
///
/// // The obsolete forms of the same instant.
/// assert_eq!(parse_retry_after("Friday, 31-Dec-99 23:59:59 GMT", now), Some(Duration::from_secs(90)));
/// assert_eq!(parse_retry_after("Fri Dec 31 23:59:59 1999", now), Some(Duration::from_secs(90)));
///
/// // A date that has passed: retry now.
/// assert_eq!(
///     parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", SystemTime::now()),
///     Some(Duration::ZERO),
/// );
///
/// // Not a Retry-After value.
/// for bad in ["", "-1", "1.5", "soon", "Sat, 31 Dec 1999 23:59:59 GMT", "Mon, 30 Feb 2026 00:00:00 GMT"] {
///     assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
/// }
/// ```
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim_matches([' ', '\t']);
    if let Some(seconds) = delay_seconds(value) {
        return Some(Duration::from_secs(seconds));
    }
    let date = http_date(value, now)?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `1*DIGIT`, saturating.
fn delay_seconds(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // All digits: only a value too large for a `u64` fails to parse.
    Some(value.parse().unwrap_or(u64::MAX))
}

/// An HTTP-date in any of its three forms, as an instant.
///
/// `httpdate` reads the forms and checks the calendar and the weekday. It differs from RFC 9110
/// §5.6.7 in three ways, each shown by a test below, so the value is first rewritten into one it
/// reads the same way RFC 9110 does:
///
/// - an RFC 850 date's two-digit year is 1970–2069 to `httpdate`, but "within 50 years of now"
///   to RFC 9110 (a MUST): the date is rewritten as an IMF-fixdate with that year;
/// - second 60, the leap second the grammar allows, is read as second 59 plus one second;
/// - `httpdate` cannot hold a year before 1970: such a year is moved forward by whole 400-year
///   cycles (146,097 days, a whole number of weeks: dates, leap days and weekdays repeat), and
///   the instant moved back by as many.
fn http_date(value: &str, now: SystemTime) -> Option<SystemTime> {
    if !value.is_ascii() {
        return None;
    }
    let long_weekday = LONG_DAYS.iter().find(|day| {
        value
            .strip_prefix(**day)
            .is_some_and(|rest| rest.starts_with(", "))
    });
    let mut date = match long_weekday {
        Some(day) => rfc850_as_imf_fixdate(&day[..3], &value[day.len() + 2..], now)?,
        None => value.to_owned().into_bytes(),
    };
    // Where the year and the seconds are: IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, asctime
    // `Sun Nov  6 08:49:37 1994`. Any other length is neither, and `httpdate` would refuse it.
    let (year_at, second_at) = match date.len() {
        29 => (12, 23),
        24 => (20, 17),
        _ => return None,
    };
    let leap_second = date[second_at..second_at + 2] == *b"60";
    if leap_second {
        date[second_at..second_at + 2].copy_from_slice(b"59");
    }
    let year = four_digits(&date[year_at..year_at + 4])?;
    let cycles = if year < 1970 {
        (1970 - year).div_ceil(400)
    } else {
        0
    };
    date[year_at..year_at + 4].copy_from_slice(format!("{:04}", year + 400 * cycles).as_bytes());
    let read = httpdate::parse_http_date(std::str::from_utf8(&date).ok()?).ok()?;
    const CYCLE: u64 = 146_097 * 86_400;
    read.checked_sub(Duration::from_secs(u64::from(cycles) * CYCLE))?
        .checked_add(Duration::from_secs(u64::from(leap_second)))
}

const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// `06-Nov-94 08:49:37 GMT` (what follows `Sunday, `) as `Sun, 06 Nov 1994 08:49:37 GMT`, with
/// the year ending in `94` that lies within 50 years of `now`'s.
fn rfc850_as_imf_fixdate(weekday: &str, rest: &str, now: SystemTime) -> Option<Vec<u8>> {
    let bytes = rest.as_bytes();
    if bytes.len() != 22 || bytes[2] != b'-' || bytes[6] != b'-' {
        return None;
    }
    let yy = four_digits(&[b'0', b'0', bytes[7], bytes[8]])?;
    let now_year = year_of(now);
    let mut year = now_year - now_year % 100 + yy;
    if year > now_year + 50 {
        year -= 100;
    } else if year <= now_year - 50 {
        year += 100;
    }
    // ASCII (`http_date` checked), so these cut whole characters; `time` is " 08:49:37 GMT".
    let (day, month, time) = (&rest[..2], &rest[3..6], &rest[9..]);
    Some(format!("{weekday}, {day} {month} {year:04}{time}").into_bytes())
}

/// Four ASCII digits as a number.
fn four_digits(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0, |n, digit| {
        digit
            .is_ascii_digit()
            .then(|| n * 10 + u32::from(digit - b'0'))
    })
}

/// The calendar year of `now`, taken at 1970 or 9999 outside them (what `httpdate` formats).
fn year_of(now: SystemTime) -> u32 {
    let last = UNIX_EPOCH + Duration::from_secs(253_402_300_799); // 9999-12-31 23:59:59
    let formatted = httpdate::fmt_http_date(now.clamp(UNIX_EPOCH, last));
    formatted
        .get(12..16)
        .and_then(|year| four_digits(year.as_bytes()))
        .unwrap_or(1970)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(unix_seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix_seconds)
    }

    /// Seconds since the Unix epoch, negative before it.
    fn unix(instant: SystemTime) -> i64 {
        match instant.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs() as i64,
            Err(before) => -(before.duration().as_secs() as i64),
        }
    }

    // An oracle for the calendar, independent of `httpdate`: Howard Hinnant's `days_from_civil`
    // and its inverse, over the proleptic Gregorian calendar, years counted from March.

    const SHORT_DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];

    /// Days from 1970-01-01 to a date.
    fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
        let year = if month <= 2 { year - 1 } else { year };
        let era = year.div_euclid(400);
        let year_of_era = year - era * 400; // [0, 399]
        let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1; // [0, 365], from 1 March
        let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
        era * 146_097 + day_of_era - 719_468
    }

    /// (year, month, day) of a day counted from 1970-01-01.
    fn civil_from_days(days: i64) -> (i64, i64, i64) {
        let days = days + 719_468;
        let era = days.div_euclid(146_097);
        let day_of_era = days - era * 146_097; // [0, 146096]
        let year_of_era =
            (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
        let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
        let month_from_march = (5 * day_of_year + 2) / 153; // [0, 11]
        let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
        let month = if month_from_march < 10 {
            month_from_march + 3
        } else {
            month_from_march - 9
        };
        (year_of_era + era * 400 + i64::from(month <= 2), month, day)
    }

    /// 1994-11-06 08:49:37 UTC, the instant of RFC 9110's date examples.
    const NOV_6_1994: u64 = 784_111_777;
    /// 1999-12-31 23:59:59 UTC, the instant of RFC 9110's `Retry-After` example.
    const DEC_31_1999: u64 = 946_684_799;

    /// Asserts the wait each value asks for at `now`.
    fn assert_waits(now: SystemTime, cases: &[(&str, Duration)]) {
        for &(value, wait) in cases {
            assert_eq!(parse_retry_after(value, now), Some(wait), "{value:?}");
        }
    }

    fn secs(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn rfc_9110_retry_after_examples() {
        let now = at(DEC_31_1999 - 3_600);
        assert_waits(
            now,
            &[
                ("Fri, 31 Dec 1999 23:59:59 GMT", secs(3_600)),
                ("120", secs(120)),
            ],
        );
    }

    #[test]
    fn rfc_9110_date_examples_all_three_forms() {
        let now = at(NOV_6_1994 - 10);
        assert_waits(
            now,
            &[
                ("Sun, 06 Nov 1994 08:49:37 GMT", secs(10)),
                ("Sunday, 06-Nov-94 08:49:37 GMT", secs(10)),
                ("Sun Nov  6 08:49:37 1994", secs(10)),
            ],
        );
    }

    #[test]
    fn counts_from_now_to_the_nanosecond() {
        let now = at(DEC_31_1999) - Duration::from_millis(1_500);
        let wait = Duration::from_millis(1_500);
        assert_waits(now, &[("Fri, 31 Dec 1999 23:59:59 GMT", wait)]);
    }

    #[test]
    fn a_date_in_the_past_means_now() {
        for now in [at(NOV_6_1994 + 1), at(NOV_6_1994)] {
            assert_waits(now, &[("Sun, 06 Nov 1994 08:49:37 GMT", Duration::ZERO)]);
        }
    }

    #[test]
    fn a_clock_before_1970_still_counts() {
        let now = UNIX_EPOCH - Duration::from_secs(60);
        assert_waits(
            now,
            &[
                ("Thu, 01 Jan 1970 00:00:00 GMT", secs(60)),
                ("Wed, 31 Dec 1969 23:59:30 GMT", secs(30)),
            ],
        );
    }

    #[test]
    fn delay_seconds_forms() {
        assert_waits(
            SystemTime::now(),
            &[
                ("0", Duration::ZERO),
                ("007", secs(7)),
                (" \t120 ", secs(120)),
                ("18446744073709551615", secs(u64::MAX)),
                // Saturates.
                ("99999999999999999999999999999999", secs(u64::MAX)),
            ],
        );
    }

    #[test]
    fn bad_inputs_give_none() {
        let now = at(NOV_6_1994);
        for bad in [
            "",
            " ",
            "-1",
            "+1",
            "1.5",
            "1e3",
            "0x10",
            "１２０", // full-width digits
            "120 s",
            "1 20",
            "soon",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 GMT trailing",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun,06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "sun, 06 nov 1994 08:49:37 gmt",
            "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 November 1994 08:49:37 GMT",
            "Sunday, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06-Nov-94 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994",
            "Sun Nov  6 08:49:37 1994 GMT",
            "Sun Nov 06 08:49:37 94",
            "Sunday Nov  6 08:49:37 1994",
            "Sund, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn the_calendar_is_checked() {
        let now = at(0);
        for bad in [
            "Mon, 30 Feb 2026 00:00:00 GMT",
            "Sun, 29 Feb 2026 00:00:00 GMT",
            "Mon, 29 Feb 2100 00:00:00 GMT",
            "Thu, 31 Apr 2026 00:00:00 GMT",
            "Thu, 00 Jan 2026 00:00:00 GMT",
            "Sat, 32 Jan 2026 00:00:00 GMT",
            "Thu, 01 Jan 2026 24:00:00 GMT",
            "Thu, 01 Jan 2026 23:60:00 GMT",
            "Thu, 01 Jan 2026 23:59:61 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
        let leap_days = [
            "Sun, 29 Feb 2032 00:00:00 GMT",
            "Tue, 29 Feb 2000 00:00:00 GMT",
        ];
        for good in leap_days {
            assert!(parse_retry_after(good, now).is_some(), "{good:?}");
        }
    }

    #[test]
    fn a_leap_second_counts_as_the_next_minute() {
        let now = at(DEC_31_1999 - 9);
        assert_waits(now, &[("Fri, 31 Dec 1999 23:59:60 GMT", secs(10))]);
    }

    #[test]
    fn a_wrong_weekday_is_rejected() {
        let now = at(0);
        for bad in [
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Monday, 06-Nov-94 08:49:37 GMT",
            "Mon Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc_850_years_lie_within_50_years_of_now() {
        // Seen in 2026: "94" is 1994, "75" is 2075 but "77" is 1977 (2077 is more than 50
        // years ahead), and "10" is 2010.
        let now = at(1_767_225_600); // 2026-01-01
        let year_of = |value: &str| {
            http_date(value, now).map(|date| civil_from_days(unix(date).div_euclid(86_400)).0)
        };
        assert_eq!(year_of("Sunday, 06-Nov-94 08:49:37 GMT"), Some(1994));
        assert_eq!(year_of("Friday, 01-Mar-75 00:00:00 GMT"), Some(2075));
        assert_eq!(year_of("Tuesday, 01-Mar-77 00:00:00 GMT"), Some(1977));
        assert_eq!(year_of("Monday, 01-Mar-10 00:00:00 GMT"), Some(2010));
        // The weekday is checked against the year chosen: 1 March 2077 is a Monday.
        assert_eq!(year_of("Monday, 01-Mar-77 00:00:00 GMT"), None);
    }

    #[test]
    fn httpdate_alone_reads_these_differently() {
        // Why `http_date` rewrites a value before `httpdate` reads it. If this fails, a newer
        // `httpdate` reads them as RFC 9110 does, and the rewriting can go.
        assert!(httpdate::parse_http_date("Fri, 31 Dec 1999 23:59:60 GMT").is_err());
        assert!(httpdate::parse_http_date("Wed, 31 Dec 1969 23:59:30 GMT").is_err());
        // Read in 2026, "75" is 2075 for RFC 9110 (1 March 2075 is a Friday), 1975 for httpdate.
        assert!(httpdate::parse_http_date("Friday, 01-Mar-75 00:00:00 GMT").is_err());
        assert!(httpdate::parse_http_date("Saturday, 01-Mar-75 00:00:00 GMT").is_ok());
        let now = at(1_767_225_600); // 2026-01-01
        assert!(http_date("Friday, 01-Mar-75 00:00:00 GMT", now).is_some());
        assert_eq!(http_date("Saturday, 01-Mar-75 00:00:00 GMT", now), None);
    }

    #[test]
    fn years_before_1970_keep_their_calendar() {
        // Moved by 400-year cycles to be read: leap days and weekdays must survive the move.
        let now = at(0);
        for (value, days) in [
            (
                "Thu, 29 Feb 1968 00:00:00 GMT",
                days_from_civil(1968, 2, 29),
            ),
            ("Sat, 01 Jan 0000 00:00:00 GMT", days_from_civil(0, 1, 1)),
            ("Mon Jan  1 00:00:00 1601", days_from_civil(1601, 1, 1)),
        ] {
            assert_eq!(
                http_date(value, now).map(unix),
                Some(days * 86_400),
                "{value}"
            );
        }
        for bad in [
            "Fri, 29 Feb 1900 00:00:00 GMT",
            "Fri, 29 Feb 1968 00:00:00 GMT",
        ] {
            assert_eq!(http_date(bad, now), None, "{bad}");
        }
    }

    #[test]
    fn civil_day_conversions_agree() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    proptest! {
        #[test]
        fn never_panics_on_any_string(value in any::<String>(), now in any::<i64>()) {
            let now = if now >= 0 {
                UNIX_EPOCH.checked_add(Duration::from_secs(now.unsigned_abs() >> 20))
            } else {
                UNIX_EPOCH.checked_sub(Duration::from_secs(now.unsigned_abs() >> 20))
            };
            let _ = parse_retry_after(&value, now.unwrap_or(UNIX_EPOCH));
        }

        #[test]
        fn never_panics_on_date_shaped_strings(
            value in "[A-Za-z]{3,9}(, |,| )[0-9 ]{1,3}[- ][A-Za-z]{3}[- ][0-9]{2,4} [0-9]{2}:[0-9]{2}:[0-9]{2}( GMT| [0-9]{4})?"
        ) {
            let _ = parse_retry_after(&value, SystemTime::now());
        }

        #[test]
        fn every_imf_fixdate_round_trips(days in -700_000i64..2_900_000, second_of_day in 0i64..86_400) {
            let (year, month, day) = civil_from_days(days);
            let weekday = (days + 4).rem_euclid(7) as usize;
            let value = format!(
                "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
                SHORT_DAYS[weekday],
                day,
                MONTHS[month as usize - 1],
                year,
                second_of_day / 3_600,
                second_of_day / 60 % 60,
                second_of_day % 60,
            );
            let expected = days * 86_400 + second_of_day;
            prop_assert_eq!(http_date(&value, UNIX_EPOCH).map(unix), Some(expected), "{}", value);
        }

        #[test]
        fn any_digits_are_delay_seconds(seconds in any::<u64>()) {
            prop_assert_eq!(
                parse_retry_after(&seconds.to_string(), SystemTime::now()),
                Some(Duration::from_secs(seconds))
            );
        }
    }
}
