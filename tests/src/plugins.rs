//! The plugin components built by `build.rs`.

use std::path::{Path, PathBuf};

/// guest-foo as shipped.
pub const GUEST_FOO: &str = env!("KWOP_PLUGIN_GUEST_FOO");
/// guest-foo v2: adds an annotation to the Deployment (for hot-swap tests).
pub const GUEST_FOO_V2: &str = env!("KWOP_PLUGIN_GUEST_FOO_V2");
/// The misbehaving test plugin (tests/plugins/chaos).
pub const CHAOS: &str = env!("KWOP_PLUGIN_CHAOS");
/// The chaos plugin whose `info()` sleeps 30 s (named `chaos-info-sleeps`).
pub const CHAOS_INFO_SLEEPS: &str = env!("KWOP_PLUGIN_CHAOS_INFO_SLEEPS");
/// The chaos plugin whose `info()` computes for a few seconds (named `chaos-slow-info`).
pub const CHAOS_SLOW_INFO: &str = env!("KWOP_PLUGIN_CHAOS_SLOW_INFO");
/// Heal → Service + ConfigMap copying a read Deployment's status (tests/plugins/selfheal).
pub const SELFHEAL: &str = env!("KWOP_PLUGIN_SELFHEAL");
/// Fin → ConfigMap copies in other namespaces; its finalize misbehaves on demand
/// (tests/plugins/finalizer, `kwop:reconciler@0.2`).
pub const FINALIZER: &str = env!("KWOP_PLUGIN_FINALIZER");
/// Converts conv.kwop.dev Conv objects between v1 and v2, well or badly as spec.mode says.
pub const CONVERTER: &str = env!("KWOP_PLUGIN_CONVERTER");
/// Validates Foos as a quorum would: an even `spec.replicas` is refused, 9 traps, an even
/// `status.availableReplicas` is refused (tests/plugins/quorum, `kwop:reconciler@0.2`).
pub const QUORUM: &str = env!("KWOP_PLUGIN_QUORUM");
/// The config-sync example (examples/config-sync): ConfigSync → copies of a ConfigMap or Secret.
pub const CONFIG_SYNC: &str = env!("KWOP_PLUGIN_CONFIG_SYNC");
/// A valid component of another world (a WASI command).
pub const WRONG_WORLD: &str = env!("KWOP_PLUGIN_WRONG_WORLD");

/// guest-foo as built before `kwop:reconciler@0.2` (its 0.1.0, kept as it was): the host still
/// runs 0.1 plugins unchanged.
pub fn guest_foo_v01() -> String {
    crate::repo_root().join("tests/fixtures/plugins/guest-foo-wit-0.1.wasm").display().to_string()
}

/// guest-foo and the finalizer test plugin as built before `kwop:reconciler@0.3` (kept `.wasm`
/// files, `tests/fixtures/plugins/README.md`): the host still runs 0.2 plugins unchanged.
pub fn wit_0_2(plugin: &str) -> String {
    crate::repo_root().join(format!("tests/fixtures/plugins/{plugin}-wit-0.2.wasm")).display().to_string()
}

/// A fresh plugin folder holding copies of `plugins` as `(file name, source)`.
pub fn folder(plugins: &[(&str, &str)]) -> anyhow::Result<PathBuf> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join("kwop-test").join(format!("{}-plugins-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for (name, src) in plugins {
        std::fs::copy(src, dir.join(name))?;
    }
    Ok(dir)
}

/// Replaces a plugin file atomically (write aside, rename), as a careful deploy tool would.
pub fn replace(dir: &Path, name: &str, src: &str) -> anyhow::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::copy(src, &tmp)?;
    std::fs::rename(&tmp, dir.join(name))?;
    Ok(())
}
