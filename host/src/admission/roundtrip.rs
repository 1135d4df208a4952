//! The checks on what a plugin's `convert` returns, pure and shared by the webhook
//! (`/convert/<plugin>`), its sampled round trips and the offline tools.
//!
//! [`converted`]: one answer — it parses as an object, has the `apiVersion` asked for, the input's
//! `kind`, and `metadata` identical to the input's. The API server itself refuses an answer with
//! another `apiVersion`, `kind` or `uid`, and silently restores every other `metadata` field except
//! `labels` and `annotations`, which it takes; the host is stricter and refuses any `metadata`
//! change, labels and annotations included: a conversion that rewrites them would make an object's
//! labels depend on the version it is read in (and selectors with them).
//!
//! [`check`]: a round trip — A converted to B and back must give A exactly.

use serde_json::Value;

/// Why an answer of `convert` is refused: a sentence naming what is wrong.
pub type Refusal = String;

/// Parses and checks the answer `text` of converting `input` to `desired` (`group/version`).
pub fn converted(input: &Value, text: &str, desired: &str) -> Result<Value, Refusal> {
    let out: Value = serde_json::from_str(text).map_err(|e| format!("its answer is not JSON: {e}"))?;
    if !out.is_object() {
        return Err(format!("its answer is not an object: {}", short(&out)));
    }
    let api_version = out.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if api_version != desired {
        return Err(format!("its answer has apiVersion {api_version:?}, not the {desired:?} asked for"));
    }
    let (kind, want_kind) = (out.get("kind").and_then(Value::as_str), input.get("kind").and_then(Value::as_str));
    if kind != want_kind {
        return Err(format!(
            "its answer has kind {:?}, not the object's {:?}",
            kind.unwrap_or_default(),
            want_kind.unwrap_or_default()
        ));
    }
    let changes = differences(input.get("metadata"), out.get("metadata"));
    if !changes.is_empty() {
        return Err(format!("it changed metadata, which a conversion must leave untouched ({})", changes.join("; ")));
    }
    Ok(out)
}

/// A round trip: `original` converted to `converted` and that converted back to `back` must give
/// `original` again (with `metadata` untouched on the way).
pub fn check(original: &Value, converted: &Value, back: &Value) -> Result<(), Refusal> {
    let changes = differences(original.get("metadata"), converted.get("metadata"));
    if !changes.is_empty() {
        return Err(format!("the conversion changed metadata ({})", changes.join("; ")));
    }
    if original != back {
        let mut lines = Vec::new();
        crate::shadow::compare::diff("", original, back, &mut lines);
        let to = converted.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let from = original.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        return Err(format!(
            "converting {from} to {to} and back does not give the object back ({})",
            first(lines, 5).join("; ")
        ));
    }
    Ok(())
}

fn differences(want: Option<&Value>, got: Option<&Value>) -> Vec<String> {
    let (w, g) = (want.unwrap_or(&Value::Null), got.unwrap_or(&Value::Null));
    if w == g {
        return Vec::new();
    }
    let mut lines = Vec::new();
    crate::shadow::compare::diff(".metadata", w, g, &mut lines);
    first(lines, 5)
}

fn first(mut lines: Vec<String>, n: usize) -> Vec<String> {
    if lines.len() > n {
        let more = lines.len() - n;
        lines.truncate(n);
        lines.push(format!("and {more} more"));
    }
    lines
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(77).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn alpha() -> Value {
        json!({"apiVersion": "g/v1", "kind": "Foo", "metadata": {"name": "x", "namespace": "n", "uid": "u",
            "labels": {"a": "b"}}, "spec": {"size": 2}})
    }

    fn beta() -> Value {
        json!({"apiVersion": "g/v2", "kind": "Foo", "metadata": {"name": "x", "namespace": "n", "uid": "u",
            "labels": {"a": "b"}}, "spec": {"replicas": {"count": 2}}})
    }

    #[test]
    fn an_answer_in_the_version_asked_with_the_same_kind_and_metadata_is_taken() {
        assert_eq!(converted(&alpha(), &beta().to_string(), "g/v2"), Ok(beta()));
    }

    #[test]
    fn every_wrong_answer_is_refused_saying_what_is_wrong() {
        let e = converted(&alpha(), "{not json", "g/v2").expect_err("not JSON");
        assert!(e.starts_with("its answer is not JSON"), "{e}");
        let e = converted(&alpha(), "[1]", "g/v2").expect_err("not an object");
        assert!(e.contains("not an object"), "{e}");
        let e = converted(&alpha(), &alpha().to_string(), "g/v2").expect_err("version");
        assert!(e.contains("apiVersion \"g/v1\", not the \"g/v2\" asked for"), "{e}");
        let mut other = beta();
        other["kind"] = json!("Bar");
        let e = converted(&alpha(), &other.to_string(), "g/v2").expect_err("kind");
        assert!(e.contains("kind \"Bar\", not the object's \"Foo\""), "{e}");
        let mut relabelled = beta();
        relabelled["metadata"]["labels"]["a"] = json!("c");
        relabelled["metadata"]["annotations"] = json!({"k": "v"});
        let e = converted(&alpha(), &relabelled.to_string(), "g/v2").expect_err("metadata");
        assert!(e.contains("changed metadata") && e.contains(".metadata.labels.a: expected \"b\", got \"c\""), "{e}");
        assert!(e.contains(".metadata.annotations: not expected"), "{e}");
    }

    #[test]
    fn a_round_trip_must_give_the_object_back() {
        assert_eq!(check(&alpha(), &beta(), &alpha()), Ok(()));
        let mut lost = alpha();
        lost["spec"]["size"] = json!(1);
        let e = check(&alpha(), &beta(), &lost).expect_err("lossy");
        assert!(e.contains("converting g/v1 to g/v2 and back does not give the object back"), "{e}");
        assert!(e.contains(".spec.size: expected 2, got 1"), "{e}");
        let mut renamed = beta();
        renamed["metadata"]["name"] = json!("y");
        let e = check(&alpha(), &renamed, &alpha()).expect_err("metadata");
        assert!(e.contains(".metadata.name"), "{e}");
    }
}
