//! Running an unpacked image as a container runtime and a kubelet would, without either: a
//! private mount namespace, the image's root read-only (`readOnlyRootFilesystem`), the pod's
//! volumes bound in (read-only unless writable), `/proc` and the usual `/dev` nodes, `chroot`
//! into the root, no supplementary groups, the image's numeric user and group, `no_new_privs`
//! (`allowPrivilegeEscalation: false`), and no environment but the one given. Root only.
//!
//! Not emulated: network, PID and user namespaces (the process shares the test's loopback, which
//! is how it reaches the test API server), cgroups, seccomp, `/etc/hosts` and `/etc/resolv.conf`.

use crate::procs::Proc;
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A host file or folder bound into the container.
pub struct Mount {
    /// On the host.
    pub source: PathBuf,
    /// Absolute path inside the container.
    pub target: String,
    /// Whether the container may write to it (a kubelet mounts secrets and ConfigMaps read-only).
    pub writable: bool,
}

/// What to run.
pub struct Container {
    /// The unpacked image (it gets mount points created in it).
    pub root: PathBuf,
    /// Numeric user and group (the image config's `User`).
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// Entrypoint followed by its arguments; `argv[0]` is resolved inside the root.
    pub argv: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Volumes.
    pub mounts: Vec<Mount>,
}

/// The device nodes an OCI runtime provides by default.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

fn cstr(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).context("path with a NUL byte")
}

/// A `mount(2)` call prepared before the fork, so the child only makes syscalls.
struct MountCall {
    source: Option<CString>,
    target: CString,
    fstype: Option<CString>,
    flags: libc::c_ulong,
}

impl MountCall {
    fn bind(source: &Path, target: &Path) -> Result<MountCall> {
        Ok(MountCall { source: Some(cstr(source)?), target: cstr(target)?, fstype: None, flags: libc::MS_BIND })
    }
    fn read_only(target: &Path) -> Result<MountCall> {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
        Ok(MountCall { source: None, target: cstr(target)?, fstype: None, flags })
    }
}

/// Creates `target` inside `root` as a mount point of the same kind as `source`.
fn mount_point(root: &Path, target: &str, source: &Path) -> Result<PathBuf> {
    let rel = target.strip_prefix('/').filter(|r| !r.is_empty() && !r.split('/').any(|c| c == ".." || c == "."));
    let Some(rel) = rel else { bail!("mount target {target:?} must be a clean absolute path") };
    let at = root.join(rel);
    if source.is_dir() {
        std::fs::create_dir_all(&at)?;
    } else {
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if !at.exists() {
            std::fs::write(&at, b"")?;
        }
    }
    Ok(at)
}

impl Container {
    /// Starts it with output to `log`; it dies with the test binary.
    pub fn spawn(&self, name: &str, log: &Path) -> Result<Proc> {
        let Some(program) = self.argv.first() else { bail!("empty argv") };
        let root = self.root.canonicalize().with_context(|| format!("no root {}", self.root.display()))?;
        let mut calls = vec![
            // Nothing mounted here shows outside, then the root becomes a mount of its own.
            MountCall {
                source: None,
                target: CString::new("/")?,
                fstype: None,
                flags: libc::MS_REC | libc::MS_PRIVATE,
            },
            MountCall { flags: libc::MS_BIND | libc::MS_REC, ..MountCall::bind(&root, &root)? },
        ];
        let proc_at = mount_point(&root, "/proc", Path::new("/proc"))?;
        calls.push(MountCall {
            source: Some(CString::new("proc")?),
            target: cstr(&proc_at)?,
            fstype: Some(CString::new("proc")?),
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        });
        for dev in DEVICES {
            let host = Path::new("/dev").join(dev);
            let at = mount_point(&root, &format!("/dev/{dev}"), &host)?;
            calls.push(MountCall::bind(&host, &at)?);
        }
        let mut read_only = Vec::new();
        for m in &self.mounts {
            let at = mount_point(&root, &m.target, &m.source)?;
            calls.push(MountCall::bind(&m.source, &at)?);
            if !m.writable {
                read_only.push(MountCall::read_only(&at)?);
            }
        }
        calls.extend(read_only);
        // Last: the root itself read-only (its submounts keep their own flags).
        calls.push(MountCall::read_only(&root)?);

        let croot = cstr(&root)?;
        let (uid, gid) = (self.uid, self.gid);
        let mut cmd = Command::new(program);
        cmd.args(&self.argv[1..]).env_clear().envs(self.env.iter().map(|(k, v)| (k, v)));
        #[allow(unsafe_code)]
        // SAFETY: only async-signal-safe syscalls on data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let check = |rc: libc::c_int| if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
                check(libc::unshare(libc::CLONE_NEWNS))?;
                for c in &calls {
                    let opt = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
                    check(libc::mount(opt(&c.source), c.target.as_ptr(), opt(&c.fstype), c.flags, std::ptr::null()))?;
                }
                check(libc::chroot(croot.as_ptr()))?;
                check(libc::chdir(c"/".as_ptr()))?;
                check(libc::setgroups(0, std::ptr::null()))?;
                check(libc::setgid(gid))?;
                check(libc::setuid(uid))?;
                check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
                Ok(())
            });
        }
        Proc::spawn_command(name, cmd, log)
    }
}
