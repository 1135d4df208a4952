//! The import graph of a crate's source, file by file, as its paths say: every `use` (grouped
//! trees flattened, `self`, `super::super`, renames), every path in code (types, expressions,
//! patterns, trait bounds) and every `crate::`/`super::`/`self::` path inside a macro call.
//!
//! Modules are found as rustc finds them: from `lib.rs`, following `mod` declarations (inline
//! modules, `#[path]`, `mod.rs` and `name.rs` alike). Items under `#[cfg(test)]` are left out, so
//! are the files only they declare: a unit test may reach across the floors to build its inputs.
//!
//! A path resolves to the file that defines what it names: names a module imports or re-exports
//! (`pub use inner::Thing`) are followed to where they come from, so importing a type through its
//! module's façade counts as using the file that defines it. A file may use its own ancestors
//! (`super::Inner` in `controller/reconcile.rs`): a module's parts are the module, so those edges
//! are not counted. Everything else between two files is an edge.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::Visit;

/// A module path, segments from the crate root (`["watch", "caches"]`).
type Mod = Vec<String>;

/// Why one file uses another: the first place it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// The using file, relative to the source root.
    pub file: PathBuf,
    /// Its line.
    pub line: usize,
    /// The path as written (normalized: `crate::a::b`).
    pub path: String,
}

/// Files and the edges between them, by module name (`watch::caches`; `lib.rs` is `crate`).
#[derive(Debug, Default)]
pub struct Graph {
    /// Module name → its file.
    pub files: BTreeMap<String, PathBuf>,
    /// Module name → the modules it uses, with the first place it does.
    pub edges: BTreeMap<String, BTreeMap<String, Evidence>>,
}

/// One module (a file, or an inline `mod x { }` in one).
#[derive(Debug, Default)]
struct ModInfo {
    /// The module of the file it is written in.
    file_mod: String,
    /// Its `use` items, flattened (what they name is worked out when asked: a `use` may name a
    /// module declared after it).
    uses: Vec<UseLeaf>,
    /// Child modules.
    children: BTreeSet<String>,
}

/// One flattened `use`: the name it binds (none for a glob) and the path.
#[derive(Debug)]
struct UseLeaf {
    bound: Option<String>,
    path: Vec<String>,
}

fn key(m: &[String]) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>().is_ok_and(|m| matches!(&m, syn::Meta::Path(p) if p.is_ident("test")))
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
        syn::Meta::NameValue(nv) => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            out.push(UseLeaf { bound: prefix.last().cloned(), path: prefix.clone() });
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push(UseLeaf { bound: Some(n.ident.to_string()), path });
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseLeaf { bound: Some(r.rename.to_string()), path });
        }
        syn::UseTree::Glob(_) => out.push(UseLeaf { bound: None, path: prefix.clone() }),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

/// Paths anchored at `crate`, `super` or `self` inside a macro's tokens, with their lines.
fn macro_paths(tokens: TokenStream, out: &mut Vec<(Vec<String>, usize)>) {
    let flat: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < flat.len() {
        if let TokenTree::Group(g) = &flat[i] {
            macro_paths(g.stream(), out);
            i += 1;
            continue;
        }
        let anchor = matches!(&flat[i], TokenTree::Ident(id) if id == "crate" || id == "super" || id == "self");
        let after_colons = i >= 2
            && matches!((&flat[i - 2], &flat[i - 1]), (TokenTree::Punct(a), TokenTree::Punct(b)) if a.as_char() == ':' && b.as_char() == ':');
        if !anchor || after_colons {
            i += 1;
            continue;
        }
        let line = flat[i].span().start().line;
        let mut segs = vec![flat[i].to_string()];
        let mut j = i + 1;
        while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(TokenTree::Ident(id))) =
            (flat.get(j), flat.get(j + 1), flat.get(j + 2))
        {
            if a.as_char() != ':' || b.as_char() != ':' {
                break;
            }
            segs.push(id.to_string());
            j += 3;
        }
        if segs.len() > 1 {
            out.push((segs, line));
        }
        i = j.max(i + 1);
    }
}

/// Reads the crate whose root is `lib.rs`, through `read` (a path relative to the source root →
/// its text, `None` when there is no such file).
pub fn build(read: &dyn Fn(&Path) -> Option<String>) -> Result<Graph, String> {
    let mut b = Builder { read, mods: BTreeMap::new(), files: BTreeMap::new(), parsed: Vec::new() };
    b.load(Path::new("lib.rs"), Vec::new())?;
    let mut graph = Graph::default();
    for (m, f) in &b.files {
        graph.files.insert(m.clone(), f.clone());
    }
    for (file, module, ast) in &b.parsed {
        let mut v = Uses { b: &b, module: module.clone(), found: Vec::new() };
        v.items(&ast.items);
        for (path, line, text) in v.found {
            let Some(target) = b.resolve(&path) else { continue };
            let from_file = key(module);
            let to_file = b.mods.get(&target).map(|m| m.file_mod.clone()).unwrap_or(target);
            let ancestor = to_file == "crate" || from_file.starts_with(&format!("{to_file}::"));
            if to_file == from_file || ancestor {
                continue;
            }
            graph.edges.entry(from_file).or_default().entry(to_file).or_insert(Evidence {
                file: file.clone(),
                line,
                path: text,
            });
        }
    }
    Ok(graph)
}

struct Builder<'a> {
    read: &'a dyn Fn(&Path) -> Option<String>,
    mods: BTreeMap<String, ModInfo>,
    /// File module → its file.
    files: BTreeMap<String, PathBuf>,
    /// Every file: its path, the module of its top, its syntax.
    parsed: Vec<(PathBuf, Mod, syn::File)>,
}

impl Builder<'_> {
    fn load(&mut self, file: &Path, module: Mod) -> Result<(), String> {
        let text = (self.read)(file).ok_or_else(|| format!("{} is declared but not found", file.display()))?;
        let ast = syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        self.files.insert(key(&module), file.to_path_buf());
        // Outline modules of a `mod.rs`/`lib.rs` live beside it; of `name.rs`, in `name/`.
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let children_dir = if stem == "mod" || stem == "lib" { dir.clone() } else { dir.join(&stem) };
        self.module(&ast.items, &module, &key(&module), &dir, &children_dir)?;
        self.parsed.push((file.to_path_buf(), module, ast));
        Ok(())
    }

    fn module(
        &mut self,
        items: &[syn::Item],
        module: &Mod,
        file_mod: &str,
        dir: &Path,
        children: &Path,
    ) -> Result<(), String> {
        let mut info = ModInfo { file_mod: file_mod.to_string(), ..ModInfo::default() };
        for item in items.iter().filter(|i| !is_cfg_test(item_attrs(i))) {
            match item {
                syn::Item::Use(u) => flatten(&u.tree, &mut Vec::new(), &mut info.uses),
                syn::Item::Mod(m) => {
                    info.children.insert(m.ident.to_string());
                }
                _ => {}
            }
        }
        self.mods.insert(key(module), info);
        for item in items.iter().filter(|i| !is_cfg_test(item_attrs(i))) {
            let syn::Item::Mod(m) = item else { continue };
            let mut child = module.clone();
            child.push(m.ident.to_string());
            let name = m.ident.to_string();
            match &m.content {
                Some((_, inner)) => self.module(inner, &child, file_mod, dir, &children.join(&name))?,
                None => {
                    let file = match path_attr(&m.attrs) {
                        Some(p) => dir.join(p),
                        None => {
                            let flat = children.join(format!("{name}.rs"));
                            if (self.read)(&flat).is_some() {
                                flat
                            } else {
                                children.join(&name).join("mod.rs")
                            }
                        }
                    };
                    self.load(&file, child)?;
                }
            }
        }
        Ok(())
    }

    /// `path` as written in `module`, from the crate root; `None` when it leaves the crate (a
    /// dependency, `std`) or names something local to a function.
    fn absolute(&self, module: &[String], path: &[String], depth: usize) -> Option<Mod> {
        let (first, rest) = path.split_first()?;
        let mut base: Mod = module.to_vec();
        let mut rest = rest;
        match first.as_str() {
            "crate" => base.clear(),
            "self" => {}
            "super" => {
                base.pop()?;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            _ if depth > 16 => return None,
            name => {
                let info = self.mods.get(&key(module))?;
                let bound = info.uses.iter().find(|l| l.bound.as_deref() == Some(name));
                if let Some(leaf) = bound.filter(|l| l.path.len() > 1 || l.path[0] != name) {
                    let mut out = self.absolute(module, &leaf.path, depth + 1)?;
                    out.extend(rest.iter().cloned());
                    return Some(out);
                }
                if bound.is_some() || !info.children.contains(name) {
                    return None;
                }
                base.push(name.to_string());
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module a crate path lands in, following imports and re-exports.
    fn resolve(&self, path: &[String]) -> Option<String> {
        let mut path = path.to_vec();
        for _ in 0..16 {
            let n = (0..=path.len()).rev().find(|&i| self.mods.contains_key(&key(&path[..i])))?;
            let here = key(&path[..n]);
            let Some(name) = path.get(n) else { return Some(here) };
            let leaf = self.mods.get(&here).and_then(|m| m.uses.iter().find(|l| l.bound.as_deref() == Some(name)));
            let target = leaf.and_then(|l| self.absolute(&path[..n], &l.path, 0));
            match target {
                Some(target) if target != path[..=n] => {
                    let mut next = target.clone();
                    next.extend(path[n + 1..].iter().cloned());
                    path = next;
                }
                _ => return Some(here),
            }
        }
        None
    }
}

/// Collects every path of one file, in the module each is written in.
struct Uses<'a> {
    b: &'a Builder<'a>,
    module: Mod,
    /// (absolute path, line, as written).
    found: Vec<(Mod, usize, String)>,
}

impl Uses<'_> {
    fn items(&mut self, items: &[syn::Item]) {
        for item in items {
            self.visit_item(item);
        }
    }

    fn add(&mut self, written: &[String], line: usize) {
        if let Some(abs) = self.b.absolute(&self.module, written, 0) {
            self.found.push((abs, line, written.join("::")));
        }
    }
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        match item {
            syn::Item::Mod(m) => {
                // Outline modules are files of their own; inline ones are walked in their module.
                if let Some((_, inner)) = &m.content {
                    self.module.push(m.ident.to_string());
                    self.items(inner);
                    self.module.pop();
                }
            }
            syn::Item::Use(u) => {
                let mut leaves = Vec::new();
                flatten(&u.tree, &mut Vec::new(), &mut leaves);
                let line = u.span().start().line;
                for l in leaves {
                    self.add(&l.path, line);
                }
            }
            other => syn::visit::visit_item(self, other),
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.add(&segs, p.span().start().line);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let mut found = Vec::new();
        macro_paths(m.tokens.clone(), &mut found);
        for (segs, line) in found {
            self.add(&segs, line);
        }
        syn::visit::visit_macro(self, m);
    }
}

/// Files that use each other, directly or not (a strongly connected group of the graph).
#[derive(Debug, PartialEq, Eq)]
pub struct Circle {
    /// Every file of the group.
    pub files: Vec<String>,
    /// One shortest cycle through the first of them: `a → b → c → a`.
    pub cycle: Vec<String>,
}

/// The groups of more than one file that use each other.
pub fn circles(g: &Graph) -> Vec<Circle> {
    let nodes: Vec<&String> = g.files.keys().collect();
    let index: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| g.edges.get(*n).map(|e| e.keys().filter_map(|t| index.get(t).copied()).collect()).unwrap_or_default())
        .collect();
    // Tarjan, iteratively.
    let n = nodes.len();
    let (mut idx, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut sccs, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if idx[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some((v, i)) = work.pop() {
            if i == 0 {
                idx[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = adj[v].get(i) {
                work.push((v, i + 1));
                if idx[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(idx[w]);
                }
                continue;
            }
            if low[v] == idx[v] {
                let mut scc = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    sccs.push(scc);
                }
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
        }
    }
    sccs.into_iter()
        .map(|scc| {
            let members: BTreeSet<usize> = scc.iter().copied().collect();
            let start = *members.iter().next().unwrap_or(&0);
            // Shortest way from `start` back to itself inside the group.
            let mut prev: BTreeMap<usize, usize> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut end = None;
            while let Some(v) = queue.pop_front() {
                for &w in adj[v].iter().filter(|w| members.contains(w)) {
                    if w == start {
                        end = Some(v);
                        break;
                    }
                    if let std::collections::btree_map::Entry::Vacant(e) = prev.entry(w) {
                        e.insert(v);
                        queue.push_back(w);
                    }
                }
                if end.is_some() {
                    break;
                }
            }
            let mut cycle = vec![start];
            let mut at = end.unwrap_or(start);
            while at != start {
                cycle.push(at);
                at = prev[&at];
            }
            cycle[1..].reverse();
            cycle.push(start);
            Circle {
                files: members.iter().map(|&i| nodes[i].clone()).collect(),
                cycle: cycle.into_iter().map(|i| nodes[i].clone()).collect(),
            }
        })
        .collect()
}
