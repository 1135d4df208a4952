//! The guides (README.md and docs/*.md) are true to the repository, without a cluster: every
//! ```` ```sh ```` block is run by a named test that reads its guide or says why it is not run,
//! every relative link, anchor and backticked repository path resolves, the README's status table
//! names every test file, its figures are BENCHMARKS.md's, and the offline blocks (`kwop plugin
//! inspect`, `test`, `reconcile`, `validate`) and the commands' synopsis are run here, from the
//! guides' own text. The checks themselves are in `kwop_tests::docs`; the last test shows each
//! one catches what it is for.

use kwop_tests::docs::{self, Guide};
use kwop_tests::plugins;
use std::path::{Path, PathBuf};
use std::process::Command;

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");
const THIS: &str = "tests/tests/docs.rs";
const WRITE_A_PLUGIN: &str = "docs/write-a-plugin.md";
const ADMISSION: &str = "docs/admission.md";
const OPERATE: &str = "docs/operate.md";

fn root() -> PathBuf {
    kwop_tests::repo_root()
}

fn all_guides() -> Vec<Guide> {
    docs::guides(&root()).expect("README.md and the Markdown under docs/ are readable")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn assert_none(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

#[test]
fn every_sh_block_is_run_by_a_test_or_says_why_not() {
    let guides = all_guides();
    assert!(guides.len() > 5, "README.md and the guides in docs/");
    assert_none("command blocks", guides.iter().flat_map(|g| docs::block_problems(g, &root())).collect());
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    assert_none("links", all_guides().iter().flat_map(|g| docs::link_problems(g, &root())).collect());
}

#[test]
fn every_repository_path_in_backticks_exists() {
    assert_none("paths", all_guides().iter().flat_map(|g| docs::path_problems(g, &root())).collect());
}

#[test]
fn the_figures_are_the_ones_in_benchmarks() {
    let benchmarks = read("BENCHMARKS.md");
    let guides = all_guides();
    assert!(guides[0].text.contains(docs::FIGURES_BEGIN), "the README's numbers are marked as BENCHMARKS.md's");
    assert_none("figures", guides.iter().flat_map(|g| docs::figure_problems(g, &benchmarks)).collect());
}

/// Microseconds in "138.7 µs" or "3.12 ms".
fn micros(cell: &str) -> Option<f64> {
    let (n, unit) = cell.trim().split_once(' ')?;
    let n: f64 = n.parse().ok()?;
    match unit {
        "µs" => Some(n),
        "ms" => Some(n * 1000.0),
        _ => None,
    }
}

#[test]
fn the_language_table_matches_figure_1_of_benchmarks() {
    let benchmarks = read("BENCHMARKS.md");
    let guide = read(WRITE_A_PLUGIN);
    let cells =
        |line: &str| line.trim().trim_matches('|').split('|').map(str::trim).map(String::from).collect::<Vec<_>>();
    for (language, key) in [("Rust", "Rust"), ("JavaScript", "JS"), ("Python", "Python"), ("C", "C"), ("Go", "Go")] {
        let row = guide.lines().find(|l| l.starts_with(&format!("| {language} | [`guest-foo/")));
        let said =
            row.and_then(|r| micros(cells(r).last()?)).unwrap_or_else(|| panic!("{WRITE_A_PLUGIN}: no {language} row"));
        let measured = benchmarks
            .lines()
            .filter(|l| l.starts_with(&format!("| guest-foo ({key}")) && l.contains("as WASM, fresh pooled instance"))
            .find_map(|l| micros(cells(l).get(1)?))
            .unwrap_or_else(|| panic!("BENCHMARKS.md: no fresh pooled instance row for {key}"));
        let off = (said - measured).abs() / measured;
        assert!(off <= 0.05, "{language}: the guide says {said} µs, BENCHMARKS.md {measured} µs");
    }
}

#[test]
fn the_status_table_names_every_test_file() {
    let readme = read("README.md");
    let status = readme.split("\n## Status\n").nth(1).expect("the README has a Status section");
    let status = status.split("\n## ").next().unwrap_or(status);
    let named: Vec<String> = docs::links(status).into_iter().map(|(_, t)| t).collect();
    let mut files: Vec<String> = std::fs::read_dir(root().join("tests/tests"))
        .expect("tests/tests")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rs"))
        .collect();
    files.sort();
    let missing: Vec<_> = files.iter().filter(|f| !named.contains(&format!("tests/tests/{f}"))).collect();
    assert!(missing.is_empty(), "the README's status table does not name {missing:?}");
}

#[test]
fn the_readme_stays_a_front_door() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: move detail into docs/ (at most 300)");
    let first = docs::blocks(&readme).into_iter().next().expect("a code block");
    let commands: Vec<&str> = first.code.lines().map(|l| l.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!((first.lang.as_deref(), commands.as_slice()), (Some("sh"), ["scripts/demo", "scripts/test"].as_slice()));
}

#[test]
fn the_readme_names_every_folder_of_host_src_and_no_other() {
    let readme = Guide::new("README.md", &read("README.md"));
    assert_none("the README's folders", docs::folder_problems(&readme, &root(), "host/src"));
}

/// Runs the block of `guide` marked `<!-- run-by: tests/tests/docs.rs::test -->` in the
/// repository's root, with `kwop` the binary under test, each `(from, to)` replaced (each `from`
/// must be in the block). Every `# N passed, M failed` the block promises must be in the output.
fn run_block(guide: &str, test: &str, substitutions: &[(&str, &str)]) -> (bool, String) {
    let mut code = docs::run_by_block(&read(guide), THIS, test)
        .unwrap_or_else(|| panic!("{guide} has no sh block marked run-by {THIS}::{test}"));
    let promised: Vec<String> = code
        .lines()
        .filter_map(|l| l.split_once("# ").map(|(_, c)| c.trim().to_string()))
        .filter(|c| c.contains(" passed, ") && c.ends_with(" failed"))
        .collect();
    for (from, to) in substitutions {
        assert!(code.contains(from), "{guide}: the block no longer says {from}");
        code = code.replace(from, to);
    }
    let scratch = std::env::temp_dir().join(format!("kwop-docs-{}-{test}", std::process::id()));
    let bin = scratch.join("bin");
    std::fs::create_dir_all(&bin).expect("a scratch folder");
    let _ = std::fs::remove_file(bin.join("kwop"));
    std::os::unix::fs::symlink(KWOP, bin.join("kwop")).expect("kwop on the PATH");
    let out = Command::new("bash")
        .args(["-c", &format!("set -euo pipefail\n{code}")])
        .current_dir(root())
        .env("PATH", format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default()))
        .env("KWOP_CACHE_DIR", scratch.join("cache"))
        .output()
        .expect("bash runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&scratch);
    for p in promised {
        assert!(text.contains(&p), "{guide}: the block promises `{p}`:\n{code}\n{text}");
    }
    (out.status.success(), text)
}

#[test]
fn the_offline_commands_of_write_a_plugin_run_as_written() {
    // "Any plugin, in any language": guest-foo as built for 0.1, status as sample-controller's.
    let any = plugins::guest_foo_v01();
    let (ok, out) = run_block(
        WRITE_A_PLUGIN,
        "the_offline_commands_of_write_a_plugin_run_as_written",
        &[("FOO_PLUGIN.wasm", &any)],
    );
    assert!(ok, "{out}");
    for said in ["\"name\": \"guest-foo\"", "\"world\": \"kwop:reconciler@0.1.0\"", "\"sha256\""] {
        assert!(out.contains(said), "inspect prints {said}:\n{out}");
    }
    // The last command's output: pretty-printed JSON, the last `{` at the start of a line onwards.
    let outcome = out.rfind("\n{").map_or(out.as_str(), |at| &out[at + 1..]);
    let outcome: serde_json::Value = serde_json::from_str(outcome).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(outcome["apply"][0]["kind"], "Deployment", "reconcile prints the intent: {outcome}");
    // The sentence after the block: the Rust guest-foo passes them with the two --ignore flags.
    let guide = read(WRITE_A_PLUGIN);
    let ignore = "--ignore .status.conditions --ignore .status.observedGeneration";
    assert!(guide.contains(ignore), "{WRITE_A_PLUGIN} says how a plugin with conditions passes");
    let mut args = vec!["plugin", "test", plugins::GUEST_FOO];
    args.extend(ignore.split(' '));
    args.push("tests/fixtures/foo");
    let out = Command::new(KWOP).args(&args).current_dir(root()).output().expect("kwop runs");
    assert!(String::from_utf8_lossy(&out.stdout).contains("13 passed, 0 failed"), "{out:?}");
}

#[test]
fn the_offline_validation_of_admission_runs_as_written() {
    let (ok, out) = run_block(
        ADMISSION,
        "the_offline_validation_of_admission_runs_as_written",
        &[("FOO_PLUGIN.wasm", plugins::GUEST_FOO)],
    );
    assert!(ok, "{out}");
    assert!(out.contains("refused: exit 1"), "validate exits 1 on a refusal:\n{out}");
    assert!(out.contains("is not a valid Deployment name"), "with guest-foo's message:\n{out}");
    assert!(out.contains("\"allowed\": false") || out.contains("\"allowed\":false"), "{out}");
}

/// The `kwop ...` lines of operate.md's synopsis: (subcommand words, the flags on the line).
fn synopsis() -> Vec<(Vec<String>, Vec<String>)> {
    let guide = read(OPERATE);
    let block = docs::blocks(&guide)
        .into_iter()
        .find(|b| b.lang.as_deref() == Some("text") && b.code.starts_with("kwop run"))
        .expect("operate.md's Commands block");
    let flag = regex::Regex::new(r"--[a-z][a-z0-9-]*").expect("a valid regex");
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for line in block.code.lines() {
        let continued = line.starts_with(' ');
        let line = line.trim_start();
        let line = line.split("   ").next().unwrap_or(line); // what follows is a description
        let flags = flag.find_iter(line).map(|m| m.as_str().to_string());
        match (continued, out.last_mut()) {
            (true, Some(last)) => last.1.extend(flags),
            _ => {
                let words = line.split_whitespace().skip(1).take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()));
                out.push((words.map(String::from).collect(), flags.collect()));
            }
        }
    }
    out
}

fn help(words: &[String]) -> String {
    let out = Command::new(KWOP).args(words).arg("--help").output().expect("kwop runs");
    assert!(out.status.success(), "kwop {words:?} --help: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_commands_synopsis_names_only_flags_kwop_has_and_every_command() {
    let lines = synopsis();
    assert!(lines.len() >= 11, "run, crd and the nine plugin commands: {lines:?}");
    for (words, flags) in &lines {
        let help = help(words);
        for f in flags {
            let known = help
                .match_indices(f.as_str())
                .any(|(i, _)| !help[i + f.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-'));
            assert!(known, "{OPERATE}: `kwop {}` has no {f}:\n{help}", words.join(" "));
        }
    }
    // And the other way: every command kwop has is in the synopsis.
    for parent in [vec![], vec!["plugin".to_string()]] {
        let help = help(&parent);
        let commands = help.split("Commands:").nth(1).unwrap_or_default();
        let commands = commands.split("\n\n").next().unwrap_or_default();
        for name in commands.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| *n != "help") {
            let mut words = parent.clone();
            words.push(name.to_string());
            let is_parent = lines.iter().any(|(w, _)| w.len() > words.len() && w.starts_with(&words));
            assert!(
                is_parent || lines.iter().any(|(w, _)| *w == words),
                "{OPERATE} does not show `kwop {}`",
                words.join(" ")
            );
        }
    }
}

/// A throwaway repository: a test file that reads docs/g.md, another that does not, BENCHMARKS.
fn scratch_repo() -> PathBuf {
    let root = std::env::temp_dir().join(format!("kwop-docs-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["tests/tests", "docs", "host/src/plugin"] {
        std::fs::create_dir_all(root.join(dir)).expect("scratch");
    }
    let reads = "const G: &str = \"docs/g.md\";\n#[test]\nfn runs_it() {}\nfn helper() {}\n";
    std::fs::write(root.join("tests/tests/reads.rs"), reads).expect("scratch");
    std::fs::write(root.join("tests/tests/other.rs"), "#[test]\nfn runs_it() {}\n").expect("scratch");
    std::fs::write(root.join("host/src/lib.rs"), "").expect("scratch");
    std::fs::write(root.join("docs/h.md"), "# H\n\n## A part\n").expect("scratch");
    std::fs::write(root.join("README.md"), "# Scratch\n").expect("scratch");
    root
}

fn problems_in(root: &Path, text: &str) -> Vec<String> {
    let g = Guide::new("docs/g.md", text);
    let mut all = docs::block_problems(&g, root);
    all.extend(docs::link_problems(&g, root));
    all.extend(docs::path_problems(&g, root));
    all.extend(docs::figure_problems(&g, "| warm | 41 ms | 0.70× |"));
    all
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let root = scratch_repo();
    let good = "# G\n\n<!-- run-by: tests/tests/reads.rs::runs_it -->\n```sh\nkwop crd\n```\n\n\
                <!-- not-run: needs a cluster of one's own -->\n```sh\nkubectl get rp\n```\n\n\
                ```yaml\na: 1\n```\n\n- a list\n\n  <!-- not-run: inside a list item, still checked -->\n  ```sh\n  ls\n  ```\n\n\
                [h](h.md#a-part) [self](#g) [up](../host/src/lib.rs) [web](https://example.com) `host/src/lib.rs`\n\n\
                <!-- figures-from: BENCHMARKS.md -->\np99 41 ms, 0.70×\n<!-- /figures-from -->\n";
    assert_none("a guide that follows every rule", problems_in(&root, good));
    for (broken, expected) in [
        ("```sh\nls\n```\n", "neither"),
        ("```\nls\n```\n", "without a language"),
        ("<!-- not-run: -->\n```sh\nls\n```\n", "does not say why"),
        ("<!-- run-by: tests/tests/missing.rs::runs_it -->\n```sh\nls\n```\n", "does not exist"),
        ("<!-- run-by: tests/tests/reads.rs::gone -->\n```sh\nls\n```\n", "no test function `gone`"),
        ("<!-- run-by: tests/tests/reads.rs::helper -->\n```sh\nls\n```\n", "no test function `helper`"),
        ("<!-- run-by: tests/tests/other.rs::runs_it -->\n```sh\nls\n```\n", "never names \"docs/g.md\""),
        ("<!-- run-by: tests/tests/reads.rs::runs_it -->\n\n```sh\nls\n```\n", "not directly above"),
        ("<!-- not-run: a reason long enough -->\n```yaml\na: 1\n```\n", "not sh"),
        ("[x](missing.md)\n", "does not exist"),
        ("[x](h.md#no-such-part)\n", "no heading with the anchor #no-such-part"),
        ("[x](#nowhere)\n", "no heading here with the anchor #nowhere"),
        ("[x](../../outside.md)\n", "leaves the repository"),
        ("`host/src/gone.rs`\n", "`host/src/gone.rs` does not exist"),
        ("`plugin/gone.rs`\n", "`plugin/gone.rs` does not exist"),
        ("<!-- figures-from: BENCHMARKS.md -->\np99 42 ms\n<!-- /figures-from -->\n", "42 ms is not in BENCHMARKS.md"),
    ] {
        let problems = problems_in(&root, &format!("# G\n\n{broken}"));
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{broken:?} should give {expected:?}, gave {problems:?}"
        );
    }
    // The README's folders against host/src's: `lib.rs` is a file, `plugin/` is named nowhere.
    std::fs::create_dir_all(root.join("host/src/plugin")).expect("scratch");
    let readme =
        Guide::new("README.md", "```text\n watch/ store ──► gone/\n```\n\n(`src/lib.rs`, `watch/`, `deploy/`)\n");
    let problems = docs::folder_problems(&readme, &root, "host/src");
    assert!(problems.iter().any(|p| p.contains("names `gone/`")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("never names") && p.ends_with("/plugin/")), "{problems:?}");
    assert!(!problems.iter().any(|p| p.contains("deploy")), "a top-level folder is not host/src's: {problems:?}");
    std::fs::create_dir_all(root.join("host/src/watch")).expect("scratch");
    std::fs::create_dir_all(root.join("host/src/gone")).expect("scratch");
    let readme = Guide::new("README.md", "```text\n watch/ store ──► gone/ │ plugin/\n```\n");
    assert_none("folders all named", docs::folder_problems(&readme, &root, "host/src"));
    std::fs::create_dir_all(root.join("docs/design")).expect("scratch");
    std::fs::write(root.join("docs/design/n.md"), "# N\n").expect("scratch");
    let found: Vec<String> =
        docs::guides(&root).map_or_else(|_| Vec::new(), |g| g.into_iter().map(|g| g.path).collect());
    assert_eq!(found, ["README.md", "docs/design/n.md", "docs/h.md"], "guides are found in docs/'s subfolders too");
    assert_eq!(
        docs::slug("The OCI artifact: `kwop plugin push` and `pull`"),
        "the-oci-artifact-kwop-plugin-push-and-pull"
    );
    assert_eq!(docs::slug("Limits of the sandbox's tests"), "limits-of-the-sandboxs-tests");
    assert!(docs::anchors("# A\n\n## A\n").contains("a-1"), "a repeated heading is numbered");
    assert_eq!(docs::figures("1.54× and 138.7 µs, 3415 B, 2 cores, 5 sec"), ["1.54×", "138.7 µs", "3415 B"]);
    let _ = std::fs::remove_dir_all(&root);
}
