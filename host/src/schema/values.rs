//! The API server's value validation of built-in kinds, for the fields plugins write most, so an
//! offline check (`kwop plugin reconcile --crd`, fixtures) refuses what the API server would (a
//! 422) instead of passing it and leaving a half-written set on the cluster: object and
//! container names, label keys and values, ConfigMap/Secret keys, ports, replica counts and
//! Ingress hosts — apimachinery's `validation` rules (`IsDNS1123Subdomain`, `IsDNS1123Label`,
//! `IsQualifiedName`, `IsValidLabelValue`, `IsConfigMapKey`, `IsValidPortNum`,
//! `IsValidPortName`). No maintained Rust crate carries these rules, so the common ones are here;
//! what is not listed is left to the API server.

use super::structural::Violation;
use serde_json::Value;

fn dns_label(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    ok.then_some(()).ok_or_else(|| {
        format!("{s:?} is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63)")
    })
}

fn dns_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(|l| dns_label(l).is_ok());
    ok.then_some(()).ok_or_else(|| {
        format!("{s:?} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253)")
    })
}

fn label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if prefix.is_some_and(|p| dns_subdomain(p).is_err()) || !label_name(name) {
        return Err(format!("{s:?} is not a qualified name (an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"));
    }
    Ok(())
}

fn label_value(s: &str) -> Result<(), String> {
    (s.is_empty() || label_name(s)).then_some(()).ok_or_else(|| {
        format!("{s:?} is not a label value (empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)")
    })
}

fn port(v: &Value) -> Result<(), String> {
    match v.as_i64() {
        Some(p) if (1..=65535).contains(&p) => Ok(()),
        Some(p) => Err(format!("{p} is not a valid port number (1-65535)")),
        None => Ok(()),
    }
}

fn port_or_name(v: &Value) -> Result<(), String> {
    match v {
        Value::String(s) => {
            let ok = !s.is_empty()
                && s.len() <= 15
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && s.bytes().any(|b| b.is_ascii_lowercase())
                && !s.starts_with('-')
                && !s.ends_with('-')
                && !s.contains("--");
            ok.then_some(()).ok_or_else(|| {
                format!("{s:?} is not a port name (IANA_SVC_NAME: at most 15 lowercase letters, digits and '-')")
            })
        }
        other => port(other),
    }
}

/// What the API server's value validation would refuse in `object` of `kind`.
pub fn check(kind: &str, object: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut at = |path: String, r: Result<(), String>| {
        if let Err(message) = r {
            out.push(Violation { path, message });
        }
    };
    if let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) {
        // Services and Namespaces are DNS labels (they become DNS names themselves).
        let r = if matches!(kind, "Service" | "Namespace") { dns_label(name) } else { dns_subdomain(name) };
        at(".metadata.name".into(), r);
    }
    for (field, check) in [("labels", true), ("annotations", false)] {
        for (k, v) in object.pointer(&format!("/metadata/{field}")).and_then(Value::as_object).into_iter().flatten() {
            at(format!(".metadata.{field}.{k}"), qualified_name(k));
            if let (true, Some(v)) = (check, v.as_str()) {
                at(format!(".metadata.{field}.{k}"), label_value(v));
            }
        }
    }
    if matches!(kind, "ConfigMap" | "Secret") {
        for field in ["data", "binaryData", "stringData"] {
            for k in object.get(field).and_then(Value::as_object).into_iter().flatten().map(|(k, _)| k) {
                let ok = !k.is_empty()
                    && k.len() <= 253
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
                at(
                    format!(".{field}.{k}"),
                    ok.then_some(())
                        .ok_or_else(|| format!("{k:?} is not a valid key (letters, digits, '-', '_' or '.')")),
                );
            }
        }
    }
    if let Some(r) = object.pointer("/spec/replicas").and_then(Value::as_i64).filter(|r| *r < 0) {
        at(".spec.replicas".into(), Err(format!("{r} must be greater than or equal to 0")));
    }
    if kind == "Service" {
        for (i, p) in object.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
            for f in ["port", "nodePort"] {
                if let Some(v) = p.get(f) {
                    at(format!(".spec.ports[{i}].{f}"), port(v));
                }
            }
            if let Some(v) = p.get("targetPort") {
                at(format!(".spec.ports[{i}].targetPort"), port_or_name(v));
            }
            if let Some(n) = p.get("name").and_then(Value::as_str) {
                at(format!(".spec.ports[{i}].name"), dns_label(n));
            }
        }
    }
    if kind == "Ingress" {
        for (i, r) in object.pointer("/spec/rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if let Some(h) = r.get("host").and_then(Value::as_str) {
                let bare = h.strip_prefix("*.").unwrap_or(h);
                let r = if h.parse::<std::net::IpAddr>().is_ok() {
                    Err(format!("{h:?} must be a DNS name, not an IP address"))
                } else {
                    dns_subdomain(bare)
                };
                at(format!(".spec.rules[{i}].host"), r);
            }
        }
    }
    let template = match kind {
        "Pod" => object.get("spec"),
        "CronJob" => object.pointer("/spec/jobTemplate/spec/template/spec"),
        _ => object.pointer("/spec/template/spec"),
    };
    let base = match kind {
        "Pod" => ".spec".to_string(),
        "CronJob" => ".spec.jobTemplate.spec.template.spec".to_string(),
        _ => ".spec.template.spec".to_string(),
    };
    for list in ["containers", "initContainers"] {
        for (i, c) in template.and_then(|t| t.get(list)).and_then(Value::as_array).into_iter().flatten().enumerate() {
            if let Some(n) = c.get("name").and_then(Value::as_str) {
                at(format!("{base}.{list}[{i}].name"), dns_label(n));
            }
            for (j, p) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
                if let Some(v) = p.get("containerPort") {
                    at(format!("{base}.{list}[{i}].ports[{j}].containerPort"), port(v));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(kind: &str, o: Value) -> Vec<String> {
        check(kind, &o).into_iter().map(|v| v.path).collect()
    }

    #[test]
    fn what_the_api_server_refuses_is_refused_by_field() {
        let ing = json!({"metadata": {"name": "web"}, "spec": {"rules": [{"host": "Not_A_DNS_Name!"}, {"host": "*.example.com"}, {"host": "10.0.0.1"}]}});
        assert_eq!(paths("Ingress", ing), vec![".spec.rules[0].host", ".spec.rules[2].host"]);
        let svc = json!({"metadata": {"name": "web.x"}, "spec": {"ports": [{"port": 0, "targetPort": "http"}, {"port": 80, "targetPort": 70000, "name": "Web"}]}});
        assert_eq!(
            paths("Service", svc),
            vec![".metadata.name", ".spec.ports[0].port", ".spec.ports[1].targetPort", ".spec.ports[1].name"]
        );
        let dep = json!({"metadata": {"name": "ok.name", "labels": {"app.kubernetes.io/name": "web", "bad key!": "x", "v": "-bad"}},
            "spec": {"replicas": -1, "template": {"spec": {"containers": [{"name": "Web", "ports": [{"containerPort": 99999}]}]}}}});
        assert_eq!(
            paths("Deployment", dep),
            vec![
                ".metadata.labels.bad key!",
                ".metadata.labels.v",
                ".spec.replicas",
                ".spec.template.spec.containers[0].name",
                ".spec.template.spec.containers[0].ports[0].containerPort"
            ]
        );
        let cm = json!({"metadata": {"name": "c"}, "data": {"ok.key_1": "", "no/slash": ""}});
        assert_eq!(paths("ConfigMap", cm), vec![".data.no/slash"]);
    }

    #[test]
    fn sound_objects_pass() {
        let dep = json!({"metadata": {"name": "web", "labels": {"app": "web", "empty": ""}, "annotations": {"kwop.dev/x": "any text at all"}},
            "spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 8080}]}]}}}});
        assert!(check("Deployment", &dep).is_empty());
        let job = json!({"metadata": {"name": "j"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}});
        assert!(check("CronJob", &job).is_empty());
    }
}
