//! Event time: UTC milliseconds since the Unix epoch, and its text forms.
//!
//! Every event carries a [`Timestamp`]; folding reads only these, never the
//! clock, so replay is deterministic. Text forms: RFC 3339 in UTC for input
//! (`2026-11-30T12:00:00Z`, optional fraction, `Z` or `+00:00`; other offsets
//! are converted), and `YYYY-MM-DDTHH:MM:SSZ` for the schema-v4 export.
//! Calendar arithmetic is the proleptic Gregorian "days from civil" algorithm,
//! done by hand because it is twenty lines and sits on the export hot path.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds since 1970-01-01T00:00:00Z (UTC). Ordered, `Copy`, 8 bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Timestamp(pub i64);

/// Why a time string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid time `{input}`: {reason} (expected RFC 3339 UTC, e.g. 2026-11-30T12:00:00Z)")]
pub struct TimeParseError {
    pub input: String,
    pub reason: &'static str,
}

/// How far a write's explicit time may lie after the clock (5 minutes:
/// clock skew between hosts sharing a store), unless forced. Imports and
/// simulations need past times, never future ones; a future stamp would
/// otherwise outlive leases and sort after every real event.
pub const MAX_FUTURE_SKEW_MS: i64 = 5 * 60 * 1000;

/// This process's clock for bounding write times: `$AGENTLOG_NOW` as it was
/// when first asked (it stands in for the clock, README "Time"), else the
/// system clock. A daemon's fast paths use it where the general path reads
/// the same variable, so both refuse the same future times.
pub fn process_clock() -> Timestamp {
    static FIXED: std::sync::OnceLock<Option<Timestamp>> = std::sync::OnceLock::new();
    FIXED
        .get_or_init(|| {
            std::env::var("AGENTLOG_NOW")
                .ok()
                .and_then(|v| Timestamp::parse_rfc3339(&v).ok())
        })
        .unwrap_or_else(Timestamp::now)
}

impl Timestamp {
    /// 0001-01-01T00:00:00Z, the earliest time text input accepts.
    pub const MIN_VALID: Timestamp = Timestamp(-62_135_596_800_000);
    /// 9999-12-31T23:59:59.999Z, the latest time text input accepts.
    pub const MAX_VALID: Timestamp = Timestamp(253_402_300_799_999);

    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }
    pub const fn from_secs(s: i64) -> Self {
        Timestamp(s * 1000)
    }
    pub const fn as_millis(self) -> i64 {
        self.0
    }
    /// The wall clock, for commands given no explicit time.
    pub fn now() -> Self {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_millis() as i64)
    }
    pub const fn add_millis(self, ms: i64) -> Self {
        Timestamp(self.0.saturating_add(ms))
    }
    pub const fn add_secs(self, s: i64) -> Self {
        self.add_millis(s.saturating_mul(1000))
    }
    /// `self - other` in milliseconds (saturating).
    pub const fn millis_since(self, other: Timestamp) -> i64 {
        self.0.saturating_sub(other.0)
    }

    /// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fff…](Z|±HH:MM)`); `t`/`z` and a
    /// space separator are accepted too. Sub-millisecond digits are truncated.
    pub fn parse_rfc3339(input: &str) -> Result<Self, TimeParseError> {
        let err = |reason| TimeParseError {
            input: input.to_string(),
            reason,
        };
        let b = input.trim().as_bytes();
        if b.len() < 20 {
            return Err(err("too short"));
        }
        let num = |range: std::ops::Range<usize>| -> Result<i64, TimeParseError> {
            let mut v = 0i64;
            for &c in &b[range] {
                if !c.is_ascii_digit() {
                    return Err(err("expected a digit"));
                }
                v = v * 10 + i64::from(c - b'0');
            }
            Ok(v)
        };
        if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
            return Err(err("bad separators"));
        }
        if !matches!(b[10], b'T' | b't' | b' ') {
            return Err(err("expected `T` between date and time"));
        }
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
            return Err(err("no such date"));
        }
        if hour > 23 || minute > 59 || second > 60 {
            return Err(err("no such time of day"));
        }
        let mut i = 19;
        let mut millis = 0i64;
        if b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                if i - start < 3 {
                    millis = millis * 10 + i64::from(b[i] - b'0');
                }
                i += 1;
            }
            if i == start {
                return Err(err("empty fraction"));
            }
            for _ in (i - start)..3 {
                millis *= 10;
            }
        }
        let offset_secs = match b.get(i) {
            Some(b'Z' | b'z') if i + 1 == b.len() => 0,
            Some(&sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
                let h = num(i + 1..i + 3)?;
                let m = num(i + 4..i + 6)?;
                if h > 23 || m > 59 {
                    return Err(err("bad UTC offset"));
                }
                let s = h * 3600 + m * 60;
                if sign == b'+' {
                    s
                } else {
                    -s
                }
            }
            _ => return Err(err("expected `Z` or a UTC offset at the end")),
        };
        let days = days_from_civil(year, month, day);
        let secs = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_secs;
        let t = Timestamp(secs * 1000 + millis);
        // An offset can carry 0001-01-01 or 9999-12-31 out of range; the
        // four-digit forms (export, `list`) cannot show such a time.
        if !(Timestamp::MIN_VALID..=Timestamp::MAX_VALID).contains(&t) {
            return Err(err("outside years 0001-9999 once converted to UTC"));
        }
        Ok(t)
    }

    /// Whether `self` lies more than `tolerance_ms` after `clock`: the bound
    /// on how far into the future a write may be stamped (see
    /// [`MAX_FUTURE_SKEW_MS`]).
    pub const fn is_beyond(self, clock: Timestamp, tolerance_ms: i64) -> bool {
        self.0 > clock.0.saturating_add(tolerance_ms)
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` (whole seconds, floor), the schema-v4 form.
    pub fn to_rfc3339_secs(self) -> String {
        let mut s = String::with_capacity(20);
        self.write_rfc3339_secs(&mut s);
        s
    }

    /// Appends `YYYY-MM-DDTHH:MM:SSZ` to `out` without other allocation.
    pub fn write_rfc3339_secs(self, out: &mut String) {
        let (y, mo, d, h, mi, s, _) = self.civil();
        // Each field, zero-padded, then the separator after it.
        for (v, width, then) in [
            (y, 4, '-'),
            (mo, 2, '-'),
            (d, 2, 'T'),
            (h, 2, ':'),
            (mi, 2, ':'),
            (s, 2, 'Z'),
        ] {
            push_num(out, v, width);
            out.push(then);
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, for human output where milliseconds matter.
    pub fn to_rfc3339_millis(self) -> String {
        let mut s = String::with_capacity(24);
        self.write_rfc3339_secs(&mut s);
        s.pop();
        s.push('.');
        push_num(&mut s, self.civil().6, 3);
        s.push('Z');
        s
    }

    fn civil(self) -> (i64, i64, i64, i64, i64, i64, i64) {
        let ms = self.0.rem_euclid(1000);
        let secs = self.0.div_euclid(1000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, mo, d) = civil_from_days(days);
        (y, mo, d, sod / 3600, sod % 3600 / 60, sod % 60, ms)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.rem_euclid(1000) == 0 {
            f.write_str(&self.to_rfc3339_secs())
        } else {
            f.write_str(&self.to_rfc3339_millis())
        }
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimeParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timestamp::parse_rfc3339(s)
    }
}

fn push_num(out: &mut String, v: i64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let start = (buf.len() - width).min(i);
    if v < 0 {
        out.push('-');
    }
    // The digits are ASCII, so this cannot fail.
    out.push_str(std::str::from_utf8(&buf[start..]).unwrap_or("0"));
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(crate) fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(
            Timestamp::parse_rfc3339("1970-01-01T00:00:00Z").unwrap().0,
            0
        );
        let t = Timestamp::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        assert_eq!(t.0, 1_796_040_000_000);
        assert_eq!(t.to_rfc3339_secs(), "2026-11-30T12:00:00Z");
        let t = Timestamp::parse_rfc3339("2000-02-29T23:59:59.1234Z").unwrap();
        assert_eq!(t.to_rfc3339_millis(), "2000-02-29T23:59:59.123Z");
        assert_eq!(t.to_string(), "2000-02-29T23:59:59.123Z");
    }

    #[test]
    fn offsets_convert_to_utc() {
        let a = Timestamp::parse_rfc3339("2026-11-30T13:30:00+01:30").unwrap();
        let b = Timestamp::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        assert_eq!(a, b);
        let c = Timestamp::parse_rfc3339("2026-11-30T11:00:00-01:00").unwrap();
        assert_eq!(c, b);
    }

    #[test]
    fn refuses_nonsense() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00+0100",
            "2026-11-30T12:00:00.Z",
        ] {
            let e = Timestamp::parse_rfc3339(bad).unwrap_err();
            assert!(e.to_string().contains("invalid time"), "{bad}: {e}");
        }
    }

    #[test]
    fn refuses_years_outside_0001_9999_after_the_offset() {
        for bad in [
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00+00:01",
            "0000-12-31T23:59:59Z",
        ] {
            let e = Timestamp::parse_rfc3339(bad).unwrap_err();
            assert!(e.to_string().contains("0001-9999"), "{bad}: {e}");
        }
        let last = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999Z").unwrap();
        assert_eq!(last, Timestamp::MAX_VALID);
        let first = Timestamp::parse_rfc3339("0001-01-01T00:00:00Z").unwrap();
        assert_eq!(first, Timestamp::MIN_VALID);
        assert_eq!(first.to_rfc3339_secs(), "0001-01-01T00:00:00Z");
    }

    #[test]
    fn round_trips_across_eras() {
        for ms in [
            -62_135_596_800_000i64,
            -1,
            0,
            951_782_400_000,
            4_102_444_799_999,
        ] {
            let t = Timestamp(ms - ms.rem_euclid(1000));
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339_secs()).unwrap(), t);
        }
    }
}
