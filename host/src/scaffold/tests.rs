use super::*;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kwop-scaffold-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn every_language_folder_is_a_template() {
    let names: Vec<String> = languages().into_iter().map(|l| l.name).collect();
    for l in ["c", "js", "python", "rust"] {
        assert!(names.contains(&l.to_string()), "{names:?}");
    }
    assert!(!names.contains(&"common".to_string()));
    assert!(languages().iter().all(|l| !l.description.is_empty()), "every template has a template.txt");
}

#[test]
fn each_template_follows_the_convention() {
    for l in languages() {
        let dir = tmp(&format!("conv-{}", l.name));
        let done = scaffold("my-plugin", &l.name, &dir).expect("scaffolded");
        let wit = if l.name == "rust" { "wit/v0.3/reconciler.wit" } else { "wit/v0.2/reconciler.wit" };
        for f in ["build.sh", "test.sh", "README.md", wit, "crds/foo.yaml", "foo.yaml", ".gitignore"] {
            assert!(dir.join(f).is_file(), "{}: {f} missing", l.name);
        }
        assert!(done.files.iter().any(|f| f.starts_with("fixtures")), "{}: fixtures", l.name);
        assert!(!dir.join("template.txt").exists());
        let readme = std::fs::read_to_string(dir.join("README.md")).expect("readme");
        assert!(readme.contains("my-plugin") && !readme.contains("{{"), "{}: placeholders filled", l.name);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn names_are_dns_labels() {
    assert!(valid_name("my-plugin2"));
    for bad in ["", "My", "1abc", "a_b", "a-", &"a".repeat(64)] {
        assert!(!valid_name(bad), "{bad:?}");
        assert!(matches!(scaffold(bad, "rust", &tmp("bad")), Err(ScaffoldError::InvalidName(_))));
    }
}

#[test]
fn unknown_language_lists_the_known_ones() {
    let Err(e) = scaffold("x", "cobol", &tmp("cobol")) else { panic!("cobol has no template") };
    let e = e.to_string();
    assert!(e.contains("cobol") && e.contains("rust") && e.contains("python"), "{e}");
    assert!(scaffold("x", "common", &tmp("common")).is_err());
}

#[test]
fn a_folder_with_files_is_never_overwritten() {
    let dir = tmp("exists");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("mine.txt"), "keep").expect("file");
    assert!(matches!(scaffold("x", "js", &dir), Err(ScaffoldError::Exists(_))));
    assert_eq!(std::fs::read_to_string(dir.join("mine.txt")).expect("kept"), "keep");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_rust_sdk_manifest_stands_alone() {
    let m = standalone_sdk_manifest_for_tests();
    assert!(!m.contains("workspace"), "{m}");
    assert!(m.contains("edition = \"2021\"") && m.contains("features = [\"v1_36\"]"), "{m}");
}

#[test]
fn the_javascript_toolchain_pins_are_guest_foos_under_the_plugins_name() {
    let dir = tmp("js-pins");
    scaffold("my-plugin", "js", &dir).expect("scaffolded");
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).expect("file")).expect("json")
    };
    let (pkg, lock) = (read("package.json"), read("package-lock.json"));
    assert_eq!(pkg["name"], "my-plugin");
    assert_eq!(lock["packages"][""]["name"], "my-plugin");
    let theirs: serde_json::Value =
        serde_json::from_str(include_str!("../../../guest-foo/js/package-lock.json")).expect("json");
    let strip = |mut v: serde_json::Value| {
        v["packages"].as_object_mut().map(|p| p.remove(""));
        v["packages"].clone()
    };
    assert_eq!(strip(lock), strip(theirs), "same locked packages: one toolchain install serves both");
    let _ = std::fs::remove_dir_all(&dir);
}

fn standalone_sdk_manifest_for_tests() -> String {
    extra::standalone_sdk_manifest()
}
