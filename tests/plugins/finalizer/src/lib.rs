//! A test plugin for the deletion lifecycle (`kwop:reconciler@0.3`, through the SDK). A `Fin` object gets a
//! ConfigMap `<name>` in each namespace of `spec.elsewhere` (a kind owned across namespaces,
//! tracked by the host's labels) and reports `status.copies` and a Ready condition. When it is
//! deleted, `finalize` does what `spec.finalize` says:
//! - `ok` (default): deletes every copy and is done;
//! - `slow`: deletes the copies and says not yet (asking for a retry only after 10 minutes), and
//!   is done once no copy is left — so it finishes only because the copies' deletions wake it;
//! - `fail`: a failure (retried); `trap`: a panic;
//! - `foreign`: deletes the ConfigMap `spec.foreign` of its own namespace, which is not its own;
//! - `undeclared`: deletes a Secret, a kind it does not own;
//! - `never`: says not yet, every second, forever.
//!
//! Each `finalize` call that returns says so in an event (`FinalizeCalled`), and the one that is
//! done in another (`Finalized`), so tests can count them.
//!
//! It also validates (admission): `spec.validate` `deny` refuses with a violation of
//! `spec.validate`, `warn` allows with a warning, `trap` panics, `loop` never returns (its
//! deadline ends it); anything else allows. It mutates (declaring `spec.note` only):
//! `spec.mutate` `default` sets `spec.note` when unset, `deny` refuses, `trap` panics, `loop` never
//! returns, `outside` changes `spec.validate` (not declared), `rename` changes `metadata.name`.

use kwop_guest::conditions::{set_condition, Condition};
use kwop_guest::serde_json::{json, Value};
use kwop_guest::{
    Admission, Context, Delete, Event, Failure, Finalize, Gvk, Info, Meta, Mutation, Outcome, Reconciler, Violation,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fin {
    metadata: Meta,
    #[serde(default)]
    spec: FinSpec,
    #[serde(default)]
    status: Option<FinStatus>,
}

#[derive(Deserialize, Default)]
struct FinSpec {
    #[serde(default)]
    elsewhere: Vec<String>,
    finalize: Option<String>,
    foreign: Option<String>,
    validate: Option<String>,
}

#[derive(Deserialize, Default)]
struct FinStatus {
    #[serde(default)]
    conditions: Vec<Condition>,
}

fn config_map() -> Gvk {
    Gvk::new("", "v1", "ConfigMap")
}

/// The copies the request says this Fin owns.
fn copies(ctx: &Context) -> Vec<Delete> {
    ctx.owned_json()
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("ConfigMap"))
        .filter_map(|o| {
            let meta = o.get("metadata")?;
            Some(Delete {
                gvk: config_map(),
                namespace: meta.get("namespace").and_then(Value::as_str).map(str::to_string),
                name: meta.get("name")?.as_str()?.to_string(),
            })
        })
        .collect()
}

struct Finalizer;

impl Reconciler for Finalizer {
    type Primary = Fin;

    fn info() -> Info {
        Info::new("finalizer", "1", Gvk::new("test.kwop.dev", "v1", "Fin"))
            .owns_across_namespaces(config_map())
            .finalizes()
            .validates()
            .mutates("spec.note")
    }

    fn mutate(req: Admission<Value>, _ctx: &Context) -> Result<Mutation, Vec<Violation>> {
        let mut o = req.object;
        match o.pointer("/spec/mutate").and_then(Value::as_str) {
            Some("default") if o.pointer("/spec/note").is_none() => o["spec"]["note"] = json!("set by mutate"),
            Some("deny") => return Err(vec![Violation::field("spec.mutate", "mutate says no")]),
            Some("trap") => panic!("mutate exploded"),
            Some("loop") => loop {
                std::hint::black_box(0u64);
            },
            Some("outside") => o["spec"]["validate"] = json!("changed"),
            Some("rename") => o["metadata"]["name"] = json!("renamed"),
            _ => {}
        }
        Ok(Mutation::new(o))
    }

    fn validate(req: Admission<Fin>, _ctx: &Context) -> Result<Vec<String>, Vec<Violation>> {
        match req.object.spec.validate.as_deref() {
            Some("deny") => Err(vec![Violation::field("spec.validate", "deny says no")]),
            Some("warn") => Ok(vec!["warn says: careful".to_string()]),
            Some("trap") => panic!("validate exploded"),
            Some("loop") => loop {
                std::hint::black_box(0u64);
            },
            _ => Ok(vec![]),
        }
    }

    fn reconcile(fin: Fin, ctx: &Context) -> Result<Outcome, Failure> {
        let name = &fin.metadata.name;
        let mut out = Outcome::new();
        for ns in &fin.spec.elsewhere {
            let copy = json!({ "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": name, "namespace": ns }, "data": { "from": name } });
            out = out.apply(&copy)?;
        }
        // Copies in namespaces no longer listed go.
        for d in copies(ctx) {
            if !d.namespace.as_ref().is_some_and(|n| fin.spec.elsewhere.contains(n)) {
                out = out.delete(d);
            }
        }
        let mut conditions = fin.status.map(|s| s.conditions).unwrap_or_default();
        let ready = Condition::new("Ready", true, "Copied", format!("{} copies", fin.spec.elsewhere.len()));
        set_condition(&mut conditions, ready.observed_generation(fin.metadata.generation), ctx.now());
        out.status(&json!({ "copies": fin.spec.elsewhere.len(), "conditions": conditions }))
    }

    fn finalize(fin: Fin, ctx: &Context) -> Result<Finalize, Failure> {
        let copies = copies(ctx);
        let called = Event::normal("FinalizeCalled", format!("finalize saw {} copies", copies.len()));
        let finalized = Event::normal("Finalized", "every copy deleted");
        match fin.spec.finalize.as_deref().unwrap_or("ok") {
            "fail" => Err(Failure::retry("cannot clean up yet: the copies are still needed")),
            "trap" => panic!("finalize exploded"),
            "foreign" => {
                let name = fin.spec.foreign.unwrap_or_default();
                Ok(Finalize::done().delete(Delete { gvk: config_map(), namespace: None, name }).event(called))
            }
            "undeclared" => {
                let secret = Delete { gvk: Gvk::new("", "v1", "Secret"), namespace: None, name: "x".into() };
                Ok(Finalize::done().delete(secret).event(called))
            }
            "never" => Ok(Finalize::not_yet().requeue_after_ms(1000).event(called)),
            "slow" if !copies.is_empty() => {
                let mut f = Finalize::not_yet().requeue_after_ms(600_000).event(called);
                for d in copies {
                    f = f.delete(d);
                }
                Ok(f)
            }
            _ => {
                let mut f = Finalize::done().event(called).event(finalized);
                for d in copies {
                    f = f.delete(d);
                }
                Ok(f)
            }
        }
    }
}

kwop_guest::export!(Finalizer);
