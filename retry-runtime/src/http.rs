//! HTTP's `Retry-After`: how long a server asked the caller to wait.
//!
//! A `503 Service Unavailable` or `429 Too Many Requests` may carry `Retry-After` with either a
//! number of seconds or a date (RFC 9110 §10.2.3). [`parse_retry_after`] turns both into the
//! pause left from `now`; a classifier hands it to the loop as
//! [`Verdict::RetryAfter`](crate::Verdict::RetryAfter), and the next pause is then at least that
//! long.
//!
//! ```
//! use retry_runtime::http::{parse_retry_after, RETRY_AFTER};
//! use retry_runtime::Verdict;
//! use std::time::{Duration, SystemTime};
//!
//! // What a client sees in a 503, and what its classifier answers.
//! let (name, value) = ("Retry-After", "120");
//! assert!(name.eq_ignore_ascii_case(RETRY_AFTER));
//! let verdict = match parse_retry_after(value, SystemTime::now()) {
//!     Some(pause) => Verdict::RetryAfter(pause),
//!     None => Verdict::Retry,
//! };
//! assert_eq!(verdict, Verdict::RetryAfter(Duration::from_secs(120)));
//! ```
//!
//! This module needs no dependency. With the feature `http`, [`crate::integrations`] adds a
//! classifier for `http::StatusCode` and `http::Response` that reads the header from the
//! response.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The header's name, `Retry-After`, as RFC 9110 spells it. Header names are case-insensitive:
/// compare with [`str::eq_ignore_ascii_case`], or look it up in a header map that does.
///
/// ```
/// assert!("retry-after".eq_ignore_ascii_case(retry_runtime::http::RETRY_AFTER));
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
/// Never panics, whatever the input.
///
/// ```
/// use retry_runtime::http::parse_retry_after;
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
    let date = http_date(value.as_bytes(), now)?;
    Some(time_until(date, now))
}

/// Transient by status code: the table shared by the `http` and `reqwest` integrations.
///
/// 408 Request Timeout, 429 Too Many Requests, 500 Internal Server Error, 502 Bad Gateway,
/// 503 Service Unavailable and 504 Gateway Timeout say "not now"; every other status either
/// succeeded or will answer the same way to the same request.
#[cfg_attr(not(any(feature = "http", feature = "reqwest")), allow(dead_code))]
pub(crate) const fn transient_status(code: u16) -> bool {
    matches!(code, 408 | 429 | 500 | 502 | 503 | 504)
}

/// `1*DIGIT`, saturating.
fn delay_seconds(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(value.bytes().fold(0u64, |seconds, digit| {
        seconds
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

/// The time from `now` to `date` (seconds since the Unix epoch), or zero if `date` has passed.
fn time_until(date: i64, now: SystemTime) -> Duration {
    const NANOS: i128 = 1_000_000_000;
    let now = match now.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_nanos() as i128,
        Err(before) => -(before.duration().as_nanos() as i128),
    };
    let left = i128::from(date) * NANOS - now;
    if left <= 0 {
        return Duration::ZERO;
    }
    // At most ten thousand years: fits a u64 of seconds.
    let seconds = u64::try_from(left / NANOS).unwrap_or(u64::MAX);
    Duration::new(seconds, (left % NANOS) as u32)
}

/// An HTTP-date in any of its three forms, as seconds since the Unix epoch.
fn http_date(value: &[u8], now: SystemTime) -> Option<i64> {
    let mut input = Cursor(value);
    let date = if let Some(weekday) = input.weekday(&SHORT_DAYS) {
        if input.eat(b", ") {
            // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
            let day = input.digits(2)?;
            input.expect(b' ')?;
            let month = input.month()?;
            input.expect(b' ')?;
            let year = input.digits(4)?;
            input.expect(b' ')?;
            let time = input.time_of_day()?;
            input.expect_all(b" GMT")?;
            input.end()?;
            Date {
                weekday,
                year,
                month,
                day,
                time,
            }
        } else {
            // asctime-date: "Sun Nov  6 08:49:37 1994"
            input.expect(b' ')?;
            let month = input.month()?;
            input.expect(b' ')?;
            let day = if input.eat(b" ") {
                input.digits(1)?
            } else {
                input.digits(2)?
            };
            input.expect(b' ')?;
            let time = input.time_of_day()?;
            input.expect(b' ')?;
            let year = input.digits(4)?;
            input.end()?;
            Date {
                weekday,
                year,
                month,
                day,
                time,
            }
        }
    } else {
        // rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT"
        let weekday = input.weekday(&LONG_DAYS)?;
        input.expect_all(b", ")?;
        let day = input.digits(2)?;
        input.expect(b'-')?;
        let month = input.month()?;
        input.expect(b'-')?;
        let year = near_year(input.digits(2)?, now);
        input.expect(b' ')?;
        let time = input.time_of_day()?;
        input.expect_all(b" GMT")?;
        input.end()?;
        Date {
            weekday,
            year,
            month,
            day,
            time,
        }
    };
    date.to_unix()
}

/// The year ending in `yy` that lies within 50 years of `now`'s year, later ones first.
fn near_year(yy: i64, now: SystemTime) -> i64 {
    let now_year = civil_from_days(days_since_epoch(now)).0;
    let mut year = now_year - now_year.rem_euclid(100) + yy;
    if year > now_year + 50 {
        year -= 100;
    } else if year <= now_year - 50 {
        year += 100;
    }
    year
}

/// Whole days from the Unix epoch to `now`, negative before it.
fn days_since_epoch(now: SystemTime) -> i64 {
    let seconds = match now.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    seconds.div_euclid(86_400)
}

const SHORT_DAYS: [&[u8]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
const LONG_DAYS: [&[u8]; 7] = [
    b"Sunday",
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// The fields of an HTTP-date as written, before any check.
struct Date {
    /// 0 = Sunday.
    weekday: i64,
    year: i64,
    /// 1 = January.
    month: i64,
    day: i64,
    /// (hour, minute, second).
    time: (i64, i64, i64),
}

impl Date {
    /// Seconds since the Unix epoch, if the fields name a real instant and the weekday fits.
    fn to_unix(&self) -> Option<i64> {
        let (hour, minute, second) = self.time;
        let valid = (1..=days_in_month(self.year, self.month)).contains(&self.day)
            && (0..24).contains(&hour)
            && (0..60).contains(&minute)
            && (0..=60).contains(&second);
        let days = days_from_civil(self.year, self.month, self.day);
        // 1970-01-01 was a Thursday.
        let weekday = (days + 4).rem_euclid(7);
        (valid && weekday == self.weekday)
            .then_some(days * 86_400 + hour * 3_600 + minute * 60 + second)
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`): the year is counted from March, so that the leap day ends it.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400; // [0, 399]
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1; // [0, 365], from 1 March
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`]: (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days.saturating_add(719_468);
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
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Reads an HTTP-date left to right; each method consumes only on success.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn eat(&mut self, expected: &[u8]) -> bool {
        match self.0.strip_prefix(expected) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(&[byte]).then_some(())
    }

    fn expect_all(&mut self, expected: &[u8]) -> Option<()> {
        self.eat(expected).then_some(())
    }

    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }

    /// Exactly `count` ASCII digits.
    fn digits(&mut self, count: usize) -> Option<i64> {
        let digits = self.0.get(..count)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.0 = &self.0[count..];
        Some(
            digits
                .iter()
                .fold(0, |n, digit| n * 10 + i64::from(digit - b'0')),
        )
    }

    /// One of `names`, as its index, if no letter follows it.
    fn weekday(&mut self, names: &[&[u8]; 7]) -> Option<i64> {
        let index = names.iter().position(|name| {
            // "Sun" must not match the start of "Sunday".
            self.0.starts_with(name) && !self.0.get(name.len()).is_some_and(u8::is_ascii_alphabetic)
        })?;
        self.0 = &self.0[names[index].len()..];
        Some(index as i64)
    }

    fn month(&mut self) -> Option<i64> {
        let index = MONTHS.iter().position(|name| self.0.starts_with(name))?;
        self.0 = &self.0[3..];
        Some(index as i64 + 1)
    }

    /// `hour ":" minute ":" second`, each two digits.
    fn time_of_day(&mut self) -> Option<(i64, i64, i64)> {
        let hour = self.digits(2)?;
        self.expect(b':')?;
        let minute = self.digits(2)?;
        self.expect(b':')?;
        let second = self.digits(2)?;
        Some((hour, minute, second))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(unix_seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(unix_seconds)
    }

    /// 1994-11-06 08:49:37 UTC, the instant of RFC 9110's date examples.
    const NOV_6_1994: u64 = 784_111_777;
    /// 1999-12-31 23:59:59 UTC, the instant of RFC 9110's `Retry-After` example.
    const DEC_31_1999: u64 = 946_684_799;

    #[test]
    fn rfc_9110_retry_after_examples() {
        let now = at(DEC_31_1999 - 3_600);
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now),
            Some(Duration::from_secs(3_600))
        );
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn rfc_9110_date_examples_all_three_forms() {
        let now = at(NOV_6_1994 - 10);
        for form in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                parse_retry_after(form, now),
                Some(Duration::from_secs(10)),
                "{form}"
            );
        }
    }

    #[test]
    fn counts_from_now_to_the_nanosecond() {
        let now = at(DEC_31_1999) - Duration::from_millis(1_500);
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now),
            Some(Duration::from_millis(1_500))
        );
    }

    #[test]
    fn a_date_in_the_past_means_now() {
        let now = at(NOV_6_1994 + 1);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", at(NOV_6_1994)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn a_clock_before_1970_still_counts() {
        let now = UNIX_EPOCH - Duration::from_secs(60);
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Wed, 31 Dec 1969 23:59:30 GMT", now),
            Some(Duration::from_secs(30))
        );
    }

    #[test]
    fn delay_seconds_forms() {
        let now = SystemTime::now();
        assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("007", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" \t120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("18446744073709551615", now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            parse_retry_after("99999999999999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX)),
            "saturates"
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
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 1999 23:59:60 GMT", now),
            Some(Duration::from_secs(10))
        );
    }

    #[test]
    fn a_wrong_weekday_is_rejected() {
        let now = at(0);
        assert_eq!(
            parse_retry_after("Mon, 06 Nov 1994 08:49:37 GMT", now),
            None
        );
        assert_eq!(
            parse_retry_after("Monday, 06-Nov-94 08:49:37 GMT", now),
            None
        );
        assert_eq!(parse_retry_after("Mon Nov  6 08:49:37 1994", now), None);
    }

    #[test]
    fn rfc_850_years_lie_within_50_years_of_now() {
        // Seen in 2026: "94" is 1994, "75" is 2075 but "77" is 1977 (2077 is more than 50
        // years ahead), and "10" is 2010.
        let now = at(1_767_225_600); // 2026-01-01
        let year_of = |value: &str| {
            http_date(value.as_bytes(), now).map(|s| civil_from_days(s.div_euclid(86_400)).0)
        };
        assert_eq!(year_of("Sunday, 06-Nov-94 08:49:37 GMT"), Some(1994));
        assert_eq!(year_of("Friday, 01-Mar-75 00:00:00 GMT"), Some(2075));
        assert_eq!(year_of("Tuesday, 01-Mar-77 00:00:00 GMT"), Some(1977));
        assert_eq!(year_of("Monday, 01-Mar-10 00:00:00 GMT"), Some(2010));
        // The weekday is checked against the year chosen: 1 March 2077 is a Monday.
        assert_eq!(year_of("Monday, 01-Mar-77 00:00:00 GMT"), None);
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

    #[test]
    fn status_table() {
        for transient in [408, 429, 500, 502, 503, 504] {
            assert!(transient_status(transient), "{transient}");
        }
        for not in [
            100, 200, 204, 304, 400, 401, 403, 404, 409, 422, 501, 505, 511,
        ] {
            assert!(!transient_status(not), "{not}");
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
                std::str::from_utf8(SHORT_DAYS[weekday]).unwrap(),
                day,
                std::str::from_utf8(MONTHS[month as usize - 1]).unwrap(),
                year,
                second_of_day / 3_600,
                second_of_day / 60 % 60,
                second_of_day % 60,
            );
            let unix = days * 86_400 + second_of_day;
            prop_assert_eq!(http_date(value.as_bytes(), UNIX_EPOCH), Some(unix), "{}", value);
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
