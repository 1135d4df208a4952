//! Checks that keep the guides (README.md and docs/*.md) true to the repository, used by
//! `tests/tests/docs.rs`: every shell block is run by a named test or says why not, every relative
//! link and anchor resolves, every repository path named in backticks exists, and the figures
//! taken from BENCHMARKS.md are found there. Markdown is read with pulldown-cmark (CommonMark, as
//! GitHub renders it), so code spans, fences inside lists and tables are what a reader sees.
//!
//! The markers, each on the line directly above a ```` ```sh ```` block:
//! `<!-- run-by: tests/tests/FILE.rs::TEST -->` (TEST must be a test function in FILE, and FILE
//! must name the guide's path in a string literal) or `<!-- not-run: REASON -->`.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

mod figures;
pub use figures::{figure_problems, figures, FIGURES_BEGIN, FIGURES_END};

/// Languages whose blocks are commands someone would paste into a shell.
const COMMAND_LANGUAGES: &[&str] = &["sh", "bash", "shell", "console", "zsh"];
/// Top-level folders of the repository: a backticked path starting with one must exist.
const REPO_DIRS: &[&str] =
    &["host/", "wit/", "tests/", "scripts/", "deploy/", "crds/", "guest-foo/", "examples/", ".ci/"];
const RUN_BY: &str = "<!-- run-by:";
const NOT_RUN: &str = "<!-- not-run:";

/// One guide: its path from the repository root (`README.md`, `docs/x.md`) and its text.
#[derive(Debug, Clone)]
pub struct Guide {
    pub path: String,
    pub text: String,
}

impl Guide {
    pub fn new(path: &str, text: &str) -> Self {
        Guide { path: path.to_string(), text: text.to_string() }
    }
}

/// README.md and every Markdown file under docs/ (design notes included), in path order.
pub fn guides(root: &Path) -> std::io::Result<Vec<Guide>> {
    let mut paths = Vec::new();
    markdown_under(root, Path::new("docs"), &mut paths)?;
    paths.sort();
    paths.insert(0, "README.md".to_string());
    paths.into_iter().map(|p| Ok(Guide { text: std::fs::read_to_string(root.join(&p))?, path: p })).collect()
}

/// The `.md` files under `root/dir`, as paths from `root`, into `out`.
fn markdown_under(root: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(dir))? {
        let entry = entry?;
        let rel = dir.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            markdown_under(root, &rel, out)?;
        } else if rel.extension().is_some_and(|e| e == "md") {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// A fenced or indented code block: 1-based line of its opening fence, language, code.
#[derive(Debug, Clone)]
pub struct Block {
    pub line: usize,
    pub lang: Option<String>,
    pub code: String,
}

fn parser(text: &str) -> pulldown_cmark::OffsetIter<'_, pulldown_cmark::DefaultBrokenLinkCallback> {
    Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter()
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Every code block, in order. `lang` is `None` for indented blocks and fences without one.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in parser(text) {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => info.split_whitespace().next().map(str::to_string),
                    CodeBlockKind::Indented => None,
                };
                open = Some(Block { line: line_of(text, range.start), lang, code: String::new() });
            }
            Event::Text(t) => {
                if let Some(b) = open.as_mut() {
                    b.code.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(open.take()),
            _ => {}
        }
    }
    out
}

fn is_command(block: &Block) -> bool {
    block.lang.as_deref().is_some_and(|l| COMMAND_LANGUAGES.contains(&l))
}

/// The marker on the line directly above 1-based `line`, if that line is one.
fn marker_above(text: &str, line: usize) -> Option<&str> {
    let above = text.lines().nth(line.checked_sub(2)?)?.trim();
    (above.starts_with(RUN_BY) || above.starts_with(NOT_RUN)).then_some(above)
}

/// `tests/tests/x.rs::name` out of a run-by marker.
fn run_by_target(marker: &str) -> Option<(&str, &str)> {
    let inner = marker.strip_prefix(RUN_BY)?.strip_suffix("-->")?.trim();
    inner.split_once("::")
}

/// Whether `source` defines `name` as a test: `#[test]` or `#[tokio::test...]` among the
/// attributes and doc comments directly above its `fn`.
fn defines_test(source: &str, name: &str) -> bool {
    let lines: Vec<&str> = source.lines().map(str::trim).collect();
    lines.iter().enumerate().any(|(i, l)| {
        let defines = ["fn ", "async fn "].iter().any(|p| l.starts_with(&format!("{p}{name}(")));
        defines
            && lines[..i]
                .iter()
                .rev()
                .take_while(|a| a.starts_with("#[") || a.starts_with("///"))
                .any(|a| *a == "#[test]" || a.starts_with("#[tokio::test"))
    })
}

/// Problems with the code blocks and markers of a guide: a block without a language, a command
/// block without a marker, a marker that names no test reading this guide, a stray marker.
pub fn block_problems(guide: &Guide, root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let at = |line: usize| format!("{}:{line}", guide.path);
    let mut marked_lines = BTreeSet::new();
    for block in blocks(&guide.text) {
        if block.lang.is_none() {
            problems
                .push(format!("{}: a code block without a language (name it: sh, text, yaml, ...)", at(block.line)));
            continue;
        }
        let marker = marker_above(&guide.text, block.line);
        if marker.is_some() {
            marked_lines.insert(block.line - 1);
        }
        match (is_command(&block), marker) {
            (false, Some(m)) => problems.push(format!("{}: `{m}` is above a block that is not sh", at(block.line))),
            (false, None) => {}
            (true, None) => problems.push(format!(
                "{}: a sh block with neither `{RUN_BY} tests/tests/FILE.rs::TEST -->` nor `{NOT_RUN} REASON -->` directly above it",
                at(block.line)
            )),
            (true, Some(m)) if m.starts_with(NOT_RUN) => {
                let reason = m.trim_start_matches(NOT_RUN).trim_end_matches("-->").trim();
                if reason.len() < 10 {
                    problems.push(format!("{}: `{m}` does not say why the block is not run", at(block.line)));
                }
            }
            (true, Some(m)) => problems.extend(run_by_problems(m, guide, root).map(|p| format!("{}: {p}", at(block.line)))),
        }
    }
    for (i, line) in guide.text.lines().enumerate() {
        let l = line.trim();
        if (l.starts_with(RUN_BY) || l.starts_with(NOT_RUN)) && !marked_lines.contains(&(i + 1)) {
            problems.push(format!("{}: `{l}` is not directly above a code block", at(i + 1)));
        }
    }
    problems
}

fn run_by_problems(marker: &str, guide: &Guide, root: &Path) -> Option<String> {
    let Some((file, test)) = run_by_target(marker) else {
        return Some(format!("`{marker}` should read `{RUN_BY} tests/tests/FILE.rs::TEST -->`"));
    };
    if !file.starts_with("tests/tests/") || !file.ends_with(".rs") {
        return Some(format!("`{marker}` names {file}, not a test file under tests/tests/"));
    }
    let Ok(source) = std::fs::read_to_string(root.join(file)) else {
        return Some(format!("`{marker}` names {file}, which does not exist"));
    };
    if !defines_test(&source, test) {
        return Some(format!("`{marker}`: {file} has no test function `{test}`"));
    }
    if !source.contains(&format!("\"{}\"", guide.path)) {
        return Some(format!("`{marker}`: {file} never names \"{}\", so it cannot be reading this block", guide.path));
    }
    None
}

/// The code of the command block directly under `<!-- run-by: FILE::TEST -->` in `text`.
pub fn run_by_block(text: &str, file: &str, test: &str) -> Option<String> {
    let marker = format!("{RUN_BY} {file}::{test} -->");
    blocks(text)
        .into_iter()
        .find(|b| is_command(b) && marker_above(text, b.line) == Some(marker.as_str()))
        .map(|b| b.code)
}

/// GitHub's anchor for a heading's text: lower case, punctuation dropped, spaces to hyphens.
pub fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a guide's headings (duplicates numbered `-1`, `-2`, as GitHub does).
pub fn anchors(text: &str) -> BTreeSet<String> {
    let (mut out, mut heading): (BTreeSet<String>, Option<String>) = (BTreeSet::new(), None);
    for (event, _) in parser(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(heading.take().unwrap_or_default().trim());
                let mut unique = (0..).map(|n| if n == 0 { base.clone() } else { format!("{base}-{n}") });
                let anchor = unique.find(|s| !out.contains(s));
                out.extend(anchor);
            }
            _ => {}
        }
    }
    out
}

/// Every link and image target of a guide with its line.
pub fn links(text: &str) -> Vec<(usize, String)> {
    parser(text)
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                Some((line_of(text, range.start), dest_url.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// `a/b/../c` → `a/c`, without touching the file system; `None` if it climbs above the start.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// Problems with a guide's relative links: a missing file, a link out of the repository, an
/// anchor no heading of the target has.
pub fn link_problems(guide: &Guide, root: &Path) -> Vec<String> {
    let dir = Path::new(&guide.path).parent().unwrap_or(Path::new("")).to_path_buf();
    let mut problems = Vec::new();
    for (line, target) in links(&guide.text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = target.split_once('#').map_or((target.as_str(), None), |(f, a)| (f, Some(a)));
        let at = format!("{}:{line}: link `{target}`", guide.path);
        if file.is_empty() {
            let anchor = anchor.unwrap_or_default();
            if !anchors(&guide.text).contains(anchor) {
                problems.push(format!("{at}: no heading here with the anchor #{anchor}"));
            }
            continue;
        }
        let Some(rel) = normalise(&dir.join(file)) else {
            problems.push(format!("{at} leaves the repository"));
            continue;
        };
        let path = root.join(&rel);
        if !path.exists() {
            problems.push(format!("{at}: {} does not exist", rel.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let text =
                if rel.extension().is_some_and(|e| e == "md") { std::fs::read_to_string(&path).ok() } else { None };
            match text {
                Some(t) if anchors(&t).contains(anchor) => {}
                Some(_) => problems.push(format!("{at}: {} has no heading with the anchor #{anchor}", rel.display())),
                None => problems.push(format!("{at}: an anchor into a file that is not Markdown")),
            }
        }
    }
    problems
}

/// Problems with repository paths in a guide's code spans (`host/src/...`): each must exist. A
/// span that starts with a folder of host/src (`controller/queue.rs`) is a path from host/src.
pub fn path_problems(guide: &Guide, root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (event, range) in parser(&guide.text) {
        let Event::Code(code) = event else { continue };
        if !code.contains('/') || !code.chars().all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c)) {
            continue;
        }
        let first = code.split('/').next().unwrap_or_default();
        let path = if REPO_DIRS.iter().any(|d| code.starts_with(d)) {
            root.join(code.as_ref())
        } else if !first.is_empty() && root.join("host/src").join(first).is_dir() {
            root.join("host/src").join(code.as_ref())
        } else {
            continue;
        };
        if !path.exists() {
            problems.push(format!("{}:{}: `{code}` does not exist", guide.path, line_of(&guide.text, range.start)));
        }
    }
    problems
}

/// The source folders a guide names: `name/` in its text diagrams (```` ```text ```` blocks) and
/// code spans that are exactly `name/` (`controller/`), as the README names host/src's folders.
pub fn folder_mentions(text: &str) -> BTreeSet<String> {
    let in_diagram = regex::Regex::new(r"(?:^|[\s(│])([a-z_]+)/").expect("a valid regex");
    let alone = regex::Regex::new(r"^([a-z_]+)/$").expect("a valid regex");
    let mut out = BTreeSet::new();
    for block in blocks(text).into_iter().filter(|b| b.lang.as_deref() == Some("text")) {
        out.extend(in_diagram.captures_iter(&block.code).map(|c| c[1].to_string()));
    }
    for (event, _) in parser(text) {
        if let Event::Code(code) = event {
            out.extend(alone.captures(&code).map(|c| c[1].to_string()));
        }
    }
    out
}

/// Problems between the folders a guide names ([`folder_mentions`]) and the folders of `dir`
/// (from `root`): one named that is not there, one there that is not named. The repository's own
/// top-level folders (`deploy/`, `scripts/`, ...) are not `dir`'s and are left out.
pub fn folder_problems(guide: &Guide, root: &Path, dir: &str) -> Vec<String> {
    let named: BTreeSet<String> =
        folder_mentions(&guide.text).into_iter().filter(|f| !REPO_DIRS.contains(&format!("{f}/").as_str())).collect();
    let present: BTreeSet<String> = std::fs::read_dir(root.join(dir))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut problems: Vec<String> = named
        .difference(&present)
        .map(|f| format!("{}: names `{f}/`, which {dir} does not have", guide.path))
        .collect();
    problems.extend(present.difference(&named).map(|f| format!("{}: never names {dir}/{f}/", guide.path)));
    problems
}
