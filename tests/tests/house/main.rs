//! The house rules of `host/src`, checked on every run of the suite (no cluster, well under a
//! second): no import circle between files, at most [`MAX_UP`] imports pointing up the floors,
//! every top-level module on a floor, no file over [`MAX_LINES`] lines.
//!
//! The floors are listed here, once ([`FLOORS`]); `docs/ARCHITECTURE.md` shows the same list,
//! and a test keeps the two equal. The graph is read from the source as rustc would find the
//! modules (`graph`): `use` trees, paths in code and `crate::`/`super::` paths in macro calls,
//! `#[cfg(test)]` items left out.

mod graph;

use graph::Graph;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The floors of `host/src`, lowest first. A module may use the modules on its own floor and
/// on the floors below; an import of a module on a higher floor points up.
const FLOORS: &[&[&str]] = &[
    &["vocab"],
    &["schema", "scaffold"],
    &["plugin"],
    &["outcome"],
    &["telemetry"],
    &["leader"],
    &["shard"],
    &["watch"],
    &["apply", "report"],
    &["shadow"],
    &["admission"],
    &["controller"],
    &["source"],
    &["hotswap"],
    &["offline"],
    &["cli"],
];

/// Imports allowed to point up the floors (each one is said why in docs/ARCHITECTURE.md).
const MAX_UP: usize = 3;

/// No file in `host/src` is longer.
const MAX_LINES: usize = 420;

fn src() -> PathBuf {
    kwop_tests::repo_root().join("host/src")
}

fn host_graph() -> Graph {
    let root = src();
    graph::build(&|p: &Path| std::fs::read_to_string(root.join(p)).ok()).unwrap_or_else(|e| panic!("host/src: {e}"))
}

/// The floor of a module (`watch::caches` is on `watch`'s floor); `None` for the crate root.
fn floor_of(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    FLOORS.iter().position(|f| f.contains(&top))
}

/// Every edge from a lower floor to a higher one: (from, to, where).
fn up_imports(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in &g.edges {
        for (to, ev) in tos {
            if let (Some(a), Some(b)) = (floor_of(from), floor_of(to)) {
                if b > a {
                    out.push(format!("{from} → {to} ({}:{}: {})", ev.file.display(), ev.line, ev.path));
                }
            }
        }
    }
    out
}

fn describe(g: &Graph, c: &graph::Circle) -> String {
    let mut s = format!("{} files: {}\n    one circle: {}", c.files.len(), c.files.join(", "), c.cycle.join(" → "));
    for w in c.cycle.windows(2) {
        if let Some(ev) = g.edges.get(&w[0]).and_then(|e| e.get(&w[1])) {
            s.push_str(&format!("\n      {}:{}: {}", ev.file.display(), ev.line, ev.path));
        }
    }
    s
}

#[test]
fn no_import_circle_between_files() {
    let g = host_graph();
    assert!(g.files.len() > 50, "the graph found only {} files: is host/src where it was?", g.files.len());
    let circles = graph::circles(&g);
    let described: Vec<String> = circles.iter().map(|c| describe(&g, c)).collect();
    assert!(
        circles.is_empty(),
        "{} import circle(s) between files of host/src (move what both sides need down a floor):\n  {}",
        circles.len(),
        described.join("\n  ")
    );
}

#[test]
fn few_imports_point_up_the_floors() {
    let up = up_imports(&host_graph());
    println!("imports pointing up the floors ({}):\n  {}", up.len(), up.join("\n  "));
    assert!(
        up.len() <= MAX_UP,
        "{} imports point up the floors (at most {MAX_UP}; floors in tests/tests/house/main.rs):\n  {}",
        up.len(),
        up.join("\n  ")
    );
}

#[test]
fn every_module_is_on_exactly_one_floor() {
    let g = host_graph();
    let tops: std::collections::BTreeSet<&str> =
        g.files.keys().filter(|m| *m != "crate").filter_map(|m| m.split("::").next()).collect();
    let listed: Vec<&str> = FLOORS.iter().flat_map(|f| f.iter().copied()).collect();
    let missing: Vec<&&str> = tops.iter().filter(|t| !listed.contains(t)).collect();
    assert!(missing.is_empty(), "modules on no floor (add them to FLOORS and docs/ARCHITECTURE.md): {missing:?}");
    let gone: Vec<&&str> = listed.iter().filter(|l| !tops.contains(*l)).collect();
    assert!(gone.is_empty(), "FLOORS names modules host/src does not have: {gone:?}");
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<&&str> = listed.iter().filter(|l| !seen.insert(**l)).collect();
    assert!(twice.is_empty(), "on two floors: {twice:?}");
}

#[test]
fn the_architecture_guide_lists_the_same_floors() {
    let line = FLOORS.iter().map(|f| f.join(", ")).collect::<Vec<_>>().join(" → ");
    let doc = std::fs::read_to_string(kwop_tests::repo_root().join("docs/ARCHITECTURE.md")).unwrap_or_default();
    assert!(doc.contains(&line), "docs/ARCHITECTURE.md must show the floors as the check has them:\n{line}");
}

#[test]
fn no_file_in_host_src_is_over_the_cap() {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, usize)>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.push((p, text.lines().count()));
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    assert!(files.len() > 50, "found only {} files under host/src", files.len());
    let mut over: Vec<String> = files
        .iter()
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(p, n)| format!("{} ({n} lines)", p.strip_prefix(src()).unwrap_or(p).display()))
        .collect();
    over.sort();
    assert!(over.is_empty(), "files over {MAX_LINES} lines (split them by concept):\n  {}", over.join("\n  "));
}

// The parser, on small crates.

fn crate_of(files: &[(&str, &str)]) -> Graph {
    let map: BTreeMap<PathBuf, String> = files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect();
    graph::build(&|p: &Path| map.get(p).cloned()).unwrap_or_else(|e| panic!("{e}"))
}

fn edges(g: &Graph) -> Vec<String> {
    g.edges.iter().flat_map(|(f, t)| t.keys().map(move |t| format!("{f} -> {t}"))).collect()
}

#[test]
fn grouped_uses_renames_and_self_are_flattened() {
    let g = crate_of(&[
        ("lib.rs", "mod a; mod b; mod c; mod user;"),
        ("a.rs", "pub struct A;"),
        ("b/mod.rs", "pub mod inner; pub mod deeper;"),
        ("b/inner.rs", "pub struct I;"),
        ("b/deeper/mod.rs", "pub mod leaf;"),
        ("b/deeper/leaf.rs", "pub fn f() {}"),
        ("c.rs", "pub struct C;"),
        ("user.rs", "use crate::{a::A as Renamed, b::{inner::{self}, deeper::leaf::f}};\nuse crate::c::*;"),
    ]);
    assert_eq!(edges(&g), ["user -> a", "user -> b::deeper::leaf", "user -> b::inner", "user -> c"]);
}

#[test]
fn super_super_and_self_are_resolved_from_the_file_they_are_in() {
    let g = crate_of(&[
        ("lib.rs", "mod top; mod other;"),
        ("other.rs", "pub struct O;"),
        ("top/mod.rs", "pub mod mid; pub mod side;"),
        ("top/side.rs", "pub struct S;"),
        ("top/mid/mod.rs", "pub mod low;"),
        (
            "top/mid/low.rs",
            "use super::super::side::S;\nuse super::super::super::other::O;\nfn f() { self::g() }\nfn g() {}",
        ),
    ]);
    assert_eq!(edges(&g), ["top::mid::low -> other", "top::mid::low -> top::side"]);
}

#[test]
fn paths_in_code_and_in_macro_calls_count() {
    let g = crate_of(&[
        ("lib.rs", "mod a; mod b; mod c; mod d; mod user;"),
        ("a.rs", "pub fn make() -> u8 { 1 }"),
        ("b.rs", "pub struct B;"),
        ("c.rs", "pub const C: &str = \"c\";"),
        ("d.rs", "pub enum D { X }"),
        (
            "user.rs",
            "fn f(x: crate::b::B) -> u8 {\n    let n = crate::a::make();\n    tracing::info!(c = crate::c::C, \"{n}\");\n    \
             matches!(Some(1), Some(_) if super::d::D::X as u8 == 0);\n    // crate::nothing::here in a comment\n    n\n}",
        ),
    ]);
    assert_eq!(edges(&g), ["user -> a", "user -> b", "user -> c", "user -> d"]);
    let ev = &g.edges["user"]["c"];
    assert_eq!((ev.line, ev.path.as_str()), (3, "crate::c::C"));
}

#[test]
fn test_code_is_left_out_and_parts_may_use_their_module() {
    let g = crate_of(&[
        ("lib.rs", "mod a; mod b;"),
        ("a/mod.rs", "mod part;\npub struct Inner;\nuse part::Helper;"),
        ("a/part.rs", "use super::Inner;\npub struct Helper;\n#[cfg(test)]\nmod tests { use crate::b::B; }"),
        ("b/mod.rs", "pub struct B;\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nfn t() { crate::a::Inner; }"),
    ]);
    // b/tests.rs does not exist: a cfg(test) module is not even looked for.
    assert_eq!(edges(&g), ["a -> a::part"]);
}

#[test]
fn a_reexport_is_followed_to_the_file_that_defines_it() {
    let g = crate_of(&[
        ("lib.rs", "mod p; mod user;"),
        ("p/mod.rs", "mod hidden;\nmod other;\npub use hidden::Thing;\npub use other::*;"),
        ("p/hidden.rs", "pub struct Thing;"),
        ("p/other.rs", "pub struct Other;"),
        ("user.rs", "use crate::p::Thing;\nfn f() -> crate::p::Other { todo!() }"),
    ]);
    // Thing through the façade is hidden.rs; a glob re-export is not followed (p itself).
    assert_eq!(edges(&g), ["p -> p::hidden", "p -> p::other", "user -> p", "user -> p::hidden"]);
}

#[test]
fn a_circle_is_found_and_named() {
    let g = crate_of(&[
        ("lib.rs", "mod a; mod b; mod c; mod d;"),
        ("a.rs", "use crate::b::B; pub struct A;"),
        ("b.rs", "pub struct B; fn f() { crate::c::g() }"),
        ("c.rs", "pub fn g() { let _ = crate::a::A; }"),
        ("d.rs", "use crate::a::A;"),
    ]);
    let circles = graph::circles(&g);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert_eq!(circles[0].files, ["a", "b", "c"]);
    assert_eq!(circles[0].cycle, ["a", "b", "c", "a"]);
    let text = describe(&g, &circles[0]);
    assert!(text.contains("one circle: a → b → c → a") && text.contains("c.rs:1: crate::a::A"), "{text}");
    // Without the way back there is none.
    let g = crate_of(&[("lib.rs", "mod a; mod b;"), ("a.rs", "use crate::b::B;"), ("b.rs", "pub struct B;")]);
    assert!(graph::circles(&g).is_empty());
}

#[test]
fn the_floors_count_imports_that_point_up() {
    let g = crate_of(&[
        ("lib.rs", "mod vocab; mod plugin; mod cli;"),
        ("vocab.rs", "pub struct Gvk; fn f() { crate::plugin::run(); }"),
        ("plugin.rs", "pub fn run() {}"),
        ("cli.rs", "use crate::{plugin::run, vocab::Gvk};"),
    ]);
    assert_eq!(up_imports(&g).len(), 1);
    assert!(up_imports(&g)[0].starts_with("vocab → plugin (vocab.rs:1: crate::plugin::run)"), "{:?}", up_imports(&g));
}

#[test]
fn the_module_map_in_lib_rs_lists_the_floors() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap_or_else(|e| panic!("host/src/lib.rs: {e}"));
    // `//! N. [`a`]: ...; [`b`]: ...` starts floor N; the modules it names are the floor's.
    let mut map: Vec<Vec<String>> = Vec::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! ")) {
        let Some((n, rest)) = line.split_once(". ") else { continue };
        if n.parse::<usize>() != Ok(map.len()) {
            continue;
        }
        let names = rest.split("[`").skip(1).filter_map(|s| s.split_once("`]").map(|(m, _)| m.to_string()));
        map.push(names.collect());
    }
    let floors: Vec<Vec<String>> = FLOORS.iter().map(|f| f.iter().map(|m| m.to_string()).collect()).collect();
    assert_eq!(map, floors, "the module map in host/src/lib.rs (`//! N. [`module`]: ...` lines) must list FLOORS");
}

#[test]
fn every_path_the_architecture_guide_names_exists() {
    let root = kwop_tests::repo_root();
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md"))
        .unwrap_or_else(|e| panic!("docs/ARCHITECTURE.md: {e}"));
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, quoted) in doc.split('`').enumerate() {
        // Odd pieces are inside backticks; a path has a slash and no spaces.
        if i % 2 == 0 || !quoted.contains('/') || quoted.contains(' ') || quoted.contains('<') || quoted.contains('*') {
            continue;
        }
        named += 1;
        let bases = [root.clone(), src(), src().join("cli/plugin")];
        if !bases.iter().any(|b| b.join(quoted.trim_end_matches('/')).exists()) {
            missing.push(quoted.to_string());
        }
    }
    assert!(named > 30, "only {named} paths found in docs/ARCHITECTURE.md: is it the guide it was?");
    assert!(missing.is_empty(), "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}");
}
