//! A test plugin for CRD conversion (`kwop:reconciler@0.3`): `Conv` objects of `conv.kwop.dev`,
//! stored as `v1` (`spec.size`) and served as `v2` too (`spec.replicas.count`). `spec.mode` and
//! `spec.note` are carried over as they are. Its `convert` does what `spec.mode` says:
//! - anything else (e.g. `good`): converts, and round-trips;
//! - `trap`: panics ("convert exploded on <name>");
//! - `refuse`: says it cannot ("mode refuse: no v2 form for <name>");
//! - `lossy`: drops `spec.note` on the way to v2 (the answer is fine, the round trip is not);
//! - `relabel`: adds the label `converted: "yes"` (a metadata change the host refuses).
//!
//! Its reconcile does nothing: the plugin exists for its conversion.

use kwop_guest::serde_json::{json, Map, Value};
use kwop_guest::{Context, Failure, Gvk, Info, Meta, Outcome, Reconciler};
use serde::Deserialize;

#[derive(Deserialize)]
struct Conv {
    #[allow(dead_code)]
    metadata: Meta,
}

struct Converter;

const GROUP: &str = "conv.kwop.dev";

fn convert(mut object: Value, api_version: &str) -> Result<Value, String> {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let from = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_string();
    let mode = object.pointer("/spec/mode").and_then(Value::as_str).unwrap_or_default().to_string();
    let want = match api_version.split_once('/') {
        Some((GROUP, v @ ("v1" | "v2"))) => v,
        _ => return Err(format!("converts {GROUP} v1 and v2, not {api_version}")),
    };
    match mode.as_str() {
        "trap" => panic!("convert exploded on {name}"),
        "refuse" => return Err(format!("mode refuse: no {want} form for {name}")),
        _ => {}
    }
    let obj = object.as_object_mut().ok_or("not an object")?;
    if from != api_version {
        let spec = obj.entry("spec").or_insert_with(|| Value::Object(Map::new()));
        let spec = spec.as_object_mut().ok_or("spec is not an object")?;
        if want == "v2" {
            if let Some(size) = spec.remove("size") {
                spec.insert("replicas".into(), json!({ "count": size }));
            }
            if mode == "lossy" {
                spec.remove("note");
            }
        } else if let Some(r) = spec.remove("replicas") {
            if let Some(count) = r.get("count") {
                spec.insert("size".into(), count.clone());
            }
        }
    }
    if mode == "relabel" {
        let meta = obj.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            let labels = meta.entry("labels").or_insert_with(|| Value::Object(Map::new()));
            if let Some(l) = labels.as_object_mut() {
                l.insert("converted".into(), json!("yes"));
            }
        }
    }
    obj.insert("apiVersion".into(), json!(api_version));
    Ok(object)
}

impl Reconciler for Converter {
    type Primary = Conv;

    fn info() -> Info {
        Info::new("converter", "0.1.0", Gvk::new(GROUP, "v1", "Conv")).converts(&["v1", "v2"])
    }

    fn reconcile(_: Conv, _: &Context) -> Result<Outcome, Failure> {
        Ok(Outcome::new())
    }

    fn convert(object: Value, api_version: &str) -> Result<Value, String> {
        convert(object, api_version)
    }
}

kwop_guest::export!(Converter);
