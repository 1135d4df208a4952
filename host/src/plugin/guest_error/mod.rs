//! What a plugin printed, read the way its language means it: a Python traceback, a JavaScript
//! error with its stack, a Rust panic. Such an error is what a reconcile error, a Warning event
//! and `kwop plugin reconcile` show first; the wasm backtrace of the trap goes to the debug log.
//! Output is also logged here, under the target `kwop::plugin`, one record per traceback.

use super::errors::CallError;

mod go;
pub mod levels;

/// The tracing target of everything a plugin says (stdout, stderr, `log` calls).
pub const TARGET: &str = "kwop::plugin";

/// The most a reconcile error quotes of a guest's own error (an event note holds ~1 KB).
const MAX_MESSAGE: usize = 900;

/// What a guest wrote to stdout and stderr during one call.
#[derive(Debug, Default, Clone)]
pub struct GuestOutput {
    /// stdout, lossy UTF-8.
    pub stdout: String,
    /// stderr, lossy UTF-8.
    pub stderr: String,
}

/// Splits output into records: a Python traceback, a Rust panic, or a line with the indented
/// lines under it (a JavaScript stack) stays one record.
pub fn records(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let indented = |l: &str| l.starts_with([' ', '\t']);
    while i < lines.len() {
        let start = i;
        let first = lines[i];
        i += 1;
        if first.trim().is_empty() {
            continue;
        }
        if first.starts_with("Traceback (most recent call last)") {
            // frames are indented; the exception line that ends it is not
            while i < lines.len() && (indented(lines[i]) || lines[i].trim().is_empty()) {
                i += 1;
            }
            i = (i + 1).min(lines.len());
        } else if first.contains("panicked at") {
            // the message follows on its own lines, up to Rust's "note: run with RUST_BACKTRACE"
            while i < lines.len() && i - start < 40 {
                i += 1;
                if lines[i - 1].starts_with("note:") {
                    break;
                }
            }
        } else {
            // StarlingMonkey prints "message", then "Stack:" and indented frames
            if i < lines.len() && lines[i].trim_end() == "Stack:" {
                i += 1;
            }
            while i < lines.len() && indented(lines[i]) {
                i += 1;
            }
        }
        let record = lines[start..i].join("\n");
        let record = record.trim_end();
        if !record.is_empty() {
            out.push(record.to_string());
        }
    }
    out
}

/// The guest's own account of a failure, if its output has one: the last traceback, panic or
/// uncaught error, with a hint for the mistakes whose message does not say where.
pub fn guest_message(out: &GuestOutput) -> Option<String> {
    let mut found = None;
    for r in records(&out.stderr).into_iter().chain(records(&out.stdout)) {
        if let Some(m) = explain_record(&r) {
            found = Some(m);
        }
    }
    found
}

fn explain_record(r: &str) -> Option<String> {
    let first = r.lines().next().unwrap_or_default();
    if first.starts_with("Traceback (most recent call last)") {
        let last = r.lines().last().unwrap_or_default().trim();
        return Some(format!("{last}\n{r}"));
    }
    if let Some(at) = first.find("panicked at") {
        let body: Vec<&str> = r.lines().skip(1).filter(|l| !l.starts_with("note:")).collect();
        let place = first[at..].trim_end_matches(':');
        let message = body.join("\n");
        // componentize-py's runtime panics with the Python exception it could not handle, e.g.
        // while converting the value `reconcile` returned into WIT types.
        if let Some(py) = python_error_in_panic(&message) {
            return Some(format!("{py}{}", python_hint(&py)));
        }
        return Some(if message.is_empty() { place.to_string() } else { format!("{message} ({place})") });
    }
    // componentize-js lowers a thrown value as the `failure` record; a thrown Error has no
    // `events`, and the glue fails reading it, losing the error's own message.
    if r.contains("is undefined") && r.contains("export_reconcile") {
        return Some(format!(
            "reconcile threw a value that is not a failure record {{message, events, retry}} (a JavaScript Error?); \
             its message is lost in the component's glue: catch errors in reconcile and throw \
             {{message: `${{e}}\\n${{e.stack}}`, events: [], retry: true}} instead (as `kwop plugin new --lang js` does)\n{r}"
        ));
    }
    // An uncaught JavaScript error, as StarlingMonkey prints it: "Error: boom" then "Stack:" and
    // the frames.
    const JS: [&str; 8] =
        ["Error", "TypeError", "ReferenceError", "RangeError", "SyntaxError", "URIError", "EvalError", "InternalError"];
    if r.lines().nth(1).map(str::trim_end) == Some("Stack:") {
        return Some(r.to_string());
    }
    if let Some(m) = go::go_failure(r) {
        return Some(m);
    }
    let head = first.trim_start_matches("Uncaught ").trim_start_matches("Exception: ");
    if JS.iter().any(|e| head.starts_with(&format!("{e}: ")) || head == *e) {
        return Some(r.trim_start_matches("Uncaught ").to_string());
    }
    None
}

/// `TypeError: 'dict' object ...` from `PyErr { type: <class 'TypeError'>, value:
/// TypeError("'dict' object ..."), traceback: ... }`.
fn python_error_in_panic(message: &str) -> Option<String> {
    let at = message.find(", value: ")? + ", value: ".len();
    let rest = &message[at..];
    let open = rest.find('(')?;
    let name = &rest[..open];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.') {
        return None;
    }
    let inner = &rest[open + 1..];
    let args = match inner.rsplit_once("), traceback") {
        Some((a, _)) => a,
        None => inner.trim_end().trim_end_matches('}').trim_end().strip_suffix(')').unwrap_or(inner),
    };
    // The repr of the exception's argument: one pair of quotes around the message, whose own
    // quotes stay (`"'dict' object is not an instance of 'str'"`).
    let text = ['"', '\''].iter().find_map(|q| args.strip_prefix(*q).and_then(|t| t.strip_suffix(*q))).unwrap_or(args);
    Some(format!("{name}: {text}"))
}

fn python_hint(err: &str) -> &'static str {
    if err.starts_with("TypeError") && err.contains("is not an instance of 'str'") {
        " (raised while converting what reconcile returned into WIT types: a `json` field — \
         Outcome.apply items, Outcome.status — takes JSON text, json.dumps(...), not a dict)"
    } else if err.starts_with("TypeError") || err.starts_with("AttributeError") {
        " (raised while converting what the plugin returned into WIT types: check each field \
         against wit/reconciler.wit)"
    } else {
        ""
    }
}

/// A wasmtime trap message without its wasm backtrace (logged at debug): the cause, e.g. `wasm
/// trap: wasm \`unreachable\` instruction executed`, or the host's own reason (`plugins cannot
/// sleep ...`).
fn trap_summary(trap: &str) -> String {
    let frame = |l: &str| {
        let t = l.trim_start();
        l.starts_with([' ', '\t'])
            && (t.split_once(':').is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit())) || t.starts_with("at "))
    };
    // `{:#}` puts the cause after the last frame, on its line: `    1: 0x99 - f!g: the cause`.
    let kept: Vec<&str> = trap
        .lines()
        .filter(|l| !l.contains("wasm backtrace") && !l.trim().is_empty())
        .filter_map(|l| match frame(l) {
            true => l.trim_start().split_once(':').and_then(|(_, rest)| rest.split_once(": ")).map(|(_, c)| c.trim()),
            false => Some(l.trim()),
        })
        .collect();
    let cause = match kept.iter().position(|l| *l == "Caused by:") {
        Some(at) => &kept[at + 1..],
        None => &kept[..],
    };
    let text = cause.iter().filter(|l| **l != "Caused by:").copied().collect::<Vec<_>>().join("; ");
    if text.is_empty() {
        "wasm trap".to_string()
    } else {
        text
    }
}

fn cap(s: String) -> String {
    if s.len() <= MAX_MESSAGE {
        return s;
    }
    let mut end = MAX_MESSAGE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... (the rest is in the host's log)", &s[..end])
}

/// Rewrites a trap so its message is the guest's own error (when its output has one) followed
/// by the kind of trap; the wasm backtrace is logged at debug level.
pub fn explain(err: CallError, out: &GuestOutput, plugin: &str, object: &str) -> CallError {
    match err {
        CallError::Trap(trap) => {
            tracing::debug!(target: TARGET, plugin, object, "plugin trap with its wasm backtrace: {trap}");
            let summary = trap_summary(&trap);
            CallError::Trap(cap(match guest_message(out) {
                Some(m) => format!("{m}\n({summary})"),
                None => summary,
            }))
        }
        other => other,
    }
}

/// Logs a guest's output under [`TARGET`]: at the level a line states ([`levels`]: Go's slog,
/// Python's logging, `[WARN]` prefixes), else stdout at info and stderr at warn; one record per
/// traceback, at most `max_records` per stream (the rest is counted).
pub fn log_output(out: &GuestOutput, plugin: &str, object: &str, max_records: u32, dropped_bytes: [usize; 2]) {
    for ((stream, text), dropped_bytes) in
        [("stdout", &out.stdout), ("stderr", &out.stderr)].into_iter().zip(dropped_bytes)
    {
        let records = records(text);
        for r in records.iter().take(max_records as usize) {
            let default = if stream == "stdout" { levels::Level::Info } else { levels::Level::Warn };
            let (level, r) = levels::level_of(r).unwrap_or_else(|| (default, r.to_string()));
            match level {
                levels::Level::Debug => tracing::debug!(target: TARGET, plugin, object, stream, "{r}"),
                levels::Level::Info => tracing::info!(target: TARGET, plugin, object, stream, "{r}"),
                levels::Level::Warn => tracing::warn!(target: TARGET, plugin, object, stream, "{r}"),
                levels::Level::Error => tracing::error!(target: TARGET, plugin, object, stream, "{r}"),
            }
        }
        let dropped_records = records.len().saturating_sub(max_records as usize);
        if dropped_records > 0 || dropped_bytes > 0 {
            tracing::warn!(target: TARGET, plugin, object, stream, dropped_records, dropped_bytes, "plugin output over the per-call limit was dropped");
        }
    }
}

#[cfg(test)]
mod tests;
