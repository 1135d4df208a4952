//! Child processes that cannot outlive the test binary.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, so every child is
//! spawned by one keeper thread that lives as long as the process. When the process ends — test
//! run over, panic, Ctrl-C, SIGKILL — the kernel sends SIGKILL to each child.

use anyhow::{anyhow, Context, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Job = (Command, mpsc::Sender<std::io::Result<Child>>);

fn keeper() -> &'static Mutex<mpsc::Sender<Job>> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("kwop-test-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // The channel is never closed: park forever so our children keep their parent.
                loop {
                    std::thread::park();
                }
            })
            .map(|_| ())
            .unwrap_or_else(|e| eprintln!("cannot start the process keeper thread: {e}"));
        Mutex::new(tx)
    })
}

/// A running child with its log file.
pub struct Proc {
    /// Short name (etcd, kube-apiserver, ...).
    pub name: String,
    /// The child.
    pub child: Child,
    /// Where its stdout/stderr go.
    pub log: PathBuf,
}

impl Proc {
    /// Starts `program args...` with output to `log`; the child dies with this process.
    pub fn spawn(name: &str, program: &Path, args: &[String], log: &Path, envs: &[(&str, &str)]) -> Result<Proc> {
        let mut cmd = Command::new(program);
        cmd.args(args);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Self::spawn_command(name, cmd, log)
    }

    /// Starts a prepared command (its own `pre_exec` hooks run first, e.g. to change root or
    /// user) with stdin closed and output to `log`; the child dies with this process. The death
    /// signal is set last, because a change of user clears it.
    pub fn spawn_command(name: &str, mut cmd: Command, log: &Path) -> Result<Proc> {
        let out = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone()?;
        let program = cmd.get_program().to_string_lossy().into_owned();
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        #[allow(unsafe_code)]
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec here.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let (tx, rx) = mpsc::channel();
        keeper()
            .lock()
            .map_err(|_| anyhow!("process keeper poisoned"))?
            .send((cmd, tx))
            .map_err(|_| anyhow!("process keeper gone"))?;
        let child = rx
            .recv()
            .map_err(|_| anyhow!("process keeper gone"))?
            .with_context(|| format!("cannot start {program}"))?;
        Ok(Proc { name: name.to_string(), child, log: log.to_path_buf() })
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: std::time::Duration) {
        let pid = self.child.id() as i32;
        #[allow(unsafe_code)]
        // SAFETY: sending a signal to our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if !self.running() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP` to freeze it, `libc::SIGCONT` to thaw it).
    pub fn signal(&self, signal: i32) {
        #[allow(unsafe_code)]
        // SAFETY: sending a signal to our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL at once.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last lines of its log, for error messages.
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.running() {
            self.stop(std::time::Duration::from_secs(5));
        }
    }
}

/// A free loopback port (bound then released; good enough for tests).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
