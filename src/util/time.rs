//! Dates in UTC, from seconds since 1970: for people (the report) and for
//! names that sort by time (run directories).

/// Seconds since 1970 now (0 if the clock is before it).
pub(crate) fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The date and time of `secs`: year, month, day, hour, minute, second.
fn civil(secs: i64) -> [i64; 6] {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // civil from days (Howard Hinnant's algorithm)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    [year, month, day, rest / 3600, rest % 3600 / 60, rest % 60]
}

/// "2026-11-25 09:13 UTC".
pub(crate) fn utc(secs: i64) -> String {
    let [y, mo, d, h, mi, _] = civil(secs);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02} UTC")
}

/// "2026-11-25T091302Z": a file name that sorts by time.
pub(crate) fn stamp(secs: i64) -> String {
    let [y, mo, d, h, mi, s] = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}{mi:02}{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_read_in_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(1_795_636_386), "2026-11-25 19:53 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(stamp(1_795_636_386), "2026-11-25T195306Z");
        // names sort as times do
        assert!(stamp(999_999_999) < stamp(1_000_000_000));
    }
}
