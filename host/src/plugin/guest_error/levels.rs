//! The level a line of guest output says it has, where it says one: Go's `log/slog` (text and
//! JSON handlers), Python's `logging` default format, and the common `[WARN] …` / `ERROR: …`
//! prefixes. The level and timestamp the line carries are taken off (the host's log has its
//! own); a line that says nothing keeps its stream's level.

/// A level a guest line can state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// trace / debug.
    Debug,
    /// info / notice.
    Info,
    /// warn / warning.
    Warn,
    /// error / fatal / critical / panic.
    Error,
}

fn parse(word: &str) -> Option<Level> {
    match word.trim().to_ascii_lowercase().as_str() {
        "trace" | "debug" => Some(Level::Debug),
        "info" | "notice" => Some(Level::Info),
        "warn" | "warning" => Some(Level::Warn),
        "error" | "err" | "fatal" | "critical" | "crit" | "panic" => Some(Level::Error),
        _ => None,
    }
}

/// The level `line` states, and the line without it (and without its own timestamp).
pub fn level_of(line: &str) -> Option<(Level, String)> {
    let t = line.trim_start();
    // JSON: {"time":"…","level":"INFO","msg":"…",…} (slog's JSON handler, most JSON loggers).
    if t.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(t).ok()?;
        let level = parse(v.get("level").or_else(|| v.get("severity"))?.as_str()?)?;
        let mut rest = v.as_object()?.clone();
        for k in ["time", "ts", "timestamp", "level", "severity"] {
            rest.remove(k);
        }
        let msg = rest.remove("msg").or_else(|| rest.remove("message"));
        let mut text = msg.as_ref().and_then(|m| m.as_str()).unwrap_or_default().to_string();
        if !rest.is_empty() {
            text = format!("{text} {}", serde_json::Value::Object(rest)).trim().to_string();
        }
        return Some((level, text));
    }
    // slog's text handler: `time=2026-… level=INFO msg="…" k=v`.
    let no_time = match t.strip_prefix("time=") {
        Some(r) => r.split_once(' ').map_or("", |(_, rest)| rest),
        None => t,
    };
    if let Some(r) = no_time.strip_prefix("level=") {
        let (word, rest) = r.split_once(' ').unwrap_or((r, ""));
        let level = parse(word)?;
        let rest = rest.strip_prefix("msg=").unwrap_or(rest);
        let rest = match rest
            .strip_prefix('"')
            .and_then(|r| r.split_once("\" ").or_else(|| r.strip_suffix('"').map(|m| (m, ""))))
        {
            Some((msg, attrs)) => format!("{} {attrs}", msg.replace("\\\"", "\"")).trim().to_string(),
            None => rest.to_string(),
        };
        return Some((level, rest));
    }
    // `[WARN] …`, `[error] …`.
    if let Some(r) = t.strip_prefix('[') {
        let (word, rest) = r.split_once(']')?;
        return Some((parse(word)?, rest.trim_start().to_string()));
    }
    // Python's default `WARNING:root:…`, and `ERROR: …`.
    let (word, rest) = t.split_once(':')?;
    if word.len() > 8 || word.chars().any(|c| !c.is_ascii_uppercase()) {
        return None;
    }
    let level = parse(word)?;
    let rest = match rest.split_once(':') {
        // `WARNING:logger.name:message`: the logger name is kept, as Python prints it.
        Some((logger, msg)) if !logger.contains(' ') && !logger.is_empty() => format!("{logger}: {}", msg.trim_start()),
        _ => rest.trim_start().to_string(),
    };
    Some((level, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_a_line_states_is_read_and_taken_off() {
        let slog = r#"time=2026-12-07T10:00:00.000Z level=INFO msg="synced foo" replicas=3"#;
        assert_eq!(level_of(slog), Some((Level::Info, "synced foo replicas=3".into())));
        assert_eq!(level_of("level=WARN msg=slow"), Some((Level::Warn, "slow".into())));
        let json = r#"{"time":"2026-12-07T10:00:00Z","level":"ERROR","msg":"boom","foo":"x"}"#;
        assert_eq!(level_of(json), Some((Level::Error, r#"boom {"foo":"x"}"#.into())));
        assert_eq!(level_of("WARNING:root:disk low"), Some((Level::Warn, "root: disk low".into())));
        assert_eq!(level_of("INFO: starting"), Some((Level::Info, "starting".into())));
        assert_eq!(level_of("[debug] details"), Some((Level::Debug, "details".into())));
    }

    #[test]
    fn a_line_that_states_no_level_is_left_alone() {
        for l in [
            "hello",
            "Error in foo: x",
            "panicked at src/lib.rs:3:5:",
            "{not json",
            "[1/3] step",
            "Note: x",
            "URL: http://x",
        ] {
            assert_eq!(level_of(l), None, "{l}");
        }
    }
}
