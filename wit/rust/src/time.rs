//! Instants as the host gives them (`request.now`), and as Kubernetes writes them
//! (`metav1.Time`: RFC 3339, UTC, whole seconds).

/// An instant: seconds and nanoseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    pub seconds: u64,
    /// Nanoseconds past `seconds`.
    pub nanoseconds: u32,
}

impl Time {
    /// 2026-01-01T00:00:00Z: the instant of native tests that do not choose one.
    pub const EXAMPLE: Time = Time { seconds: 1_767_225_600, nanoseconds: 0 };

    /// An instant from whole seconds since the epoch.
    pub const fn from_seconds(seconds: u64) -> Self {
        Time { seconds, nanoseconds: 0 }
    }

    pub(crate) fn from_wit(t: &crate::wit::Instant) -> Self {
        Time { seconds: t.seconds, nanoseconds: t.nanoseconds }
    }

    /// As `metav1.Time` serialises: `2026-12-06T12:00:00Z` (RFC 3339, UTC, whole seconds).
    pub fn rfc3339(&self) -> String {
        let days = self.seconds / 86_400;
        let secs = self.seconds % 86_400;
        let (y, m, d) = civil_from_days(days as i64);
        format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::Time;

    #[test]
    fn instants_are_written_as_kubernetes_writes_them() {
        assert_eq!(Time::from_seconds(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(Time::EXAMPLE.rfc3339(), "2026-01-01T00:00:00Z");
        assert_eq!(Time::from_seconds(951_782_400).rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(Time { seconds: 1_796_559_722, nanoseconds: 999_999_999 }.rfc3339(), "2026-12-06T12:22:02Z");
        assert_eq!(Time::from_seconds(4_107_542_399).rfc3339(), "2100-02-28T23:59:59Z");
    }
}
