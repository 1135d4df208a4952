//! Outcomes as compared by shadow runs and replays: what `kwop plugin reconcile` prints, with
//! the order of applies, deletes and events made irrelevant, and field paths for what differs.

use super::stats::Verdict;
use crate::outcome::{self, OutcomeLimits};
use crate::plugin::{CallError, RawResult};
use serde_json::{json, Map, Value};

/// The JSON `kwop plugin reconcile` prints for a call's result (the host's decode applied).
pub fn result_json(r: &Result<RawResult, CallError>, limits: &OutcomeLimits) -> Value {
    match r {
        Err(e) => error_json(&e.to_string(), true),
        Ok(Err(f)) => outcome::decode_failure(f.clone(), limits).to_json(),
        Ok(Ok(o)) => match outcome::decode(o.clone(), limits) {
            Ok(o) => o.to_json(),
            Err(r) => error_json(&format!("outcome rejected by the host: {r}"), false),
        },
    }
}

/// The JSON of a failed call.
pub fn error_json(message: &str, retry: bool) -> Value {
    json!({ "error": { "message": message, "retry": retry, "events": [] } })
}

/// Whether a result is a failure.
pub fn failed(v: &Value) -> bool {
    v.get("error").is_some()
}

fn meta<'a>(v: &'a Value, f: &str) -> &'a str {
    v.pointer(&format!("/metadata/{f}")).and_then(Value::as_str).unwrap_or("")
}

/// `Kind namespace/name` of an applied object.
fn object_key(v: &Value) -> String {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let api = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let group = api.rsplit_once('/').map(|(g, _)| format!(".{g}")).unwrap_or_default();
    format!("{kind}{group} {}/{}", meta(v, "namespace"), meta(v, "name"))
}

fn sorted(mut items: Vec<Value>) -> Value {
    items.sort_by_key(|v| v.to_string());
    Value::Array(items)
}

/// `v` with applies keyed by object, deletes and events sorted.
pub fn normalized(v: &Value) -> Value {
    let Some(o) = v.as_object() else { return v.clone() };
    let mut out = Map::new();
    for (k, x) in o {
        let n = match (k.as_str(), x) {
            ("apply", Value::Array(items)) => {
                Value::Object(items.iter().map(|i| (object_key(i), i.clone())).collect::<Map<_, _>>())
            }
            ("delete" | "events", Value::Array(items)) => sorted(items.clone()),
            ("error", e) => normalized(e),
            _ => x.clone(),
        };
        out.insert(k.clone(), n);
    }
    Value::Object(out)
}

/// Field paths where `got` differs from `want` (both normalised first); empty when equal.
pub fn differences(want: &Value, got: &Value) -> Vec<String> {
    let (w, g) = (normalized(want), normalized(got));
    let mut out = Vec::new();
    if w != g {
        diff("", &w, &g, &mut out);
    }
    out
}

/// The verdict on a candidate's result `got` against the active version's `active`.
pub fn verdict(active: &Value, got: &Value) -> Verdict {
    let paths = differences(active, got);
    if paths.is_empty() {
        return Verdict::Identical;
    }
    if failed(got) && !failed(active) {
        let m = got.pointer("/error/message").and_then(Value::as_str).unwrap_or("failed");
        return Verdict::Failing(m.to_string());
    }
    Verdict::Differing(paths)
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 120 {
        format!("{}...", s.chars().take(117).collect::<String>())
    } else {
        s
    }
}

/// Field-level differences between `want` and `got`, as `.path: expected X, got Y` lines.
pub fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let p = format!("{path}.{k}");
                match g.get(k) {
                    Some(gv) => diff(&p, wv, gv, out),
                    None => out.push(format!("{p}: missing (expected {})", short(wv))),
                }
            }
            for (k, gv) in g.iter().filter(|(k, _)| !w.contains_key(*k)) {
                out.push(format!("{path}.{k}: not expected, got {}", short(gv)));
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            for i in 0..w.len().max(g.len()) {
                let p = format!("{path}[{i}]");
                match (w.get(i), g.get(i)) {
                    (Some(wv), Some(gv)) => diff(&p, wv, gv, out),
                    (Some(wv), None) => out.push(format!("{p}: missing (expected {})", short(wv))),
                    (None, Some(gv)) => out.push(format!("{p}: not expected, got {}", short(gv))),
                    (None, None) => {}
                }
            }
        }
        (w, g) if w != g => {
            let p = if path.is_empty() { "(whole outcome)" } else { path };
            out.push(format!("{p}: expected {}, got {}", short(w), short(g)));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(name: &str, ann: &str) -> Value {
        json!({ "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": { "name": name, "namespace": "ns", "annotations": { "a": ann } } })
    }

    #[test]
    fn the_order_of_applies_and_events_does_not_matter() {
        let e1 = json!({ "type": "Normal", "reason": "A", "message": "x" });
        let e2 = json!({ "type": "Normal", "reason": "B", "message": "y" });
        let a = json!({ "apply": [dep("a", "1"), dep("b", "1")], "delete": [], "status": null, "events": [e1, e2] });
        let b = json!({ "apply": [dep("b", "1"), dep("a", "1")], "delete": [], "status": null, "events": [e2, e1] });
        assert_eq!(verdict(&a, &b), Verdict::Identical);
    }

    #[test]
    fn a_changed_field_is_named_by_object_and_path() {
        let a = json!({ "apply": [dep("a", "1")], "status": { "n": 1 } });
        let b = json!({ "apply": [dep("a", "2")], "status": { "n": 1 } });
        let Verdict::Differing(paths) = verdict(&a, &b) else { panic!("differs") };
        assert_eq!(paths, vec![".apply.Deployment.apps ns/a.metadata.annotations.a: expected \"1\", got \"2\""]);
    }

    #[test]
    fn a_failing_candidate_is_failing_not_differing() {
        let a = json!({ "apply": [dep("a", "1")] });
        let b = error_json("plugin trapped: unreachable", true);
        assert_eq!(verdict(&a, &b), Verdict::Failing("plugin trapped: unreachable".into()));
        // Both failing the same way agree.
        assert_eq!(verdict(&b, &b), Verdict::Identical);
    }

    #[test]
    fn differences_are_named_by_field_path() {
        let want = json!({ "apply": [{ "data": { "a": "1", "b": "2" } }], "status": null, "events": [1] });
        let got = json!({ "apply": [{ "data": { "a": "3", "c": "4" } }], "status": null, "events": [1, 2] });
        let mut out = Vec::new();
        diff("", &want, &got, &mut out);
        assert_eq!(
            out,
            vec![
                ".apply[0].data.a: expected \"1\", got \"3\"",
                ".apply[0].data.b: missing (expected \"2\")",
                ".apply[0].data.c: not expected, got \"4\"",
                ".events[1]: not expected, got 2",
            ]
        );
    }
}
