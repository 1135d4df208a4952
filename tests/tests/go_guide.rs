//! The "Go, from zero" guide of docs/write-a-plugin.md, run as a new user runs it (issue 15): its
//! code blocks are taken from the guide (so it cannot rot), written into one shell script and run in a
//! folder outside the repository — `go mod init`, the SDK's `replace`, `main.go` and
//! `main_test.go` as printed, `go test`, the build, `kwop plugin inspect` and `kwop plugin
//! reconcile`, then `kwop run` on this test's control plane until the ConfigMap appears.
//!
//! Only the lines that say where things are change, each named in [`SUBSTITUTIONS`] and required
//! to be in the guide exactly once: the checkout is this repository, `kwop` is the binary under
//! test (not a `cargo install`), and the cluster is the test's plane (not `scripts/dev-cluster`).
//! The Go toolchain, wasm-tools and the WASI adapter come from the guide's own build script and
//! its caches (`scripts/test` builds the guests first, so they are installed).

use kwop_tests::procs::{free_port, Proc};
use kwop_tests::{ControlPlane, Mode};
use std::path::Path;
use std::time::{Duration, Instant};

const KWOP: &str = env!("CARGO_BIN_EXE_kwop-host");
const SECTION: &str = "## Go, from zero";
/// The guide that holds [`SECTION`].
const GUIDE: &str = "docs/write-a-plugin.md";

/// (what the guide says, what the test runs instead, why). `{root}`, `{kubeconfig}`: filled in.
const SUBSTITUTIONS: &[(&str, &str, &str)] = &[
    ("export KWOP=/path/to/kwop", "export KWOP='{root}'", "the checkout is this repository"),
    (
        "cargo install --locked --path $KWOP/host",
        ": kwop is the binary under test, first on PATH",
        "no release build inside the suite",
    ),
    ("(cd $KWOP && scripts/dev-cluster start)", ": the control plane of the test is running", "the test's plane"),
    ("export KUBECONFIG=$KWOP/.kwop/dev/kubeconfig", "export KUBECONFIG='{kubeconfig}'", "the test's plane"),
    ("(cd $KWOP && scripts/dev-cluster stop)", ": the test stops its plane", "the test's plane"),
];

/// A fenced code block of the guide; Go blocks carry the file the prose before them names.
#[derive(Debug)]
struct Block {
    lang: String,
    code: String,
    file: Option<String>,
}

/// The guide's code blocks, in order: from the section heading to the next `## ` heading.
fn guide_blocks(guide: &str) -> Vec<Block> {
    let start = guide.find(&format!("\n{SECTION}\n")).unwrap_or_else(|| panic!("{GUIDE} has no section {SECTION:?}"));
    let section = &guide[start + SECTION.len() + 2..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let (mut prose, mut open): (String, Option<(String, String)>) = (String::new(), None);
    for line in section.lines() {
        match open.take() {
            None => match line.strip_prefix("```") {
                Some(lang) => open = Some((lang.trim().to_string(), String::new())),
                None => prose.push_str(&format!("{line}\n")),
            },
            Some((lang, code)) if line.trim_end() == "```" => {
                let file = (lang == "go").then(|| named_go_file(&prose));
                blocks.push(Block { lang, code, file });
                prose.clear();
            }
            Some((lang, mut code)) => {
                code.push_str(&format!("{line}\n"));
                open = Some((lang, code));
            }
        }
    }
    assert!(open.is_none(), "the guide has an unclosed code block");
    blocks
}

/// The one `name.go` in backticks in the prose before a Go block: the file it is saved as.
fn named_go_file(prose: &str) -> String {
    let mut names: Vec<&str> =
        prose.split('`').skip(1).step_by(2).filter(|s| s.ends_with(".go") && !s.contains(' ')).collect();
    names.dedup();
    assert_eq!(names.len(), 1, "the prose before a Go block must name its file once, as `x.go`: {prose:?}");
    names[0].to_string()
}

/// One bash script: a prelude that places the user (an empty folder, the binary under test as
/// `kwop`), then every block in order, shell ones as printed (bar [`SUBSTITUTIONS`]), Go ones
/// saved under their file names.
fn script(blocks: &[Block], work: &Path, bin: &Path, kubeconfig: &Path) -> String {
    let root = kwop_tests::repo_root().display().to_string();
    let mut shell: Vec<String> = blocks.iter().filter(|b| b.lang == "sh").map(|b| b.code.clone()).collect();
    for (from, to, why) in SUBSTITUTIONS {
        let hits = shell.iter().map(|c| c.matches(from).count()).sum::<usize>();
        assert_eq!(hits, 1, "the guide should say `{from}` once ({why}); it changed: update SUBSTITUTIONS");
        let to = to.replace("{root}", &root).replace("{kubeconfig}", &kubeconfig.display().to_string());
        for c in shell.iter_mut() {
            *c = c.replace(from, &to);
        }
    }
    let mut out = format!(
        "set -euo pipefail\n\
         # Kill what the guide left running (kwop run &) if a step fails.\n\
         trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n\
         unset KUBECONFIG GOFLAGS GOOS GOARCH GOWORK KWOP_PLUGINS KWOP_NAMESPACE\n\
         export PATH='{}':\"$PATH\"\n\
         cd '{}'\n\
         set -x\n",
        bin.display(),
        work.display()
    );
    let mut shell = shell.into_iter();
    for (i, b) in blocks.iter().enumerate() {
        out.push_str(&format!(": '--- guide block {} ({})'\n", i + 1, b.lang));
        match (b.lang.as_str(), &b.file) {
            ("sh", _) => out.push_str(&shell.next().unwrap_or_default()),
            ("go", Some(file)) => out.push_str(&format!("cat > {file} <<'KWOP_GUIDE_EOF'\n{}KWOP_GUIDE_EOF\n", b.code)),
            (lang, _) => panic!("the guide has a {lang:?} block: the test runs only sh and go blocks"),
        }
    }
    out
}

/// `kwop` for the script: the binary under test. `kwop run` gets free ports (the defaults,
/// 8080/8081, may be taken on a shared machine) and dies with the script's shell.
fn kwop_on_path(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let (metrics, probes) = (free_port()?, free_port()?);
    let wrapper = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = run ]; then\n  exec setpriv --pdeathsig KILL '{KWOP}' \"$@\" \
         --metrics-bind-address=127.0.0.1:{metrics} --health-probe-bind-address=127.0.0.1:{probes}\nfi\n\
         exec '{KWOP}' \"$@\"\n"
    );
    let path = dir.join("kwop");
    std::fs::write(&path, wrapper)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

#[test]
fn the_guide_is_parsed_into_its_steps() {
    let guide = std::fs::read_to_string(kwop_tests::repo_root().join(GUIDE)).expect(GUIDE);
    let blocks = guide_blocks(&guide);
    let files: Vec<_> = blocks.iter().filter_map(|b| b.file.as_deref()).collect();
    assert_eq!(files, ["main.go", "main_test.go"]);
    let all: String = blocks.iter().map(|b| b.code.as_str()).collect();
    for step in ["go mod init", "go test", "wit/go/build.sh", "kwop plugin reconcile", "kwop run", "kubectl wait"] {
        assert!(all.contains(step), "the guide lost its step `{step}`");
    }
    // A block the script could not run fails loudly rather than being skipped.
    let broken = format!("\n{SECTION}\n\n```sh\necho one\n```\n\nno file named here\n\n```go\npackage main\n```\n");
    assert!(std::panic::catch_unwind(|| guide_blocks(&broken)).is_err());
}

#[test]
fn a_new_user_follows_the_go_guide_and_the_plugin_runs_on_the_cluster() -> anyhow::Result<()> {
    let plane = ControlPlane::shared(Mode::Api)?;
    let guide = std::fs::read_to_string(kwop_tests::repo_root().join(GUIDE))?;
    let blocks = guide_blocks(&guide);

    // A user's folder, outside the repository.
    let base = std::env::temp_dir().join(format!("kwop-go-guide-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (work, bin) = (base.join("home"), base.join("bin"));
    std::fs::create_dir_all(&work)?;
    std::fs::create_dir_all(&bin)?;
    assert!(!work.starts_with(kwop_tests::repo_root()), "the guide must run outside the repository");
    kwop_on_path(&bin)?;
    // The guide works in namespace default: start from nothing there (matters on an external cluster).
    for what in ["foo/example", "configmap/example-info"] {
        plane.kubectl_output(&["delete", "-n", "default", "--ignore-not-found", "--wait=false", what]).ok();
    }

    let path = base.join("guide.sh");
    std::fs::write(&path, script(&blocks, &work, &bin, &plane.kubeconfig))?;
    let log = base.join("guide.log");
    let mut run = Proc::spawn("guide", Path::new("bash"), &[path.display().to_string()], &log, &[])?;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = run.child.try_wait()? {
            break status;
        }
        if start.elapsed() > Duration::from_secs(900) {
            run.kill();
            anyhow::bail!("the guide did not finish in 900 s:\n{}", run.tail(60));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let out = std::fs::read_to_string(&log)?;
    assert!(status.success(), "following the guide failed ({status}); script {}:\n{}", path.display(), run.tail(80));

    // Each step did what the guide says it does.
    assert!(out.contains("ok  \texample.com/foo-info"), "go test ran the guide's tests:\n{out}");
    assert!(work.join("foo-info/foo-info.wasm").is_file(), "the component is built in the user's folder");
    assert!(out.contains("\"world\": \"kwop:reconciler@0.2.0\""), "kwop plugin inspect:\n{out}");
    assert!(out.contains("\"reason\": \"Synced\""), "kwop plugin reconcile printed the event:\n{out}");
    assert!(out.contains(r#"{"deployment":"web","replicas":"2"}"#), "the ConfigMap's data:\n{out}");

    // What the host wrote: the ConfigMap, controlled by the Foo.
    let foo: serde_json::Value =
        serde_json::from_str(&plane.kubectl_output(&["get", "-n", "default", "foo/example", "-o", "json"])?)?;
    let cm: serde_json::Value = serde_json::from_str(&plane.kubectl_output(&[
        "get",
        "-n",
        "default",
        "configmap/example-info",
        "-o",
        "json",
    ])?)?;
    assert_eq!(cm["data"], serde_json::json!({ "deployment": "web", "replicas": "2" }));
    let owner = &cm["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["uid"], &owner["controller"]),
        (&"Foo".into(), &foo["metadata"]["uid"], &true.into())
    );

    for what in ["foo/example", "configmap/example-info"] {
        plane.kubectl_output(&["delete", "-n", "default", "--ignore-not-found", what]).ok();
    }
    let _ = std::fs::remove_dir_all(&base);
    Ok(())
}
