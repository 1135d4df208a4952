//! Unit tests of the precompile cache's verification and pruning, in temporary folders.

use super::*;
use std::time::Duration;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kwop-precompiled-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn key(n: u64) -> String {
    format!("{n:064x}-0123456789abcdef")
}

/// Sets an entry's last use to `secs` seconds after the epoch.
fn used_at(dir: &Path, key: &str, secs: u64) {
    let f = std::fs::File::options().write(true).open(dir.join(format!("{key}.cwasm"))).expect("entry");
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs)).expect("set mtime");
}

fn present(dir: &Path, key: &str) -> bool {
    dir.join(format!("{key}.cwasm")).exists() || dir.join(format!("{key}.sha256")).exists()
}

/// One entry: 100 bytes of code plus a 64-byte sidecar.
const ENTRY: u64 = 164;

#[test]
fn a_hit_is_verified_and_marks_the_entry_used() {
    let dir = tmp("hit");
    let c = PrecompileCache::new(&dir, 0);
    c.put(&key(1), &[7; 100]).expect("put");
    used_at(&dir, &key(1), 1_000);
    assert_eq!(c.get(&key(1)).as_deref(), Some(&[7u8; 100][..]));
    let mtime = std::fs::metadata(dir.join(format!("{}.cwasm", key(1)))).and_then(|m| m.modified()).expect("mtime");
    assert!(mtime > SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000), "touched on a hit: {mtime:?}");
    // A tampered file is a miss, never served.
    std::fs::write(dir.join(format!("{}.cwasm", key(1))), [8; 100]).expect("tamper");
    assert_eq!(c.get(&key(1)), None);
    assert_eq!(c.get(&key(2)), None, "absent");
}

#[test]
fn the_least_recently_used_entries_go_first_and_a_hit_keeps_one() {
    let dir = tmp("lru");
    // Room for two entries, not three.
    let c = PrecompileCache::new(&dir, 2 * ENTRY + 10);
    c.put(&key(1), &[1; 100]).expect("put 1");
    c.put(&key(2), &[2; 100]).expect("put 2");
    used_at(&dir, &key(1), 1_000);
    used_at(&dir, &key(2), 2_000);
    // Entry 1 is the older, but a hit makes it the most recently used.
    assert!(c.get(&key(1)).is_some());
    let p = c.put(&key(3), &[3; 100]).expect("put 3");
    assert_eq!(p.removed, vec![key(2)]);
    assert_eq!((p.freed, p.remaining), (ENTRY, 2 * ENTRY));
    assert!(present(&dir, &key(1)) && present(&dir, &key(3)) && !present(&dir, &key(2)));
    assert!(c.get(&key(2)).is_none());
}

#[test]
fn several_old_entries_go_until_the_folder_fits() {
    let dir = tmp("several");
    let c = PrecompileCache::new(&dir, 0);
    for n in 1..=5 {
        c.put(&key(n), &[n as u8; 100]).expect("put");
        used_at(&dir, &key(n), 1_000 * n);
    }
    let c = PrecompileCache::new(&dir, 3 * ENTRY);
    let p = c.put(&key(6), &[6; 100]).expect("put 6");
    assert_eq!(p.removed, vec![key(1), key(2), key(3)], "oldest first, only as many as needed");
    assert_eq!(p.remaining, 3 * ENTRY);
    assert!((4..=6).all(|n| present(&dir, &key(n))));
}

#[test]
fn the_entry_just_written_stays_even_over_the_cap() {
    let dir = tmp("keep");
    let c = PrecompileCache::new(&dir, 10);
    c.put(&key(1), &[1; 100]).expect("put 1");
    assert!(present(&dir, &key(1)), "alone over the cap, but just written");
    used_at(&dir, &key(1), 5);
    // Written later but with an mtime older than entry 1's: still kept, entry 1 goes.
    c.put(&key(2), &[2; 100]).expect("put 2");
    used_at(&dir, &key(2), 1);
    let p = c.prune(&key(2)).expect("prune");
    assert!(p.removed.is_empty(), "entry 1 was already pruned by the put: {p:?}");
    assert!(present(&dir, &key(2)) && !present(&dir, &key(1)));
    assert_eq!(c.get(&key(2)).as_deref(), Some(&[2u8; 100][..]));
}

#[test]
fn files_that_are_not_entries_are_neither_counted_nor_touched() {
    let dir = tmp("foreign");
    let foreign = [
        "notes.txt",
        "README.cwasm",
        &format!("{}.tmp4242", key(9)), // a write in progress in another process
        &format!("{}-0123456789abcdef.cwasm", "g".repeat(64)),
    ];
    for f in foreign {
        std::fs::write(dir.join(f), vec![0u8; 100_000]).expect("foreign file");
    }
    std::fs::create_dir_all(dir.join(format!("{}.cwasm", key(8)))).expect("a folder named like an entry");
    let c = PrecompileCache::new(&dir, 2 * ENTRY);
    c.put(&key(1), &[1; 100]).expect("put 1");
    let p = c.put(&key(2), &[2; 100]).expect("put 2");
    assert_eq!(p, Pruned { removed: vec![], freed: 0, remaining: 2 * ENTRY }, "only entries count");
    for f in foreign {
        assert!(dir.join(f).exists(), "{f} left alone");
    }
    assert!(dir.join(format!("{}.cwasm", key(8))).is_dir());
}

#[test]
fn a_zero_cap_keeps_everything() {
    let dir = tmp("nocap");
    let c = PrecompileCache::new(&dir, 0);
    for n in 1..=5 {
        assert_eq!(c.put(&key(n), &[0; 100]).expect("put").removed, Vec::<String>::new());
    }
    assert!((1..=5).all(|n| present(&dir, &key(n))));
}

#[test]
fn half_deleted_entries_and_a_missing_folder_are_handled() {
    let dir = tmp("half");
    let c = PrecompileCache::new(&dir, ENTRY + 10);
    c.put(&key(1), &[1; 100]).expect("put 1");
    used_at(&dir, &key(1), 1);
    // Another host deleted entry 1's code but not yet its sidecar: counted, then pruned.
    std::fs::remove_file(dir.join(format!("{}.cwasm", key(1)))).expect("rm");
    let p = c.put(&key(2), &[2; 100]).expect("put 2");
    assert_eq!(p.removed, vec![key(1)]);
    assert!(!present(&dir, &key(1)));
    let gone = PrecompileCache::new(dir.join("never-created"), 1);
    assert_eq!(gone.prune(&key(1)).expect("no folder, nothing to do"), Pruned::default());
}

#[test]
fn hosts_pruning_one_folder_at_once_do_not_fail() {
    let dir = tmp("concurrent");
    let cap = 4 * ENTRY;
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let c = PrecompileCache::new(&dir, cap);
            std::thread::spawn(move || {
                for n in 0..25 {
                    c.put(&key(t * 100 + n), &[n as u8; 100]).expect("put while others prune");
                    let _ = c.get(&key(t * 100 + n));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic");
    }
    let left = PrecompileCache::new(&dir, cap).prune(&key(0)).expect("prune");
    assert!(left.remaining <= cap, "{left:?}");
}

#[test]
fn entry_names_are_recognised_exactly() {
    let k = key(1);
    assert_eq!(entry_name(&format!("{k}.cwasm")), Some((k.as_str(), "cwasm")));
    assert_eq!(entry_name(&format!("{k}.sha256")), Some((k.as_str(), "sha256")));
    assert_eq!(entry_name(&format!("{k}.tmp12")), None);
    assert_eq!(entry_name(&format!("{}.cwasm", k.to_uppercase())), None);
    assert_eq!(entry_name("x.cwasm"), None);
}
