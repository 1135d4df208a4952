//! A plugin's memory is counted per instance, across every linear memory and table, against one
//! limit (issue 12), on a real control plane. The plugins are hand-written components
//! (`kwop_tests::wat_plugin`): no SDK makes a component with several memories or a large table.
//!
//! Every memory and table of the refused plugins fits the limit on its own, so a limit counted per
//! linear memory (as before the fix) would have loaded them all.

mod common;

use common::*;
use kwop_tests::wat_plugin::WatPlugin;
use kwop_tests::{host::http_get, ControlPlane, Mode};
use serde_json::json;
use std::path::Path;

const MIB: u32 = 16; // pages per MiB

fn write(dir: &Path, file: &str, plugin: &WatPlugin) -> anyhow::Result<()> {
    let tmp = dir.join(format!(".{file}"));
    std::fs::write(&tmp, plugin.build()?)?;
    std::fs::rename(&tmp, dir.join(file))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn several_memories_and_a_big_table_count_against_one_limit() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("memories")?;
    let dir = kwop_tests::plugins::folder(&[])?;
    // The limit is 32 MiB per instance. Memory 0 is one page in every plugin.
    let two = WatPlugin { extra_memories: vec![4 * MIB], table_elements: 1000, ..WatPlugin::chaos("wat-two") };
    let over = WatPlugin { extra_memories: vec![20 * MIB, 20 * MIB], ..WatPlugin::chaos("wat-over") };
    // 24 MiB of memory + 2^20 table elements of 8 bytes (8 MiB).
    let table = WatPlugin { extra_memories: vec![24 * MIB], table_elements: 1 << 20, ..WatPlugin::chaos("wat-table") };
    let huge_table = WatPlugin { table_elements: (1 << 20) + 1, ..WatPlugin::chaos("wat-huge-table") };
    // Starts at 1 + 16 pages and grows its second memory past the limit in reconcile.
    let grow = WatPlugin {
        primary: ("samplecontroller.k8s.io".into(), "v1alpha1".into(), "Foo".into()),
        extra_memories: vec![16],
        grow_pages: 32 * MIB,
        ..WatPlugin::chaos("wat-grow")
    };
    for (file, p) in
        [("two.wasm", &two), ("over.wasm", &over), ("table.wasm", &table), ("huge-table.wasm", &huge_table)]
    {
        write(&dir, file, p)?;
    }
    write(&dir, "grow.wasm", &grow)?;
    let host = host(plane, &dir, &[&format!("--namespace={ns}"), "--plugin-memory=32Mi"])?;

    let p = plugins_json(host.port)?;
    let mut names: Vec<&str> =
        p["plugins"].as_array().into_iter().flatten().filter_map(|e| e["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["wat-grow", "wat-two"], "{p}");
    let rejected = |file: &str| p["rejected_files"][file].as_str().unwrap_or_default().to_string();
    for file in ["over.wasm", "table.wasm"] {
        let why = rejected(file);
        assert!(why.contains("memory limit of 33554432 bytes"), "{file}: {why}\n{p}");
    }
    let why = rejected("huge-table.wasm");
    assert!(why.starts_with("component exceeds the host's sandbox limits") && why.contains("1048577"), "{why}\n{p}");

    // The plugin with two memories runs its reconcile.
    let client = plane.client().await?;
    create_chaos(&client, &ns, "c1", json!({})).await?;
    let ev = event_with_reason(&client, &ns, "c1", "ReconcileFailed").await?;
    assert_eq!(ev.note.as_deref(), Some(two.message().as_str()));

    // Growing the second memory past the limit is out of memory, named as such.
    create_foo(&client, &ns, "f1", "f1", Some(1)).await?;
    let ev = event_with_reason(&client, &ns, "f1", "ReconcilePluginFailed").await?;
    let note = ev.note.unwrap_or_default();
    assert!(note.contains("memory limit of 33554432 bytes"), "{note}");
    assert!(host.metric("kwop_plugin_errors_total", &[("plugin", "wat-grow"), ("reason", "out_of_memory")])? >= 1.0);
    assert_eq!(http_get(host.port, "/healthz")?.0, 200);
    Ok(())
}

/// `info()` runs under the most generous configured limits (the plugin's name is not known before
/// it returns), but a plugin is then held to its own: another plugin's larger limit lets nobody
/// else through.
#[tokio::test(flavor = "multi_thread")]
async fn info_obeys_the_plugins_own_limits() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("info-limits")?;
    let dir = kwop_tests::plugins::folder(&[("slow.wasm", kwop_tests::plugins::CHAOS_SLOW_INFO)])?;
    // 40 MiB of memory at instantiation: within the 64 MiB ceiling, over its own 16 MiB.
    write(&dir, "fat.wasm", &WatPlugin { extra_memories: vec![40 * MIB], ..WatPlugin::chaos("wat-fat") })?;
    write(&dir, "slim.wasm", &WatPlugin { extra_memories: vec![4 * MIB], ..WatPlugin::chaos("wat-slim") })?;
    let flags = [
        format!("--namespace={ns}"),
        "--plugin-memory=16Mi".into(),
        // Generous limits for someone else: the ceiling info() runs under.
        "--plugin-limit=someone-else:memory=64Mi,timeout=30s".into(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = host(plane, &dir, &flags)?;
    let p = plugins_json(host.port)?;
    let rejected = |file: &str| p["rejected_files"][file].as_str().unwrap_or_default().to_string();
    let why = rejected("fat.wasm");
    assert!(why.contains("info() failed: plugin exceeded its memory limit of 16777216 bytes"), "{why}\n{p}");
    // chaos-slow-info computes for seconds in info(); its own deadline is the default 1 s.
    let why = rejected("slow.wasm");
    assert!(why.contains("info() failed: plugin exceeded its deadline of 1s"), "{why}\n{p}");
    let names: Vec<&str> = p["plugins"].as_array().into_iter().flatten().filter_map(|e| e["name"].as_str()).collect();
    assert_eq!(names, ["wat-slim"], "{p}");
    Ok(())
}

/// Polls `/plugins` while `n` looping Chaos objects run: the most calls in flight at once and the
/// most budget reserved.
async fn peak_concurrency(budget: &str, n: usize) -> anyhow::Result<(u64, u64)> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let ns = plane.namespace("budget")?;
    let dir = kwop_tests::plugins::folder(&[("chaos.wasm", kwop_tests::plugins::CHAOS)])?;
    let flags = [
        format!("--namespace={ns}"),
        "--workers=4".into(),
        "--plugin-memory=16Mi".into(),
        "--plugin-timeout=400ms".into(),
        format!("--plugin-memory-budget={budget}"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let host = host(plane, &dir, &flags)?;
    let client = plane.client().await?;
    for i in 0..n {
        create_chaos(&client, &ns, &format!("loop-{i}"), json!({ "mode": "loop" })).await?;
    }
    let (mut calls, mut reserved) = (0, 0);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(3) {
        let p = plugins_json(host.port)?;
        calls = calls.max(p["calls"].as_array().map_or(0, |c| c.len() as u64));
        reserved = reserved.max(p["plugin_memory_reserved_bytes"].as_u64().unwrap_or(0));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Every looper hit its own deadline: waiting for the budget does not count against it.
    for i in 0..n {
        let ev = event_with_reason(&client, &ns, &format!("loop-{i}"), "ReconcilePluginFailed").await?;
        let note = ev.note.unwrap_or_default();
        assert!(note.contains("deadline of 400ms"), "loop-{i}: {note}");
    }
    Ok((calls, reserved))
}

/// The host-wide plugin memory budget makes calls wait for their share: with room for one
/// instance (16 MiB + its 2 MiB stack in 20 MiB), four workers run one call at a time; with room
/// for four, they run together.
#[tokio::test(flavor = "multi_thread")]
async fn the_memory_budget_makes_reconciles_wait() -> anyhow::Result<()> {
    let (calls, reserved) = peak_concurrency("20Mi", 4).await?;
    assert_eq!(calls, 1, "one call at a time in a budget for one");
    assert!(reserved > 0 && reserved <= 20 << 20, "reserved {reserved}");
    let (calls, reserved) = peak_concurrency("80Mi", 4).await?;
    assert!(calls >= 2, "calls run together when the budget has room ({calls})");
    assert!(reserved > 18 << 20, "reserved {reserved}");
    Ok(())
}
