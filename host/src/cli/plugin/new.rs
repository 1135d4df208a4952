//! `kwop plugin new NAME --lang LANG`: scaffolds a plugin folder and says what to do next.

use crate::scaffold;
use std::path::PathBuf;
use std::process::ExitCode;

pub(super) fn new(name: &str, lang: &str, dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let done = scaffold::scaffold(name, lang, &dir)?;
    let shown = done.dir.display();
    println!("created {shown} ({} files), a {} plugin:", done.files.len(), scaffold::canonical_language(lang));
    for f in &done.files {
        if !f.starts_with("wit/rust") {
            println!("  {}", f.display());
        }
    }
    println!(
        "\nnext:\n  cd {shown}\n  ./test.sh                                      # native unit tests\n  ./build.sh                                     # -> dist/plugin.wasm\n  kwop plugin test dist/plugin.wasm fixtures --crd crds/foo.yaml\n  kwop plugin reconcile dist/plugin.wasm --primary foo.yaml\n\nREADME.md says how to run it on a cluster."
    );
    Ok(ExitCode::SUCCESS)
}
