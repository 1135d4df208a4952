//! Plugin source trees for the tests' language builds (foo_groups, js_plugins, go_plugins): hashed
//! to name a cached build, copied into a work folder, and given links to the repository's
//! `host/` and `wit/` two levels up, where the language build scripts look for them.

use anyhow::{Context, Result};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// Feeds every file under `src` into `h` (names and bytes, in name order), leaving out folders
/// and files named in `skip`; copies each file to the same place under `dst` too when given.
pub fn hash_tree(src: &Path, dst: Option<&Path>, skip: &[&str], h: &mut impl Hasher) -> Result<()> {
    if let Some(dst) = dst {
        std::fs::create_dir_all(dst)?;
    }
    let mut entries: Vec<_> =
        std::fs::read_dir(src).with_context(|| format!("cannot read {}", src.display()))?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let n = name.to_string_lossy();
        if skip.contains(&n.as_ref()) {
            continue;
        }
        let to = dst.map(|d| d.join(&name));
        if e.file_type()?.is_dir() {
            hash_tree(&e.path(), to.as_deref(), skip, h)?;
        } else {
            let bytes = std::fs::read(e.path())?;
            n.hash(h);
            bytes.hash(h);
            if let Some(to) = to {
                std::fs::write(to, bytes)?;
            }
        }
    }
    Ok(())
}

/// Links `work/host` and `work/wit` to this checkout's. Made anew when they point elsewhere: a
/// link left by another checkout would build that checkout's scripts, or nothing once it is gone.
pub fn link_repo(work: &Path) -> Result<()> {
    let root = crate::repo_root();
    std::fs::create_dir_all(work)?;
    for (link, to) in [("host", root.join("host")), ("wit", root.join("wit"))] {
        let l = work.join(link);
        if std::fs::read_link(&l).ok().as_deref() != Some(to.as_path()) {
            let _ = std::fs::remove_file(&l);
            std::os::unix::fs::symlink(&to, &l)?;
        }
    }
    Ok(())
}
