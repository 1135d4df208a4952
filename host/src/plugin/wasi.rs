//! What a plugin observes from WASI. A reconcile is a pure function of its inputs, and nothing a
//! plugin calls can block; yet JS, Python and Go runtimes import WASI interfaces just to link, so
//! they are all provided — deterministically:
//!
//! | interface | what a plugin observes |
//! |---|---|
//! | `wasi:clocks/wall-clock` | `now` is one fixed instant per call: when the reconcile started ([`Determinism::started_at`], recorded with the call so a replay can give the same); `resolution` is 1 ns |
//! | `wasi:clocks/monotonic-clock` | `now` is [`STOPPED_AT`] (1 s, not 0: Go's runtime refuses a clock reading zero) for the whole call (time does not pass inside a reconcile); `resolution` is 1 ns; `subscribe-duration(0)` and `subscribe-instant(t ≤ now)` are ready at once, any later instant never is |
//! | `wasi:io/poll` | `poll` returns the pollables that are ready *now*; if none is, the call fails with "plugins cannot sleep: return requeueAfterMs"; `pollable.block` on a pollable that is not ready fails the same way; `pollable.ready` never waits |
//! | `wasi:random/random`, `insecure`, `insecure-seed` | bytes from a SHA-256 counter stream seeded by (plugin sha256, object uid, object resourceVersion): the same object version gets the same bytes, every time, on every host; one request is at most [`Limits::random_bytes`] (1 MiB by default), a larger one fails the call |
//! | `wasi:cli/environment` | no variables, one argument (`argv[0]` = `kwop-plugin`, the same for every plugin), no initial directory |
//! | `wasi:cli/stdin` | empty (end of stream at once) |
//! | `wasi:cli/stdout`, `stderr` | captured, never blocking, never failing; kept up to [`Limits::output_bytes`] per call and sent to the host's log with the plugin and object |
//! | `wasi:cli/terminal-*` | not a terminal |
//! | `wasi:cli/exit` | ends the call as a failed reconcile (a trap) |
//! | `wasi:filesystem/preopens` | no directories: no file can be opened |
//! | `wasi:sockets/*` | linked, but every TCP, UDP and name lookup is denied |
//!
//! `wasi:http` is not linked (a component importing it does not load).

use super::limits::Limits;
use super::output::Captured;
use rand_core::TryRng;
use sha2::{Digest, Sha256};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::io::poll::HostPollable;
use wasmtime_wasi::p2::{DynPollable, Pollable};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiView};

/// Why a call that tried to wait failed.
pub const CANNOT_SLEEP: &str =
    "plugins cannot sleep: return requeueAfterMs in the outcome to be called again later (a wasi:io/poll or pollable.block had nothing ready)";

/// The version of the WASI interfaces wasmtime-wasi links; the shadowing definitions below must
/// use the same names to replace them (tests fail loudly if they do not: sleeping would block).
const WASI: &str = "0.2.12";

/// The inputs that make a call's WASI deterministic. Recorded with the call so that a replay of
/// the same inputs observes the same clock and the same random bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Determinism {
    /// The instant the wall clock shows for the whole call (the reconcile's start).
    pub started_at: SystemTime,
    /// The seed of every random byte of the call.
    pub seed: [u8; 32],
}

impl Determinism {
    /// Random bytes depend on the plugin's digest and the object's uid and resourceVersion, the
    /// wall clock on `started_at`.
    pub fn new(plugin_sha256: &str, uid: &str, resource_version: &str, started_at: SystemTime) -> Self {
        let mut h = Sha256::new();
        for part in ["kwop-random-v1", plugin_sha256, uid, resource_version] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        Determinism { started_at, seed: h.finalize().into() }
    }
}

/// The builder every call's WASI context comes from.
pub(crate) fn ctx(
    d: &Determinism,
    clock_read: Option<Arc<AtomicBool>>,
    limits: &Limits,
    stdout: Captured,
    stderr: Captured,
) -> WasiCtx {
    let since_epoch = d.started_at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let seed_u128 = u128::from_le_bytes(SeededBytes::new(&d.seed, b"insecure-seed").take16());
    // No preopened directories, environment or network; stdin stays empty (the builder's
    // default). argv[0] alone, the same for every plugin: programs expect a program name (Go's
    // `flag` and `klog`, hence `k8s.io/api`, index `os.Args[0]` when they start, and panic
    // without one).
    WasiCtx::builder()
        .arg("kwop-plugin")
        .stdout(stdout)
        .stderr(stderr)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .wall_clock(FixedWallClock(since_epoch, clock_read))
        .monotonic_clock(StoppedClock)
        .secure_random(SeededBytes::new(&d.seed, b"random"))
        .insecure_random(SeededBytes::new(&d.seed, b"insecure"))
        .insecure_random_seed(seed_u128)
        .max_random_size(limits.random_bytes)
        .build()
}

/// Links WASI (wasmtime-wasi's asynchronous implementation), then replaces every function that
/// could wait with one that answers at once. Any store whose state is a [`WasiView`] (the
/// sandbox's `HostState`).
pub(crate) fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    linker.allow_shadowing(true);
    let mut clocks = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI}"))?;
    clocks.func_wrap("subscribe-duration", |mut s, (d,): (u64,)| Ok((timer(s.data_mut().ctx().table, d == 0)?,)))?;
    // The clock is stopped: only an instant at or before the one it shows has come.
    clocks
        .func_wrap("subscribe-instant", |mut s, (t,): (u64,)| Ok((timer(s.data_mut().ctx().table, t <= STOPPED_AT)?,)))?;
    let mut poll = linker.instance(&format!("wasi:io/poll@{WASI}"))?;
    poll.func_wrap("poll", |mut s, (list,): (Vec<Resource<DynPollable>>,)| {
        let table = s.data_mut().ctx().table;
        if list.is_empty() {
            wasmtime::bail!("wasi:io/poll.poll called with an empty list");
        }
        let mut ready = Vec::new();
        for (i, p) in list.into_iter().enumerate() {
            if ready_now(table, p)? {
                ready.push(u32::try_from(i)?);
            }
        }
        if ready.is_empty() {
            wasmtime::bail!("{CANNOT_SLEEP}");
        }
        Ok((ready,))
    })?;
    poll.func_wrap("[method]pollable.block", |mut s, (p,): (Resource<DynPollable>,)| {
        if !ready_now(s.data_mut().ctx().table, p)? {
            wasmtime::bail!("{CANNOT_SLEEP}");
        }
        Ok(())
    })?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Asks a pollable whether it is ready, without waiting (wasmtime-wasi's own `ready` polls once).
fn ready_now(table: &mut ResourceTable, p: Resource<DynPollable>) -> wasmtime::Result<bool> {
    let p = Resource::<DynPollable>::new_borrow(p.rep());
    let ready = futures::FutureExt::now_or_never(HostPollable::ready(table, p));
    ready.unwrap_or(Ok(false))
}

/// A clock subscription: ready at once if due, never otherwise.
struct Timer {
    due: bool,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Timer {
    async fn ready(&mut self) {
        if !self.due {
            std::future::pending::<()>().await;
        }
    }
}

fn timer(table: &mut ResourceTable, due: bool) -> wasmtime::Result<Resource<DynPollable>> {
    let t = table.push(Timer { due })?;
    wasmtime_wasi::p2::subscribe(table, t)
}

/// The call's one instant; reading it is noted (a memoized reconcile must not depend on time).
struct FixedWallClock(Duration, Option<Arc<AtomicBool>>);

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        if let Some(read) = &self.1 {
            read.store(true, Ordering::Relaxed);
        }
        self.0
    }
}

/// What the monotonic clock shows for a whole call, nanoseconds. Not 0: Go's runtime throws
/// "nanotime returning zero" at start-up.
pub(crate) const STOPPED_AT: u64 = 1_000_000_000;

struct StoppedClock;

impl HostMonotonicClock for StoppedClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        STOPPED_AT
    }
}

/// SHA-256 in counter mode: block `i` is `sha256(seed ‖ domain ‖ i)`. Simple, stable across
/// crate versions (a replay on another kwop build gets the same bytes), and fast enough for the
/// small amounts plugins ask for (hash-map seeds, UUIDs).
pub(crate) struct SeededBytes {
    key: Vec<u8>,
    counter: u64,
    block: [u8; 32],
    used: usize,
}

impl SeededBytes {
    pub(crate) fn new(seed: &[u8; 32], domain: &[u8]) -> Self {
        let mut key = seed.to_vec();
        key.extend_from_slice(domain);
        SeededBytes { key, counter: 0, block: [0; 32], used: 32 }
    }

    fn next_byte(&mut self) -> u8 {
        if self.used == 32 {
            let mut h = Sha256::new();
            h.update(&self.key);
            h.update(self.counter.to_le_bytes());
            self.block = h.finalize().into();
            self.counter += 1;
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }

    fn take16(&mut self) -> [u8; 16] {
        std::array::from_fn(|_| self.next_byte())
    }
}

impl TryRng for SeededBytes {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(u32::from_le_bytes(std::array::from_fn(|_| self.next_byte())))
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(u64::from_le_bytes(std::array::from_fn(|_| self.next_byte())))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        dst.iter_mut().for_each(|b| *b = self.next_byte());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_object_version_gets_the_same_bytes_and_another_does_not() {
        let t = SystemTime::UNIX_EPOCH;
        let a = Determinism::new("sha", "uid-1", "41", t);
        let bytes = |d: &Determinism| {
            let mut r = SeededBytes::new(&d.seed, b"random");
            let mut v = [0u8; 100];
            let _ = r.try_fill_bytes(&mut v);
            v
        };
        assert_eq!(bytes(&a), bytes(&Determinism::new("sha", "uid-1", "41", SystemTime::now())));
        assert_ne!(bytes(&a), bytes(&Determinism::new("sha", "uid-1", "42", t)));
        assert_ne!(bytes(&a), bytes(&Determinism::new("other", "uid-1", "41", t)));
        // Field boundaries count: ("ab","c") is not ("a","bc").
        assert_ne!(Determinism::new("s", "ab", "c", t).seed, Determinism::new("s", "a", "bc", t).seed);
    }
}
