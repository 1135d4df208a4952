//! A deliberately bad plugin for the sandbox and write-fence tests. `spec.mode` picks the
//! misbehaviour; `ok` behaves (applies one ConfigMap named after the object). Cargo features
//! build variants whose `info()` misbehaves (see Cargo.toml).

#![allow(unsafe_code)]

wit_bindgen::generate!({ path: "../../../wit", world: "reconciler" });

use kwop::reconciler::cache;
use kwop::reconciler::log::{log, Level};
use kwop::reconciler::types::{Event, EventType, Gvk, ObjectRef};
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

fn name() -> &'static str {
    if cfg!(feature = "info-sleeps") {
        "chaos-info-sleeps"
    } else if cfg!(feature = "slow-info") {
        "chaos-slow-info"
    } else {
        "chaos"
    }
}

/// Deterministic busy work (the clock stands still inside a call, so it cannot be timed).
fn work(rounds: u64) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..rounds {
        x = std::hint::black_box(x.rotate_left(5) ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    x
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn nanos(t: std::time::SystemTime) -> u128 {
    t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

impl Guest for Chaos {
    fn info() -> PluginInfo {
        if cfg!(feature = "info-sleeps") {
            std::thread::sleep(std::time::Duration::from_secs(30));
        }
        if cfg!(feature = "slow-info") {
            // A few seconds of work: long enough to remove the file while it loads.
            std::hint::black_box(work(3_000_000_000));
        }
        PluginInfo {
            name: name().into(),
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
            // Waiting: Rust's sleep (wasi:clocks subscription + block), or a poll on a timer as
            // Python's time.sleep and Go's timers do.
            "sleep" => {
                let secs = primary.pointer("/spec/seconds").and_then(Value::as_u64).unwrap_or(10);
                std::thread::sleep(std::time::Duration::from_secs(secs));
                ok(vec![cm(&target, None, data)], json!({ "phase": "slept" }))
            }
            "poll-sleep" => {
                let timer = wasip2::clocks::monotonic_clock::subscribe_duration(1_000_000_000);
                let ready = wasip2::io::poll::poll(&[&timer]);
                ok(vec![cm(&target, None, data)], json!({ "phase": "polled", "ready": ready }))
            }
            // A zero-length wait is a yield: ready at once.
            "yield" => {
                let timer = wasip2::clocks::monotonic_clock::subscribe_duration(0);
                timer.block();
                let later = wasip2::clocks::monotonic_clock::subscribe_duration(5_000_000_000);
                ok(vec![cm(&target, None, data)], json!({ "phase": "yielded", "laterReady": later.ready() }))
            }
            "clock" => {
                let (wall, mono) = (std::time::SystemTime::now(), std::time::Instant::now());
                std::hint::black_box(work(20_000_000));
                let status = json!({
                    "phase": "clock",
                    "wall": nanos(wall).to_string(),
                    "wallAfterWork": nanos(std::time::SystemTime::now()).to_string(),
                    "monotonicElapsedNs": mono.elapsed().as_nanos().to_string(),
                });
                ok(vec![cm(&target, None, data)], status)
            }
            "random" => {
                let status = json!({
                    "phase": "random",
                    "bytes": hex(&wasip2::random::random::get_random_bytes(16)),
                    "insecure": hex(&wasip2::random::insecure::get_insecure_random_bytes(16)),
                    "u64": wasip2::random::random::get_random_u64().to_string(),
                    "hashSeeded": format!("{:?}", std::collections::HashSet::<u8>::from_iter(0..8u8).into_iter().collect::<Vec<_>>()),
                });
                ok(vec![cm(&target, None, data)], status)
            }
            "random-huge" => {
                let len = primary.pointer("/spec/len").and_then(Value::as_u64).unwrap_or(1 << 30);
                let got = wasip2::random::random::get_random_bytes(len);
                ok(vec![cm(&target, None, data)], json!({ "phase": "random", "got": got.len() }))
            }
            // Reads another namespace by name and queries every namespace: what the grants let
            // through (ReconcilerPlugin namespace grants).
            "read-other" => {
                let kind = Gvk { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() };
                let ns = primary.pointer("/spec/readNamespace").and_then(Value::as_str).map(str::to_string);
                let read = primary.pointer("/spec/readName").and_then(Value::as_str).unwrap_or("x").to_string();
                let got = cache::get(&kind, ns.as_deref(), &read).is_some();
                let mut namespaces: Vec<String> = cache::query(&kind, None, Some("kwop.dev/readable=yes"))
                    .iter()
                    .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                    .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_string))
                    .collect();
                namespaces.sort();
                namespaces.dedup();
                ok(vec![cm(&target, None, data)], json!({ "phase": "read", "sawOther": got, "queried": namespaces }))
            }
            "query-loop" => {
                let times = primary.pointer("/spec/times").and_then(Value::as_u64).unwrap_or(u64::MAX);
                let kind = Gvk { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() };
                let mut seen = 0usize;
                for _ in 0..times {
                    seen += cache::query(&kind, None, None).len();
                }
                ok(vec![cm(&target, None, data)], json!({ "phase": "queried", "seen": seen }))
            }
            // Works for spec.work rounds, then deletes the ConfigMap it owns (the object may
            // have changed during the call: the delete must then be refused, not go through).
            "slow-delete" => {
                std::hint::black_box(work(primary.pointer("/spec/work").and_then(Value::as_u64).unwrap_or(0)));
                Ok(Outcome {
                    apply: vec![],
                    delete: vec![ObjectRef {
                        gvk: Gvk { group: "".into(), version: "v1".into(), kind: "ConfigMap".into() },
                        namespace: None,
                        name: target,
                    }],
                    status: Some(json!({ "phase": "deleting" }).to_string()),
                    events: vec![],
                    requeue_after_ms: None,
                })
            }
            // The status is whatever spec.status says (to drop a field between two versions).
            "status" => ok(vec![], primary.pointer("/spec/status").cloned().unwrap_or(json!({}))),
            // A Warning whose text changes at every reconcile (it carries the reconcile's start).
            "warn-changing" => Ok(Outcome {
                apply: vec![],
                delete: vec![],
                status: None,
                events: vec![Event {
                    severity: EventType::Warning,
                    reason: "Changing".into(),
                    message: format!("reconcile started at {}", nanos(std::time::SystemTime::now())),
                }],
                requeue_after_ms: Some(20),
            }),
            "panic-long" => panic!("chaos plugin panics with a long message: {}", "x".repeat(3000)),
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
