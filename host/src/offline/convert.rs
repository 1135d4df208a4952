//! Conversion offline (`kwop plugin test`): a primary object of a plugin that converts is taken
//! through every version the plugin declares and back, each answer checked as the host's webhook
//! checks it ([`crate::admission::roundtrip`]), so a conversion that loses a field, changes
//! `metadata` or fails is caught before a cluster sees it.

use crate::admission::roundtrip;
use crate::plugin::{CallSpec, ConversionRequest, LoadedPlugin};
use serde_json::Value;

/// One `convert` of `object` to `desired`, checked: the converted object, or why not (the
/// plugin's own words where it refused).
pub fn convert_offline(p: &LoadedPlugin, object: &Value, desired: &str) -> Result<Value, String> {
    let spec = CallSpec::new(String::new(), &object.to_string());
    let req = ConversionRequest { object: object.to_string(), desired_api_version: desired.to_string() };
    match p.engine().block_on(p.convert(req, spec, None)) {
        Ok(Ok(text)) => roundtrip::converted(object, &text, desired),
        Ok(Err(plugin_says)) => Err(plugin_says),
        Err(e) => Err(e.to_string()),
    }
}

/// `object` round-tripped through each version in the plugin's `converts` other than its own:
/// one line per failure, naming the version (empty when every round trip gives it back).
pub fn round_trips(p: &LoadedPlugin, object: &Value) -> Vec<String> {
    let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let Some((group, own)) = from.split_once('/') else {
        return vec![format!("conversion: the object's apiVersion {from:?} has no group")];
    };
    let mut failures = Vec::new();
    for v in p.info.converts.iter().filter(|v| v.as_str() != own) {
        let to = format!("{group}/{v}");
        let verdict = convert_offline(p, object, &to).and_then(|there| {
            let back = convert_offline(p, &there, &from).map_err(|e| format!("converting it back to {from}: {e}"))?;
            roundtrip::check(object, &there, &back)
        });
        if let Err(e) = verdict {
            failures.push(format!("conversion to {to} and back: {} cannot convert it: {e}", p.info.name));
        }
    }
    failures
}
