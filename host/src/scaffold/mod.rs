//! `kwop plugin new`: writes a small, complete plugin folder from a template built into the binary.
//!
//! Templates live in `host/templates/<language>/` (one folder per language: adding a language is
//! adding a folder) plus `host/templates/common/` (fixtures and an example Foo, written into
//! every plugin). Each template follows one convention, which the test suite relies on:
//! `./build.sh` writes `dist/plugin.wasm`, `./test.sh` runs the native unit tests, `fixtures/`
//! holds `kwop plugin test` fixtures, `README.md` says the rest. Text files may use
//! `{{name}}` (the plugin name) and `{{crate}}` (the name with `_` for `-`).
//!
//! A few files come from elsewhere in the repository, so there is one copy of each: the WIT, the
//! Foo CRD, the Rust SDK, the pinned JavaScript/Python toolchains and the C JSON library.
//!
//! Floor 1 of 0–15 (`docs/ARCHITECTURE.md`). May use: nothing else in the crate. Used by: `cli`.

mod extra;

use include_dir::{include_dir, Dir, DirEntry};
use std::path::{Path, PathBuf};

static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/templates");

/// Why a plugin folder was not written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not a DNS label.
    #[error("invalid plugin name {0:?}: use a DNS label (lowercase letters, digits and '-', starting with a letter, at most 63 characters)")]
    InvalidName(String),
    /// No template for that language.
    #[error("no template for language {lang:?} (available: {available})")]
    UnknownLanguage {
        /// What was asked for.
        lang: String,
        /// The languages there are.
        available: String,
    },
    /// The target folder exists and is not empty.
    #[error("{0} already exists and is not empty (pick another folder or remove it)")]
    Exists(PathBuf),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A language there is a template for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Language {
    /// Its `--lang` name (the template's folder name).
    pub name: String,
    /// One line about the toolchain.
    pub description: String,
}

/// Every language with a template, sorted by name.
pub fn languages() -> Vec<Language> {
    let mut out: Vec<Language> = TEMPLATES
        .dirs()
        .filter_map(|d| {
            let name = d.path().file_name()?.to_str()?.to_string();
            if name == "common" {
                return None;
            }
            let description = d
                .get_file(d.path().join("template.txt"))
                .and_then(|f| f.contents_utf8())
                .map(|s| s.lines().next().unwrap_or_default().trim().to_string())
                .unwrap_or_default();
            Some(Language { name, description })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Accepts common aliases (`javascript`, `py`) for the template folder names.
pub fn canonical_language(lang: &str) -> &str {
    match lang {
        "javascript" | "node" => "js",
        "py" | "python3" => "python",
        "rs" => "rust",
        other => other,
    }
}

/// Whether `s` is a valid plugin name (a DNS label starting with a letter).
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('-')
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// What was written.
#[derive(Debug)]
pub struct Scaffolded {
    /// The plugin folder.
    pub dir: PathBuf,
    /// Files written, relative to `dir`.
    pub files: Vec<PathBuf>,
}

/// Writes the plugin `name` in `lang` into `dir` (created; must be absent or empty).
pub fn scaffold(name: &str, lang: &str, dir: &Path) -> Result<Scaffolded, ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::InvalidName(name.to_string()));
    }
    let lang = canonical_language(lang);
    let template =
        TEMPLATES.get_dir(lang).filter(|_| lang != "common").ok_or_else(|| ScaffoldError::UnknownLanguage {
            lang: lang.to_string(),
            available: languages().iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", "),
        })?;
    if dir.exists() && std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(ScaffoldError::Exists(dir.to_path_buf()));
    }
    let vars = Vars { name: name.to_string(), krate: name.replace('-', "_") };
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    if let Some(common) = TEMPLATES.get_dir("common") {
        collect(common, common.path(), &vars, &mut files);
    }
    collect(template, template.path(), &vars, &mut files);
    files.retain(|(p, _)| p != Path::new("template.txt"));
    for (path, bytes) in extra::files(lang, &vars) {
        files.retain(|(p, _)| p != &path);
        files.push((path, bytes));
    }
    let mut written = Vec::new();
    for (rel, bytes) in &files {
        let path = dir.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, bytes)?;
            if rel.extension().is_some_and(|e| e == "sh") {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        };
        write().map_err(|source| ScaffoldError::Write { path: path.clone(), source })?;
        written.push(rel.clone());
    }
    written.sort();
    Ok(Scaffolded { dir: dir.to_path_buf(), files: written })
}

/// Values substituted into template files.
pub(crate) struct Vars {
    pub(crate) name: String,
    pub(crate) krate: String,
}

impl Vars {
    pub(crate) fn render(&self, text: &str) -> String {
        text.replace("{{name}}", &self.name).replace("{{crate}}", &self.krate)
    }
}

fn collect(dir: &Dir<'_>, root: &Path, vars: &Vars, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in dir.entries() {
        match entry {
            DirEntry::Dir(d) => collect(d, root, vars, out),
            DirEntry::File(f) => {
                let rel = f.path().strip_prefix(root).unwrap_or(f.path()).to_path_buf();
                // `gitignore` is stored without its dot (cargo packaging drops dotfiles).
                let rel = if rel.file_name().is_some_and(|n| n == "gitignore") {
                    rel.with_file_name(".gitignore")
                } else {
                    rel
                };
                let bytes = match f.contents_utf8() {
                    Some(text) => vars.render(text).into_bytes(),
                    None => f.contents().to_vec(),
                };
                out.retain(|(p, _)| p != &rel);
                out.push((rel, bytes));
            }
        }
    }
}

#[cfg(test)]
mod tests;
