//! `spec.namespaceSelector` (a `metav1.LabelSelector`) as the host's label-selector string, with
//! the API server's validation of keys, values and operators.
//!
//! The string is what `cache.query` takes: `k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
//! comma-joined — `matchLabels` first (sorted by key), then `matchExpressions` in their order,
//! each set's values sorted. The empty selector (no labels, no expressions) is the empty string:
//! it selects every namespace, as Kubernetes' LabelSelector does.

use crate::types::LabelSelector;

/// The selector string for `selector`, or why the selector is invalid (naming the field).
pub fn to_query(selector: &LabelSelector) -> Result<String, String> {
    let mut terms = Vec::new();
    for (key, value) in &selector.match_labels {
        let field = format!("spec.namespaceSelector.matchLabels[{key:?}]");
        check_key(key).map_err(|why| format!("{field}: invalid label key {key:?}: {why}"))?;
        check_value(value).map_err(|why| format!("{field}: invalid label value {value:?}: {why}"))?;
        terms.push(format!("{key}={value}"));
    }
    for (i, r) in selector.match_expressions.iter().enumerate() {
        let field = format!("spec.namespaceSelector.matchExpressions[{i}]");
        check_key(&r.key).map_err(|why| format!("{field}.key: invalid label key {:?}: {why}", r.key))?;
        let mut values = r.values.clone();
        values.sort();
        values.dedup();
        for v in &values {
            check_value(v).map_err(|why| format!("{field}.values: invalid label value {v:?}: {why}"))?;
        }
        let set = || format!("({})", values.join(","));
        let term = match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!("{field}.values: must be non-empty when operator is {}", r.operator));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!("{field}.values: must be empty when operator is {}", r.operator));
            }
            "In" => format!("{} in {}", r.key, set()),
            "NotIn" => format!("{} notin {}", r.key, set()),
            "Exists" => r.key.clone(),
            "DoesNotExist" => format!("!{}", r.key),
            other => {
                return Err(format!(
                    "{field}.operator: {other:?} is not a valid operator (In, NotIn, Exists or DoesNotExist)"
                ));
            }
        };
        terms.push(term);
    }
    Ok(terms.join(","))
}

/// A qualified name, as label keys are: an optional DNS-subdomain prefix and `/`, then a name of
/// at most 63 characters (alphanumerics, `-`, `_`, `.`; alphanumeric at both ends).
fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        check_dns_subdomain(p).map_err(|why| format!("prefix part {why}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    check_name_part(name).map_err(|why| format!("name part {why}"))
}

/// A label value: empty, or a name part (at most 63 characters).
fn check_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name_part(value)
}

fn check_name_part(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    let inner_ok = s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    let ends_ok = s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if inner_ok && ends_ok {
        Ok(())
    } else {
        Err("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into())
    }
}

/// RFC 1123 subdomain (at most 253 characters).
fn check_dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if s.split('.').all(label_ok) {
        Ok(())
    } else {
        Err("must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character".into())
    }
}

/// Whether `s` is a DNS label (RFC 1123, at most 63 characters): a valid namespace name.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && check_dns_subdomain(s).is_ok() && !s.contains('.')
}

/// Whether `s` is a DNS subdomain (RFC 1123, at most 253 characters): a valid ConfigMap or
/// Secret name.
pub fn is_dns_subdomain(s: &str) -> bool {
    check_dns_subdomain(s).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Requirement;
    use std::collections::BTreeMap;

    fn req(key: &str, operator: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn selector(labels: &[(&str, &str)], exprs: Vec<Requirement>) -> LabelSelector {
        LabelSelector {
            match_labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            match_expressions: exprs,
        }
    }

    #[test]
    fn every_operator_has_its_string_form_labels_first_and_sorted() {
        let s = selector(
            &[("team", "a"), ("env", "prod")],
            vec![
                req("tier", "In", &["web", "db", "web"]),
                req("zone", "NotIn", &["x"]),
                req("example.com/managed", "Exists", &[]),
                req("legacy", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(
            to_query(&s).as_deref(),
            Ok("env=prod,team=a,tier in (db,web),zone notin (x),example.com/managed,!legacy")
        );
    }

    #[test]
    fn the_empty_selector_selects_everything() {
        assert_eq!(to_query(&LabelSelector::default()).as_deref(), Ok(""));
    }

    #[test]
    fn an_empty_label_value_is_valid() {
        assert_eq!(to_query(&selector(&[("flag", "")], vec![])).as_deref(), Ok("flag="));
    }

    #[test]
    fn invalid_selectors_name_the_field_and_the_problem() {
        for (s, want) in [
            (
                selector(&[], vec![req("a", "Matches", &["x"])]),
                "matchExpressions[0].operator: \"Matches\" is not a valid operator",
            ),
            (
                selector(&[], vec![req("a", "In", &[])]),
                "matchExpressions[0].values: must be non-empty when operator is In",
            ),
            (selector(&[], vec![req("a", "NotIn", &[])]), "must be non-empty when operator is NotIn"),
            (selector(&[], vec![req("a", "Exists", &["x"])]), "must be empty when operator is Exists"),
            (selector(&[], vec![req("a", "DoesNotExist", &["x"])]), "must be empty when operator is DoesNotExist"),
            (selector(&[("bad key", "x")], vec![]), "matchLabels[\"bad key\"]: invalid label key \"bad key\""),
            (selector(&[("k", "-x")], vec![]), "invalid label value \"-x\""),
            (selector(&[("k", &"v".repeat(64))], vec![]), "must be no more than 63 characters"),
            (selector(&[("Example.com/k", "v")], vec![]), "prefix part must be a lowercase RFC 1123 subdomain"),
            (selector(&[("example.com/", "v")], vec![]), "name part must be non-empty"),
            (selector(&[], vec![req("", "Exists", &[])]), "matchExpressions[0].key: invalid label key \"\""),
            (
                selector(&[], vec![req("a", "In", &["ok", "not ok"])]),
                "matchExpressions[0].values: invalid label value \"not ok\"",
            ),
        ] {
            let got = to_query(&s).expect_err(want);
            assert!(got.contains(want), "{got:?} should contain {want:?}");
            assert!(got.starts_with("spec.namespaceSelector."), "{got}");
        }
    }

    #[test]
    fn names_are_checked_as_the_api_server_does() {
        assert!(is_dns_label("team-a") && !is_dns_label("team.a") && !is_dns_label("Team") && !is_dns_label(""));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("app.config-1") && !is_dns_subdomain("app_config") && !is_dns_subdomain("-a"));
    }
}
