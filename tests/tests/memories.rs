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
use serde_json::{json, Value};
use std::path::Path;

const MIB: u32 = 16; // pages per MiB

fn write(dir: &Path, file: &str, plugin: &WatPlugin) -> anyhow::Result<()> {
    let tmp = dir.join(format!(".{file}"));
    std::fs::write(&tmp, plugin.build()?)?;
    std::fs::rename(&tmp, dir.join(file))?;
    Ok(())
}

fn plugins_json(port: u16) -> anyhow::Result<Value> {
    Ok(serde_json::from_str(&http_get(port, "/plugins")?.1)?)
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
    let mut names: Vec<&str> = p["plugins"].as_array().into_iter().flatten().filter_map(|e| e["name"].as_str()).collect();
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
