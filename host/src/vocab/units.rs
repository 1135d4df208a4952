//! Parsers for durations ("500ms", "1s", "5m") and sizes ("64Mi", "1G", "1048576").

use std::time::Duration;

/// Parses a duration: a number with a unit (ms, s, m, h), several allowed ("1m30s").
pub fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?} (use e.g. 500ms, 2s, 5m): {e}"))
}

/// Parses a byte size with an optional Kubernetes-style suffix (Ki, Mi, Gi, K, M, G).
pub fn bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num.parse().map_err(|_| format!("invalid size {s:?} (use e.g. 64Mi, 1Gi, 1048576)"))?;
    let mult: usize = match unit.trim_end_matches('B') {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "K" | "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return Err(format!("invalid size unit in {s:?} (use Ki, Mi, Gi, K, M or G)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

/// A per-plugin override of the sandbox limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginLimit {
    /// Plugin name (from `info()`).
    pub plugin: String,
    /// Memory limit, if overridden.
    pub memory: Option<usize>,
    /// Deadline, if overridden.
    pub timeout: Option<Duration>,
}

/// Parses `NAME:memory=SIZE,timeout=DURATION` (either key may be omitted).
pub fn plugin_limit(s: &str) -> Result<PluginLimit, String> {
    let (plugin, rest) =
        s.split_once(':').ok_or_else(|| format!("expected NAME:memory=SIZE,timeout=DURATION, got {s:?}"))?;
    let mut l = PluginLimit { plugin: plugin.trim().to_string(), memory: None, timeout: None };
    if l.plugin.is_empty() {
        return Err(format!("missing plugin name in {s:?}"));
    }
    if !super::is_dns_label(&l.plugin) {
        return Err(format!(
            "{:?} cannot be a plugin name (plugin names are DNS labels: lowercase letters, digits and '-')",
            l.plugin
        ));
    }
    for kv in rest.split(',').map(str::trim).filter(|kv| !kv.is_empty()) {
        match kv.split_once('=') {
            Some(("memory", v)) => l.memory = Some(bytes(v)?),
            Some(("timeout", v)) => l.timeout = Some(duration(v)?),
            _ => return Err(format!("unknown limit {kv:?} in {s:?} (memory=SIZE, timeout=DURATION)")),
        }
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(bytes("64Mi"), Ok(64 << 20));
        assert_eq!(bytes("1G"), Ok(1_000_000_000));
        assert_eq!(bytes("512"), Ok(512));
        assert_eq!(bytes("128MiB"), Ok(128 << 20));
        assert!(bytes("lots").is_err());
        assert!(bytes("1Xi").is_err());
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(duration("soon").is_err());
    }

    #[test]
    fn plugin_limits_parse() {
        let l = plugin_limit("guest-foo-py:memory=128Mi,timeout=2s").expect("valid");
        assert_eq!(
            (l.plugin.as_str(), l.memory, l.timeout),
            ("guest-foo-py", Some(128 << 20), Some(Duration::from_secs(2)))
        );
        assert_eq!(plugin_limit("x:timeout=5s").map(|l| l.memory), Ok(None));
        assert!(plugin_limit("no-colon").is_err());
        assert!(plugin_limit("x:cpu=2").is_err());
        assert!(plugin_limit("Guest_Foo:timeout=1s").is_err(), "not a plugin name");
    }
}
