//! Label selectors in the API server's string syntax, matched against cached objects.
//!
//! kube-core can match selectors but not parse the string form, which is what plugins pass.

use serde_json::Value;
use std::collections::BTreeMap;

/// One requirement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selector(Vec<Req>);

/// A selector string that does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid label selector {input:?}: {why}")]
pub struct SelectorError {
    input: String,
    why: &'static str,
}

impl Selector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let err = |why| SelectorError { input: input.to_string(), why };
        let mut reqs = Vec::new();
        for part in split_top_level(input).map_err(err)? {
            let part = part.trim();
            if part.is_empty() {
                if input.trim().is_empty() {
                    continue;
                }
                return Err(err("empty requirement"));
            }
            reqs.push(parse_req(part).map_err(err)?);
        }
        Ok(Selector(reqs))
    }

    /// Whether a label map satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Whether labels, given as a lookup, match.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => label(k) == Some(v.as_str()),
            Req::NotEq(k, v) => label(k) != Some(v.as_str()),
            Req::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => label(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Req::Exists(k) => label(k).is_some(),
            Req::NotExists(k) => label(k).is_none(),
        })
    }

    /// Whether the `labels` object of a JSON object matches.
    pub fn matches_json(&self, labels: Option<&Value>) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let map: BTreeMap<String, String> = labels
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default();
        self.matches(&map)
    }
}

fn split_top_level(s: &str) -> Result<Vec<&str>, &'static str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err("unbalanced ')'");
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '('");
    }
    out.push(&s[start..]);
    Ok(out)
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.len() <= 317 && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn parse_req(p: &str) -> Result<Req, &'static str> {
    if let Some(k) = p.strip_prefix('!') {
        let k = k.trim();
        return if valid_key(k) { Ok(Req::NotExists(k.into())) } else { Err("invalid key") };
    }
    for (op, ctor) in [("!=", Req::NotEq as fn(String, String) -> Req), ("==", Req::Eq), ("=", Req::Eq)] {
        if let Some((k, v)) = p.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return Err("invalid key");
            }
            if !valid_value(v) {
                return Err("invalid value");
            }
            return Ok(ctor(k.into(), v.into()));
        }
    }
    let words: Vec<&str> = p.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let (k, rest) = (words[0].trim(), words[1].trim());
        let (notin, set) = if let Some(s) = rest.strip_prefix("notin") {
            (true, s)
        } else if let Some(s) = rest.strip_prefix("in") {
            (false, s)
        } else {
            return Err("expected '=', '!=', 'in' or 'notin'");
        };
        let set = set.trim();
        let inner = set.strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or("expected '(values)'")?;
        let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
        if !valid_key(k) {
            return Err("invalid key");
        }
        if values.iter().any(|v| !valid_value(v)) {
            return Err("invalid value");
        }
        return Ok(if notin { Req::NotIn(k.into(), values) } else { Req::In(k.into(), values) });
    }
    if valid_key(p) {
        Ok(Req::Exists(p.into()))
    } else {
        Err("invalid key")
    }
}

/// The selector in the API server's syntax (`app=web,tier in (a,b),!legacy`); empty for "all".
impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match r {
                Req::Eq(k, v) => format!("{k}={v}"),
                Req::NotEq(k, v) => format!("{k}!={v}"),
                Req::In(k, vs) => format!("{k} in ({})", vs.join(",")),
                Req::NotIn(k, vs) => format!("{k} notin ({})", vs.join(",")),
                Req::Exists(k) => k.clone(),
                Req::NotExists(k) => format!("!{k}"),
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_operator_matches_as_the_api_server_does() {
        let l = labels(&[("app", "nginx"), ("tier", "web"), ("env", "prod")]);
        for (sel, want) in [
            ("", true),
            ("app=nginx", true),
            ("app==nginx", true),
            ("app!=nginx", false),
            ("app!=other", true),
            ("missing!=x", true),
            ("tier in (web, db)", true),
            ("tier notin (web)", false),
            ("missing notin (web)", true),
            ("env", true),
            ("!env", false),
            ("!missing", true),
            ("app=nginx,tier in (db,web),!legacy", true),
            ("app=nginx,env=dev", false),
        ] {
            let s = Selector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for bad in ["=x", "a in (b", "a in b", "a,,b", "a b c", "a=b c"] {
            assert!(Selector::parse(bad).is_err(), "{bad} should not parse");
        }
    }
}
