//! Native unit tests of a plugin without a host: a fake cache, captured log lines, and one call
//! that parses the primary as the host would.
//!
//! ```ignore
//! use kwop_guest::testing::{self, FakeCache};
//! let cache = FakeCache::new().with(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}));
//! let out = testing::reconcile::<MyPlugin>(&foo_json, cache).expect("an outcome");
//! assert_eq!(out.applied_as::<serde_json::Value>(0).unwrap()["data"]["k"], "v");
//! assert_eq!(testing::logs(), vec![(testing::Level::Debug, "creating x".to_string())]);
//! ```
//!
//! [`finalize`] runs a plugin's `finalize` the same way, for a primary being deleted.

use crate::{Admission, Context, Failure, Finalize, Gvk, Operation, Outcome, Reconciler, Time, Violation};
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;

/// A log level, as the plugin's `log` calls name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `log::debug`.
    Debug,
    /// `log::info`.
    Info,
    /// `log::warn`.
    Warn,
    /// `log::error`.
    Error,
}

thread_local! {
    static LOGS: RefCell<Vec<(Level, String)>> = const { RefCell::new(Vec::new()) };
}

#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub(crate) fn record_log(level: Level, message: &str) {
    LOGS.with(|l| l.borrow_mut().push((level, message.to_string())));
}

/// The lines logged on this thread since the last call (native code only), oldest first.
pub fn logs() -> Vec<(Level, String)> {
    LOGS.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// Objects standing in for the host's cache, matched by apiVersion, kind, namespace and name.
#[derive(Debug, Clone, Default)]
pub struct FakeCache {
    objects: Vec<Value>,
}

fn meta<'a>(o: &'a Value, field: &str) -> Option<&'a str> {
    o.get("metadata")?.get(field)?.as_str().filter(|s| !s.is_empty())
}

impl FakeCache {
    /// An empty cache.
    pub fn new() -> Self {
        FakeCache::default()
    }

    /// Adds an object given as JSON (it needs `apiVersion`, `kind` and `metadata.name`).
    pub fn with(mut self, object: Value) -> Self {
        self.objects.push(object);
        self
    }

    /// Adds any serialisable object, e.g. a k8s-openapi `ConfigMap` (whose `apiVersion` and
    /// `kind` k8s-openapi writes itself).
    pub fn with_object<T: Serialize>(self, object: &T) -> Self {
        self.with(serde_json::to_value(object).unwrap_or(Value::Null))
    }

    fn of<'a>(&'a self, gvk: &'a Gvk) -> impl Iterator<Item = &'a Value> + 'a {
        let api_version =
            if gvk.group.is_empty() { gvk.version.clone() } else { format!("{}/{}", gvk.group, gvk.version) };
        self.objects.iter().filter(move |o| {
            o.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
                && o.get("kind").and_then(Value::as_str) == Some(gvk.kind.as_str())
        })
    }

    pub(crate) fn get(&self, gvk: &Gvk, namespace: Option<&str>, name: &str) -> Option<String> {
        self.of(gvk).find(|o| meta(o, "name") == Some(name) && meta(o, "namespace") == namespace).map(Value::to_string)
    }

    pub(crate) fn query(&self, gvk: &Gvk, namespace: Option<&str>, selector: Option<&str>) -> Vec<String> {
        self.of(gvk)
            .filter(|o| namespace.is_none() || meta(o, "namespace") == namespace)
            .filter(|o| selector.is_none_or(|s| matches_selector(o, s)))
            .map(Value::to_string)
            .collect()
    }

    /// What the host puts in `request.owned` for a primary with `uid` in `namespace`: objects
    /// whose controller owner reference is the primary (in its namespace; anywhere when it is
    /// cluster-scoped), and objects carrying the tracking label `kwop.dev/owner-uid` with its uid
    /// (kinds owned across namespaces), each sorted by namespace and name.
    pub(crate) fn belonging_to(&self, uid: &str, namespace: Option<&str>) -> Vec<String> {
        let mut found: Vec<&Value> = self
            .objects
            .iter()
            .filter(|_| !uid.is_empty())
            .filter(|o| {
                let by_reference = (namespace.is_none() || meta(o, "namespace") == namespace)
                    && o.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|refs| {
                        refs.iter().any(|r| {
                            r.get("controller").and_then(Value::as_bool) == Some(true)
                                && r.get("uid").and_then(Value::as_str) == Some(uid)
                        })
                    });
                let by_label = o.pointer("/metadata/labels/kwop.dev~1owner-uid").and_then(Value::as_str) == Some(uid);
                by_reference || by_label
            })
            .collect();
        found.sort_by_key(|o| (o.get("kind").and_then(Value::as_str), meta(o, "namespace"), meta(o, "name")));
        found.into_iter().map(Value::to_string).collect()
    }
}

/// Label selectors in the host's syntax: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
/// `k notin (a,b)`, joined by commas.
fn matches_selector(o: &Value, selector: &str) -> bool {
    let labels = o.pointer("/metadata/labels");
    let got = |key: &str| labels.and_then(|l| l.get(key.trim())).and_then(Value::as_str);
    split_terms(selector).iter().all(|term| {
        let term = term.trim();
        let set = |rest: &str| -> Vec<String> {
            rest.trim().trim_start_matches('(').trim_end_matches(')').split(',').map(|v| v.trim().to_string()).collect()
        };
        if let Some((k, rest)) = term.split_once(" notin ") {
            return got(k).is_none_or(|v| !set(rest).iter().any(|x| x == v));
        }
        if let Some((k, rest)) = term.split_once(" in ") {
            return got(k).is_some_and(|v| set(rest).iter().any(|x| x == v));
        }
        if let Some((k, v)) = term.split_once("!=") {
            return got(k) != Some(v.trim());
        }
        if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            return got(k) == Some(v.trim());
        }
        match term.strip_prefix('!') {
            Some(k) => got(k).is_none(),
            None => got(term).is_some(),
        }
    })
}

/// Splits a selector at the commas outside parentheses.
fn split_terms(selector: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&selector[start..]);
    out.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

/// One reconcile as the host would run it: `primary` (the whole object, JSON) is parsed as the
/// plugin's primary type, the cache is `cache`, and the primary's namespace and uid decide what
/// `None` namespaces mean and which cached objects are its own.
/// The reconcile's instant is [`Time::EXAMPLE`]; [`reconcile_at`] chooses it.
pub fn reconcile<R: Reconciler>(primary: &Value, cache: FakeCache) -> Result<Outcome, Failure> {
    reconcile_at::<R>(primary, cache, Time::EXAMPLE)
}

/// [`reconcile`] at the instant `now`.
pub fn reconcile_at<R: Reconciler>(primary: &Value, cache: FakeCache, now: Time) -> Result<Outcome, Failure> {
    let (parsed, ctx) = prepare::<R>(primary, cache, now)?;
    R::reconcile(parsed, &ctx)
}

/// One `finalize` as the host would run it for `primary` being deleted (as [`reconcile`]).
pub fn finalize<R: Reconciler>(primary: &Value, cache: FakeCache) -> Result<Finalize, Failure> {
    let (parsed, ctx) = prepare::<R>(primary, cache, Time::EXAMPLE)?;
    R::finalize(parsed, &ctx)
}

/// One `validate` as the host would run it: `object` (and on UPDATE `old`) parsed as the plugin's
/// primary type, reads answered from `cache` in the object's namespace.
pub fn validate<R: Reconciler>(
    object: &Value,
    old: Option<&Value>,
    cache: FakeCache,
) -> Result<Vec<String>, Vec<Violation>> {
    let parse = |v: &Value| {
        serde_json::from_value::<R::Primary>(v.clone())
            .map_err(|e| vec![Violation::object(format!("the object does not parse: {e}"))])
    };
    let req = Admission {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        object: parse(object)?,
        old: old.map(parse).transpose()?,
        user: "tester".into(),
        dry_run: false,
        subresource: None,
    };
    // What the request owns does not matter to admission: nothing is written.
    let ctx = Context::fake(cache, meta(object, "namespace"), "").at(Time::EXAMPLE);
    R::validate(req, &ctx)
}

/// One `mutate` as the host would run it (the host also refuses changes outside the declared
/// paths; `kwop plugin test` checks that offline).
pub fn mutate<R: Reconciler>(
    object: &Value,
    old: Option<&Value>,
    cache: FakeCache,
) -> Result<crate::Mutation, Vec<Violation>> {
    let req = Admission {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        object: object.clone(),
        old: old.cloned(),
        user: "tester".into(),
        dry_run: false,
        subresource: None,
    };
    let ctx = Context::fake(cache, meta(object, "namespace"), "").at(Time::EXAMPLE);
    R::mutate(req, &ctx)
}

/// Converts `object` to `api_version` and back, as the host checks a conversion: `Ok` with the
/// converted object only if the round trip gives `object` back.
pub fn round_trip<R: Reconciler>(object: &Value, api_version: &str) -> Result<Value, String> {
    let there = R::convert(object.clone(), api_version)?;
    let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let back = R::convert(there.clone(), from)?;
    if &back != object {
        return Err(format!("converting to {api_version} and back to {from} changed the object: {back} != {object}"));
    }
    Ok(there)
}

fn prepare<R: Reconciler>(primary: &Value, cache: FakeCache, now: Time) -> Result<(R::Primary, Context), Failure> {
    let parsed: R::Primary = serde_json::from_value(primary.clone())
        .map_err(|e| Failure::permanent(format!("the primary object does not parse: {e}")))?;
    let ctx = Context::fake(cache, meta(primary, "namespace"), meta(primary, "uid").unwrap_or_default()).at(now);
    Ok((parsed, ctx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_as_on_the_host() {
        let o = json!({"metadata": {"labels": {"env": "prod", "team": "a"}}});
        for (sel, want) in [
            ("env=prod", true),
            ("env==prod,team=a", true),
            ("env!=prod", false),
            ("env in (prod, staging)", true),
            ("env notin (prod)", false),
            ("env in (dev),team=a", false),
            ("!legacy,team", true),
            ("legacy", false),
            ("", true),
        ] {
            assert_eq!(matches_selector(&o, sel), want, "{sel}");
        }
    }
}
