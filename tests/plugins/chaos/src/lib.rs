//! A deliberately bad plugin for the sandbox and write-fence tests. `spec.mode` picks the
//! misbehaviour; `ok` behaves (applies one ConfigMap named after the object).

#![allow(unsafe_code)]

wit_bindgen::generate!({ path: "../../../wit", world: "reconciler" });

use kwop::reconciler::cache;
use kwop::reconciler::log::{log, Level};
use kwop::reconciler::types::{Event, EventType, Gvk};
use serde_json::{json, Value};

struct Chaos;

fn cm(name: &str, ns: Option<&str>, data: Value) -> String {
    let mut meta = json!({ "name": name });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data }).to_string()
}

fn ok(apply: Vec<String>, status: Value) -> Result<Outcome, Failure> {
    Ok(Outcome {
        apply,
        delete: vec![],
        status: Some(status.to_string()),
        events: vec![Event {
            severity: EventType::Normal,
            reason: "Done".into(),
            message: "chaos plugin applied".into(),
        }],
        requeue_after_ms: None,
    })
}

impl Guest for Chaos {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "chaos".into(),
            version: "1".into(),
            primary: Gvk { group: "test.kwop.dev".into(), version: "v1".into(), kind: "Chaos".into() },
            owns: vec![Gvk { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() }],
            reads: vec![],
        }
    }

    fn reconcile(req: Request) -> Result<Outcome, Failure> {
        let primary: Value = serde_json::from_str(&req.primary).unwrap_or_default();
        let name = primary.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("x").to_string();
        let target = primary.pointer("/spec/target").and_then(Value::as_str).unwrap_or(&name).to_string();
        let mode = primary.pointer("/spec/mode").and_then(Value::as_str).unwrap_or("ok").to_string();
        let data = json!({ "mode": mode });
        match mode.as_str() {
            "ok" => ok(vec![cm(&target, None, data)], json!({ "phase": "ok" })),
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = x.wrapping_add(std::hint::black_box(1));
                    std::hint::black_box(x);
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![7u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("chaos plugin panics on purpose"),
            "garbage" => Ok(Outcome {
                apply: vec!["{not json".into()],
                delete: vec![],
                status: None,
                events: vec![],
                requeue_after_ms: None,
            }),
            "undeclared" => {
                let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": target }, "stringData": { "k": "v" } });
                ok(vec![cm(&target, None, data), secret.to_string()], json!({ "phase": "undeclared" }))
            }
            "other-namespace" => {
                let ns =
                    primary.pointer("/spec/targetNamespace").and_then(Value::as_str).unwrap_or("default").to_string();
                ok(vec![cm(&target, Some(&ns), data)], json!({ "phase": "other" }))
            }
            // Applies to `spec.target`, which the test makes someone else's.
            "foreign" => ok(vec![cm(&target, None, data)], json!({ "phase": "foreign" })),
            "huge" => ok(
                (0..150).map(|i| cm(&format!("{target}-{i}"), None, json!({ "i": i.to_string() }))).collect(),
                json!({}),
            ),
            "huge-object" => ok(vec![cm(&target, None, json!({ "blob": "x".repeat(2 << 20) }))], json!({})),
            // A number where a ConfigMap wants a string (the API server answers 500).
            "number-data" => ok(vec![cm(&target, None, json!({ "replicas": 1 }))], json!({ "phase": "number" })),
            "invalid-object" => ok(vec![cm("Not_A_Valid_Name", None, data)], json!({ "phase": "invalid" })),
            "log-flood" => {
                for i in 0..5000 {
                    log(Level::Info, &format!("flood line {i}"));
                    println!("stdout flood line {i}");
                }
                ok(vec![cm(&target, None, data)], json!({ "phase": "flooded" }))
            }
            "read-undeclared" => {
                let got = cache::get(
                    &Gvk { group: "".into(), version: "v1".into(), kind: "Secret".into() },
                    None,
                    "anything",
                );
                ok(vec![cm(&target, None, data)], json!({ "phase": "read", "sawSecret": got.is_some() }))
            }
            // What the sandbox lets a plugin see of the host: nothing.
            "probe" => {
                let addr =
                    primary.pointer("/spec/probeAddr").and_then(Value::as_str).unwrap_or("127.0.0.1:80").to_string();
                let net = addr
                    .parse::<std::net::SocketAddr>()
                    .map(|a| std::net::TcpStream::connect(a).is_ok())
                    .unwrap_or(false);
                let status = json!({
                    "phase": "probed",
                    "envs": std::env::vars().count(),
                    "args": std::env::args().count(),
                    "fs": std::fs::read_dir("/").is_ok() || std::fs::read_dir(".").is_ok() || std::fs::metadata("/etc/passwd").is_ok(),
                    "net": net,
                });
                ok(vec![cm(&target, None, data)], status)
            }
            "fail" => Err(Failure {
                message: "chaos plugin reports failure".into(),
                events: vec![Event {
                    severity: EventType::Warning,
                    reason: "ChaosFailed".into(),
                    message: "asked to fail".into(),
                }],
                retry: true,
            }),
            other => Err(Failure { message: format!("unknown mode {other}"), events: vec![], retry: false }),
        }
    }
}

export!(Chaos);
