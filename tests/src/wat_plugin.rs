//! Hand-written plugins in WebAssembly text: components of the `kwop:reconciler` world that no
//! SDK makes (several linear memories, a large table, a reconcile that grows its second memory),
//! for the sandbox's memory accounting. Built with `wit-component` against `wit/reconciler.wit`.
//!
//! The core module implements the canonical ABI by hand: `info` returns a pointer to a static
//! `plugin-info` record, `reconcile` grows the last memory by [`WatPlugin::grow_pages`] and returns
//! a `failure` whose message says how many memories it has (so a test sees that it ran), and
//! `cabi_realloc` is a bump allocator in memory 0.

use anyhow::Context;

/// What the component declares and does.
#[derive(Debug, Clone)]
pub struct WatPlugin {
    /// `plugin-info.name`.
    pub name: String,
    /// The primary kind: (group, version, kind).
    pub primary: (String, String, String),
    /// Initial pages (64 KiB each) of memories 1..: memory 0 (one page, the ABI's) is always there.
    pub extra_memories: Vec<u32>,
    /// Elements of the module's one `funcref` table.
    pub table_elements: u32,
    /// Pages `reconcile` grows the last memory by before it returns.
    pub grow_pages: u32,
    /// `reconcile` traps (`unreachable`) instead of returning.
    pub trap: bool,
}

impl WatPlugin {
    /// A plugin of `name` for Chaos objects (tests/crds/chaos.yaml).
    pub fn chaos(name: &str) -> Self {
        WatPlugin {
            name: name.into(),
            primary: ("test.kwop.dev".into(), "v1".into(), "Chaos".into()),
            extra_memories: vec![],
            table_elements: 1,
            grow_pages: 0,
            trap: false,
        }
    }

    /// The message of the failure `reconcile` returns.
    pub fn message(&self) -> String {
        format!("wat plugin {} ran with {} memories", self.name, 1 + self.extra_memories.len())
    }

    /// The component's bytes.
    pub fn build(&self) -> anyhow::Result<Vec<u8>> {
        let wat = self.wat();
        let mut module = wat::parse_str(&wat).with_context(|| format!("parsing the core module:\n{wat}"))?;
        let wit_path = crate::repo_root().join("wit/reconciler.wit");
        let wit = std::fs::read_to_string(&wit_path).with_context(|| format!("reading {}", wit_path.display()))?;
        let mut resolve = wit_parser::Resolve::default();
        let pkg = resolve.push_str(&wit_path, &wit)?;
        let world = resolve.select_world(&[pkg], Some("reconciler"))?;
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )?;
        wit_component::ComponentEncoder::default().validate(true).module(&module)?.encode()
    }

    /// The core module's text.
    pub fn wat(&self) -> String {
        // Memory 0 layout: the failure record at 256, plugin-info at 512, strings from 1024, the
        // bump heap from 4096 (grown on demand).
        const FAILURE: u32 = 256;
        const INFO: u32 = 512;
        let mut strings = Vec::new();
        let mut put = |s: &str| {
            let at = 1024 + strings.len() as u32;
            strings.extend_from_slice(s.as_bytes());
            (at, s.len() as u32)
        };
        let (g, v, k) = &self.primary;
        let fields = [put(&self.name), put("1"), put(g), put(v), put(k)];
        let message = put(&self.message());
        let mut info = Vec::new();
        for (ptr, len) in fields {
            info.extend(ptr.to_le_bytes());
            info.extend(len.to_le_bytes());
        }
        info.extend([0u8; 16]); // owns and reads: empty lists
                                // result<outcome, failure>: discriminant 1 at 0, failure at 8 { message, events, retry }.
        let mut failure = vec![1u8, 0, 0, 0, 0, 0, 0, 0];
        failure.extend(message.0.to_le_bytes());
        failure.extend(message.1.to_le_bytes());
        failure.extend([0u8; 8]); // no events
        failure.extend([0u8; 8]); // retry: false, padding
        let memories: String = self
            .extra_memories
            .iter()
            .enumerate()
            .map(|(i, pages)| format!("  (memory $m{} {pages})\n", i + 1))
            .collect();
        let last = self.extra_memories.len();
        let mut grow = if self.grow_pages > 0 {
            format!("(drop (memory.grow {last} (i32.const {})))", self.grow_pages)
        } else {
            String::new()
        };
        if self.trap {
            grow.push_str(" unreachable");
        }
        format!(
            r#"(module
  (memory (export "memory") 1)
{memories}  (table {table} funcref)
  (global $heap (mut i32) (i32.const 4096))
  (data (memory 0) (i32.const {FAILURE}) "{failure}")
  (data (memory 0) (i32.const {INFO}) "{info}")
  (data (memory 0) (i32.const 1024) "{strings}")
  (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32) (param $size i32) (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
                           (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $p) (local.get $size)))
    (local.set $have (i32.mul (memory.size 0) (i32.const 65536)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq (memory.grow 0 (i32.add (i32.div_u (i32.sub (local.get $end) (local.get $have)) (i32.const 65536))
                                            (i32.const 1)))
                    (i32.const -1))
          (then unreachable))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (func (export "info") (result i32) (i32.const {INFO}))
  (func (export "reconcile") (param i32 i32 i32 i32) (result i32)
    {grow}
    (i32.const {FAILURE})))
"#,
            table = self.table_elements,
            failure = escape(&failure),
            info = escape(&info),
            strings = escape(&strings),
        )
    }
}

fn escape(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_validates_with_several_memories_and_a_table() -> anyhow::Result<()> {
        let p = WatPlugin { extra_memories: vec![2, 3], table_elements: 1000, grow_pages: 1, ..WatPlugin::chaos("t") };
        let bytes = p.build()?;
        assert_eq!(&bytes[..4], b"\0asm");
        assert!(p.wat().contains("(memory $m2 3)"));
        Ok(())
    }
}
