//! Resident memory and CPU time of a process, from /proc.

use std::path::Path;

/// A field of /proc/PID/status in kB (e.g. `VmRSS`, `VmHWM`), as bytes.
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let v = text.lines().find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?;
    Some(v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

/// Resident set size, bytes (0 if the process is gone).
pub fn rss(pid: u32) -> u64 {
    status_kb(pid, "VmRSS").unwrap_or(0)
}

/// Anonymous resident memory (heap, stacks; not the mapped binary), bytes.
pub fn rss_anon(pid: u32) -> u64 {
    status_kb(pid, "RssAnon").unwrap_or(0)
}

/// Peak resident set size, bytes.
pub fn peak_rss(pid: u32) -> u64 {
    status_kb(pid, "VmHWM").unwrap_or(0)
}

/// Proportional set size (shared pages divided among the processes sharing them), bytes.
pub fn pss(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn clock_ticks() -> f64 {
    #[allow(unsafe_code)]
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User + system CPU time of a process (its own threads, not waited-for children), seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // The command name may contain spaces: fields start after the last ')'.
    let Some((_, rest)) = text.rsplit_once(')') else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime and stime are fields 14 and 15.
    let ticks = |i: usize| f.get(i - 3).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(14) + ticks(15)) / clock_ticks()
}

/// The pid of a running process whose command line starts with a program named `program` and
/// contains `needle` (e.g. the kube-apiserver of one plane: its flags name the plane's folder).
pub fn find_pid(program: &str, needle: &str) -> Option<u32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let args: Vec<String> = cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let prog = args.first().map(|a| Path::new(a).file_name().map(|f| f.to_string_lossy().into_owned()));
        if prog.flatten().as_deref() == Some(program) && args.iter().any(|a| a.contains(needle)) {
            return Some(pid);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_memory_and_cpu() {
        let me = std::process::id();
        assert!(super::rss(me) > 0);
        assert!(super::peak_rss(me) >= super::rss(me) / 2);
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(super::cpu_seconds(me) >= 0.0);
    }
}
