//! The words of `kwop explain`: an [`Explanation`] (what the flight recorder kept about one
//! object) as sentences. As a primary: which plugin reconciles it, how its last reconcile ended
//! (its verdict), what it read, wrote and recorded, and the reconciles before. As a child: which
//! plugin writes it for which primary, and what kwop last did to it and why.

use crate::telemetry::flight::{self, Explanation, Flight, Obj, Verdict, WriteNote};
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

/// The whole answer, one paragraph per role the object plays; `url` is the host that was asked.
pub fn explain(e: &Explanation, asked: &Obj, url: &str, now: SystemTime) -> String {
    let obj = e.object.as_ref().unwrap_or(asked);
    let mut out = String::new();
    if !e.as_primary.is_empty() {
        primary(&mut out, obj, &e.as_primary, now);
    }
    // Its own status writes name it too: they are told above.
    let by_others: Vec<&Flight> = e.written_by.iter().filter(|f| &f.primary != obj).collect();
    if !by_others.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        child(&mut out, obj, &by_others, now);
    }
    if out.is_empty() {
        unknown(&mut out, obj, url);
    }
    out
}

fn unknown(out: &mut String, obj: &Obj, url: &str) {
    let _ = writeln!(
        out,
        "kwop at {url} has no record of {}: it has not reconciled or written it since it started, or the \
         record was evicted (it keeps the last {} reconciles of each of at most {} primaries).",
        obj.describe(),
        flight::PER_PRIMARY,
        flight::MAX_PRIMARIES
    );
    let mut hints = vec![format!("the kind is as in the object's kind: ({}), and the name", obj.kind)];
    if obj.namespace.is_none() {
        hints.push("no -n was given: that asks for a cluster-scoped object".to_string());
    }
    hints.push(
        "with several replicas, ask the one that reconciles it (the leader, or with --sharding the one holding it)"
            .to_string(),
    );
    let _ = writeln!(out, "Check that {}.", hints.join("; "));
}

fn primary(out: &mut String, obj: &Obj, flights: &[Flight], now: SystemTime) {
    let Some(last) = flights.last() else { return };
    let by = plugin(last);
    if flights.iter().all(|f| matches!(f.verdict, Verdict::OutsideGrants { .. })) {
        let Verdict::OutsideGrants { message } = &last.verdict else { return };
        let _ = writeln!(
            out,
            "{} is outside what plugin {by} is granted, and kwop leaves it alone (last seen {}): {message}.",
            obj.describe(),
            when(&last.at, now)
        );
        return;
    }
    let _ = writeln!(out, "{} is reconciled by plugin {by}.", obj.describe());
    let mut shown = 1;
    if let Verdict::Memoized { since, checks } = &last.verdict {
        let _ = writeln!(
            out,
            "Last reconcile: nothing to do — memoized since {} ({}{}): nothing it depends on changed, so the \
             plugin was not called.",
            clock(since),
            ago(since, now).map(|a| format!("{a}, ")).unwrap_or_default(),
            count(*checks, "check")
        );
        details(out, last);
        // The in-sync reconcile the memo repeats: what the object looks like comes from it.
        if let Some(before) = flights.len().checked_sub(2).and_then(|i| flights.get(i)) {
            let _ = writeln!(out, "The plugin last ran {}: {}", stamp(before, now), verdict(before));
            details(out, before);
            shown = 2;
        }
    } else {
        let _ = writeln!(out, "Last reconcile {}: {}", stamp(last, now), verdict(last));
        details(out, last);
    }
    // One line per run of alike reconciles (a failure retried with backoff is one line).
    let mut runs: Vec<(&Flight, &Flight, String, usize)> = vec![];
    for f in flights.iter().rev().skip(shown) {
        let who = if f.plugin != last.plugin { format!("[{}] ", plugin(f)) } else { String::new() };
        let line = format!("{who}{}", short(f));
        match runs.last_mut() {
            Some((_, oldest, l, n)) if *l == line => {
                *oldest = f;
                *n += 1;
            }
            _ => runs.push((f, f, line, 1)),
        }
    }
    if !runs.is_empty() {
        let _ = writeln!(out, "Earlier (newest first):");
        for (newest, oldest, line, n) in runs {
            let at = match n {
                1 => clock(&newest.at),
                n => format!("{} to {} ({n} times)", clock(&oldest.at), clock(&newest.at)),
            };
            let _ = writeln!(out, "  {at}: {line}");
        }
    }
}

fn child(out: &mut String, obj: &Obj, flights: &[&Flight], now: SystemTime) {
    let mut writers: Vec<String> = vec![];
    for f in flights {
        let w = format!("plugin {} for {}", f.plugin, f.primary.describe());
        if !writers.contains(&w) {
            writers.push(w);
        }
    }
    let _ = writeln!(out, "{} is written by {}.", obj.describe(), writers.join(" and by "));
    // Newest first; the headline is the last write that changed something (a heal is not
    // hidden by the checks that found it in place since).
    let notes: Vec<(&Flight, &WriteNote)> = flights
        .iter()
        .rev()
        .flat_map(|f| f.writes.iter().rev().filter(|w| &w.object == obj).map(move |w| (*f, w)))
        .collect();
    let i = notes.iter().position(|(_, w)| w.result != "unchanged").unwrap_or(0);
    let Some((f, w)) = notes.get(i) else { return };
    let label = if w.result == "unchanged" { "Last check" } else { "Last change" };
    let _ = writeln!(out, "{label} {}: kwop {}", stamp(f, now), did(w, &f.primary));
    if !matches!(f.verdict, Verdict::Synced) {
        let _ = writeln!(out, "  That reconcile of {}: {}", f.primary.describe(), verdict(f));
    }
    if let Some((newest, _)) = notes.first().filter(|_| i > 0) {
        let _ = writeln!(
            out,
            "Since then kwop checked it {}, last {}: it matched what the plugin wants.",
            count(i as u64, "time"),
            when(&newest.at, now)
        );
    }
    let earlier: Vec<String> =
        notes[i + 1..].iter().map(|(f, w)| format!("  {}: {} {}{}", clock(&f.at), w.verb, w.result, why(w))).collect();
    if !earlier.is_empty() {
        let _ = writeln!(out, "Earlier writes of it (newest first):\n{}", earlier.join("\n"));
    }
}

/// What one write did to the object, as a sentence ending in a full stop.
fn did(w: &WriteNote, primary: &Obj) -> String {
    let reason = w.why.as_deref().filter(|s| !s.is_empty());
    let verb = if w.verb == "status" { "its status" } else { w.verb.as_str() };
    match w.result.as_str() {
        "created" => format!("created it{}.", reason.map(|r| format!(" ({r})")).unwrap_or_default()),
        "updated" if w.verb == "status" => {
            format!("updated its status{}.", reason.map(|r| format!(": {r}")).unwrap_or_default())
        }
        "updated" => format!(
            "re-applied it: {} (a hand edit, or a change of the {} {}) — healed.",
            differed(reason),
            primary.kind,
            primary.name
        ),
        "unchanged" => "checked it: it already matched what the plugin wants, nothing was sent.".into(),
        "deleted" => format!(
            "deleted it: the plugin no longer wants it{}.",
            reason.map(|r| format!(" ({r})")).unwrap_or_default()
        ),
        "failed" => format!(
            "tried to {verb} it and failed: {} — it may not look as the plugin wants; kwop tries again.",
            reason.unwrap_or("no reason given")
        ),
        "not-sent" => format!("did not send its {verb}: an earlier write of that reconcile failed."),
        other => format!("{verb}: {other}{}.", reason.map(|r| format!(" ({r})")).unwrap_or_default()),
    }
}

/// What differed: the host says `spec.replicas differed from the plugin's intent`; a bare field
/// list gets the words around it.
fn differed(why: Option<&str>) -> String {
    match why {
        Some(w) if w.contains("differ") => w.to_string(),
        Some(w) => format!("{w} differed from what the plugin wants"),
        None => "it differed from what the plugin wants".into(),
    }
}

/// How a reconcile ended, as a sentence.
fn verdict(f: &Flight) -> String {
    match &f.verdict {
        Verdict::Synced => synced(f),
        Verdict::Memoized { since, checks } => format!(
            "nothing to do — memoized since {} ({}): nothing it depends on changed.",
            clock(since),
            count(*checks, "check")
        ),
        Verdict::Failed { stage, message } if stage == "call" => {
            format!("failed: the plugin call was ended: {message} — kwop retries with backoff.")
        }
        Verdict::Failed { message, .. } => {
            format!("failed: the plugin reported a failure: {message} — {}", after_failure(f))
        }
        Verdict::Rejected { reason, message } => format!(
            "refused: kwop's write fence rejected the plugin's outcome ({reason}): {message} — nothing was \
             written; kwop retries with backoff."
        ),
        Verdict::WriteFailed { message } => {
            format!("a write failed: {message} — the writes after it were not sent; kwop tries again.")
        }
        Verdict::OutsideGrants { message } => {
            format!("outside what plugin {} is granted: {message}; kwop leaves it alone.", f.plugin)
        }
        Verdict::Finalizing { message } => format!("being deleted: {message}."),
        Verdict::Deferred { message } => format!("not reconciled then: {message}."),
    }
}

/// What follows a failure the plugin reported: when kwop tries again.
fn after_failure(f: &Flight) -> String {
    match f.requeue_after_ms {
        Some(ms) => format!("kwop tries again in {}.", human(Duration::from_millis(ms))),
        None => "kwop retries with backoff if the plugin asked for a retry, else when the object changes.".into(),
    }
}

fn synced(f: &Flight) -> String {
    if f.writes.is_empty() {
        return "synced: the plugin ran and asked for no writes.".into();
    }
    if f.writes.iter().all(|w| w.result == "unchanged") {
        return "synced: the plugin ran and everything already matched what it wants — nothing was sent.".into();
    }
    format!("synced: the plugin ran and kwop wrote its outcome ({}).", tally(&f.writes))
}

/// `1 created, 2 unchanged`.
fn tally(writes: &[WriteNote]) -> String {
    let mut seen: Vec<(&str, usize)> = vec![];
    for w in writes {
        match seen.iter_mut().find(|(r, _)| *r == w.result) {
            Some((_, n)) => *n += 1,
            None => seen.push((&w.result, 1)),
        }
    }
    seen.iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
}

/// One line for the list of earlier reconciles.
fn short(f: &Flight) -> String {
    match &f.verdict {
        Verdict::Synced if f.writes.is_empty() => "synced, no writes".into(),
        Verdict::Synced => format!("synced ({})", tally(&f.writes)),
        Verdict::Memoized { since, checks } => format!("memoized since {} ({})", clock(since), count(*checks, "check")),
        Verdict::Failed { message, .. } => format!("failed: {message}"),
        Verdict::Rejected { reason, message } => format!("refused ({reason}): {message}"),
        Verdict::WriteFailed { message } => format!("a write failed: {message}"),
        Verdict::OutsideGrants { message } => format!("outside its grants: {message}"),
        Verdict::Finalizing { message } => format!("being deleted: {message}"),
        Verdict::Deferred { message } => format!("deferred: {message}"),
    }
}

/// The indented lines under a reconcile: inputs, writes, events, shadow, next.
fn details(out: &mut String, f: &Flight) {
    if !f.inputs.is_empty() {
        let inputs: Vec<String> = f
            .inputs
            .iter()
            .map(|i| match &i.resource_version {
                Some(rv) => format!("{}@{rv} ({})", i.object.describe(), i.how),
                None if i.how == "get" => format!("{} (get, not found)", i.object.describe()),
                None => format!("{} ({})", i.object.describe(), i.how),
            })
            .collect();
        let _ = writeln!(out, "  inputs: {}", inputs.join(", "));
    }
    if !f.writes.is_empty() {
        let writes: Vec<String> =
            f.writes.iter().map(|w| format!("{} {}: {}{}", w.verb, w.object.describe(), w.result, why(w))).collect();
        let _ = writeln!(out, "  writes: {}", writes.join("; "));
    }
    if !f.events.is_empty() {
        let _ = writeln!(out, "  events: {}", f.events.join("; "));
    }
    if let Some(s) = &f.shadow {
        let _ = writeln!(out, "  shadow: {s}");
    }
    if let Some(ms) = f.requeue_after_ms {
        let _ = writeln!(out, "  next: again in {}", human(Duration::from_millis(ms)));
    }
}

fn why(w: &WriteNote) -> String {
    w.why.as_deref().filter(|s| !s.is_empty()).map(|r| format!(" ({r})")).unwrap_or_default()
}

/// `guest-foo 0.2.0 (sha256:0123456789ab…)`.
fn plugin(f: &Flight) -> String {
    let digest = f.digest.as_deref().map(|d| {
        let short: String = d.chars().take("sha256:".len() + 12).collect();
        format!(" ({short}…)")
    });
    format!("{} {}{}", f.plugin, f.version, digest.unwrap_or_default())
}

/// `12s ago (at 19:21:03 UTC, trace 4bf9…, 3 ms)`.
fn stamp(f: &Flight, now: SystemTime) -> String {
    let mut extra = vec![];
    if let Some(t) = &f.trace_id {
        extra.push(format!("trace {t}"));
    }
    if f.duration_ms > 0.0 {
        extra.push(format!("took {:.0} ms", f.duration_ms.max(1.0)));
    }
    let extra = if extra.is_empty() { String::new() } else { format!(", {}", extra.join(", ")) };
    match ago(&f.at, now) {
        Some(a) => format!("{a} (at {}{extra})", clock(&f.at)),
        None => format!("at {}{extra}", clock(&f.at)),
    }
}

/// `19:20:01 UTC (3m 4s ago)`.
fn when(at: &str, now: SystemTime) -> String {
    match ago(at, now) {
        Some(a) => format!("{} ({a})", clock(at)),
        None => clock(at),
    }
}

/// The time of day of an RFC 3339 instant (`19:20:01 UTC`), or the text as it is.
fn clock(at: &str) -> String {
    match (humantime::parse_rfc3339_weak(at), at.get(11..19)) {
        (Ok(_), Some(t)) => format!("{t} UTC"),
        _ => at.to_string(),
    }
}

/// `12s ago`; `just now` under a second (or when the clocks disagree).
fn ago(at: &str, now: SystemTime) -> Option<String> {
    let t = humantime::parse_rfc3339_weak(at).ok()?;
    Some(match now.duration_since(t) {
        Ok(d) if d.as_secs() > 0 => format!("{} ago", human(d)),
        _ => "just now".into(),
    })
}

/// A duration to the second (`3m 4s`), or in ms under a second.
fn human(d: Duration) -> String {
    if d.as_secs() == 0 {
        return format!("{} ms", d.as_millis());
    }
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn count(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}
