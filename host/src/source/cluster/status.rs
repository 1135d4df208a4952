//! A ReconcilerPlugin's status, computed from what the source fetched and what the supervisor
//! reported: conditions Ready and Degraded with one reason each, the active digest, the
//! plugin's identity and the last error.

use super::fetch::{reference_of, FetchError, Fetched};
use crate::shadow::stats::CandidateState;
use crate::source::report::{Report, State};
use crate::telemetry::health::RpCondition;
use crate::vocab::crd::{CandidateStatus, PluginIdentity, ReconcilerPluginStatus, ResolvedSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What is known about one ReconcilerPlugin.
#[derive(Debug, Default)]
pub struct Known<'a> {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The source key of `spec.source` (see `fetch::source_key`), when valid.
    pub key: Option<String>,
    /// The spec is invalid: why (the last valid spec keeps running).
    pub invalid: Option<String>,
    /// The last good fetch.
    pub fetched: Option<&'a Fetched>,
    /// A fetch of the current source under way.
    pub fetching: bool,
    /// The current source's last fetch failed.
    pub fetch_error: Option<&'a FetchError>,
    /// The supervisor's last word.
    pub report: Option<&'a Report>,
    /// Whether its caches are synced (from health).
    pub synced: bool,
    /// `spec.suspend`.
    pub suspend: bool,
    /// `spec.candidate`, when set.
    pub candidate: Option<&'a CandidateKnown>,
}

/// What is known about a ReconcilerPlugin's candidate.
#[derive(Debug, Default)]
pub struct CandidateKnown {
    /// Its source key, when valid.
    pub key: Option<String>,
    /// Why `spec.candidate` is invalid.
    pub invalid: Option<String>,
    /// sha256 of the last good fetch.
    pub fetched: Option<String>,
    /// The last fetch failed.
    pub fetch_error: Option<FetchError>,
    /// What the supervisor made of it.
    pub state: Option<CandidateState>,
}

/// `status.candidate`.
pub fn candidate(c: &CandidateKnown) -> CandidateStatus {
    let mut s = CandidateStatus {
        reference: c.key.as_deref().map(reference_of).unwrap_or_default(),
        digest: c.fetched.as_ref().map(|h| format!("sha256:{h}")),
        state: "Pulling".into(),
        ..Default::default()
    };
    let stale = |sha: &str| c.fetched.as_deref() != Some(sha);
    match (&c.invalid, &c.fetch_error, &c.state) {
        (Some(m), _, _) => (s.state, s.message) = ("InvalidSpec".into(), Some(m.clone())),
        (None, Some(e), _) => (s.state, s.message) = (e.reason.into(), Some(e.message.clone())),
        (None, None, Some(CandidateState::Running { version, sha256, stats })) if !stale(sha256) => {
            let n = stats.snapshot();
            s.state = "Running".into();
            s.version = Some(version.clone());
            (s.reconciled, s.identical, s.differing, s.failing, s.skipped) =
                (n.reconciled, n.identical, n.differing, n.failing, n.skipped);
            s.differences = n.differences;
        }
        (None, None, Some(CandidateState::Refused { sha256, reason, message })) if !stale(sha256) => {
            (s.state, s.message) = ((*reason).into(), Some(truncate(message.clone())))
        }
        (None, None, _) if c.fetched.is_some() => s.state = "Loading".into(),
        _ => {}
    }
    s
}

/// The status to write. Conditions keep their `lastTransitionTime` from `old` when their status
/// did not change.
pub fn compute(k: &Known<'_>, old: Option<&ReconcilerPluginStatus>) -> ReconcilerPluginStatus {
    let state = k.report.map(|r| &r.state);
    // A new version loading beside one that serves (a hot swap): still Ready.
    let serving = k.report.and_then(|r| r.good.as_ref()).filter(|_| k.synced);
    let running = matches!(state, Some(State::Running));
    let (ready, ready_reason, ready_msg): (bool, &str, String) = match state {
        _ if k.suspend => (false, "Suspended", "spec.suspend is true".into()),
        Some(State::Running) if k.synced => (true, "Running", "the plugin runs and its caches are synced".into()),
        Some(State::Running) => (false, "Starting", "waiting for its caches to sync".into()),
        Some(State::Rejected { reason, message, kept: false }) => (false, reason, message.clone()),
        Some(State::Conflict { message }) => (false, "Conflict", message.clone()),
        Some(State::StartFailed { reason, message }) => (false, reason, message.clone()),
        Some(State::Idle) => (false, "Standby", "this replica is not the leader".into()),
        Some(State::Loading) | Some(State::Loaded) if serving.is_some() => {
            let g = serving
                .map(|g| format!("{} {} (component sha256:{})", g.name, g.version, g.sha256))
                .unwrap_or_default();
            (true, "Swapping", format!("loading a new version; {g} keeps serving"))
        }
        Some(State::Loading) => (false, "Loading", "compiling and checking the component".into()),
        Some(State::Loaded) | Some(State::Rejected { .. }) => (false, "Starting", "starting its controller".into()),
        Some(State::Removed) | None => match (k.fetch_error, k.invalid.as_ref()) {
            (_, Some(m)) => (false, "InvalidSpec", m.clone()),
            (Some(e), _) => (false, e.reason, e.message.clone()),
            (None, None) => (false, "Pulling", "fetching the component".into()),
        },
    };
    // Degraded: something newer than what runs could not be used, or nothing can run.
    let degraded: Option<(&str, String)> = if let Some(m) = &k.invalid {
        Some(("InvalidSpec", m.clone()))
    } else if let Some(e) = k.fetch_error {
        let kept = if running { "; the last good version keeps running" } else { "" };
        Some((e.reason, format!("{}{kept}", e.message)))
    } else {
        match state {
            Some(State::Rejected { reason, message, .. }) => Some((reason, message.clone())),
            Some(State::Conflict { message }) => Some(("Conflict", message.clone())),
            Some(State::StartFailed { reason, message }) => Some((reason, message.clone())),
            _ => None,
        }
    };
    let cond = |type_: &str, ok: bool, reason: &str, message: String| {
        let status = if ok { "True" } else { "False" }.to_string();
        let kept = old
            .and_then(|o| o.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone());
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: truncate(message),
            observed_generation: k.generation,
            last_transition_time: kept.unwrap_or_else(|| Time(jiff_now())),
        }
    };
    let degraded_cond = match &degraded {
        Some((reason, msg)) => cond("Degraded", true, reason, msg.clone()),
        None => cond("Degraded", false, "AsExpected", "nothing is wrong".into()),
    };
    let good = k.report.and_then(|r| r.good.as_ref());
    let reason = match &degraded {
        Some((d, _)) if *d != ready_reason => format!("{ready_reason}, Degraded: {d}"),
        _ => ready_reason.to_string(),
    };
    ReconcilerPluginStatus {
        reason: Some(reason),
        observed_generation: k.generation,
        conditions: vec![cond("Ready", ready, ready_reason, ready_msg), degraded_cond],
        source: k.key.as_ref().map(|key| ResolvedSource {
            reference: reference_of(key),
            pinned: k.fetched.filter(|f| &f.key == key).and_then(|f| f.pinned.clone()),
        }),
        active_digest: good.map(|g| format!("sha256:{}", g.sha256)),
        plugin: good.map(|g| PluginIdentity {
            name: g.name.clone(),
            version: g.version.clone(),
            primary: g.primary.clone(),
            world: Some(g.world.clone()),
            finalizes: g.finalizes,
        }),
        last_error: degraded.map(|(_, m)| truncate(m)),
        candidate: k.candidate.map(candidate),
    }
}

/// An event to record on a ReconcilerPlugin: (Warning?, reason, message).
pub type Happened = (bool, &'static str, String);

/// What changed from the status written before to the one about to be written, as events:
/// `Pulled` (a new manifest pinned), `Swapped` (another component runs), `Degraded` (with its
/// reason, when Degraded turns True or changes reason), `Recovered`, and `Forbidden` /
/// `Conflict` when Ready turns False for one of them. Nothing on the first status (a restart
/// must not replay history).
pub fn happened(old: Option<&ReconcilerPluginStatus>, new: &ReconcilerPluginStatus) -> Vec<Happened> {
    let Some(old) = old else { return Vec::new() };
    let mut out = Vec::new();
    let pinned = |s: &ReconcilerPluginStatus| s.source.as_ref().and_then(|s| s.pinned.clone());
    if let (Some(p), true) = (pinned(new), pinned(old) != pinned(new)) {
        out.push((false, "Pulled", format!("pulled {p} (the manifest digest)")));
    }
    if let (Some(a), Some(b)) = (&old.active_digest, &new.active_digest) {
        if a != b {
            let who = new.plugin.as_ref().map(|p| format!("{} {}", p.name, p.version)).unwrap_or_default();
            out.push((false, "Swapped", format!("now running {who} (component {b}; was {a})")));
        }
    }
    let cond = |s: &ReconcilerPluginStatus, t: &str| {
        s.conditions.iter().find(|c| c.type_ == t).map(|c| (c.status == "True", c.reason.clone(), c.message.clone()))
    };
    match (cond(old, "Degraded"), cond(new, "Degraded")) {
        (o, Some((true, reason, message))) if o.as_ref().is_none_or(|(was, r, _)| !was || *r != reason) => {
            out.push((true, "Degraded", format!("{reason}: {message}")))
        }
        (Some((true, ..)), Some((false, ..))) => out.push((false, "Recovered", "nothing is wrong any more".into())),
        _ => {}
    }
    if let (Some(o), Some((false, reason, message))) = (cond(old, "Ready"), cond(new, "Ready")) {
        let changed = o.0 || o.1 != reason;
        match reason.as_str() {
            "Forbidden" if changed => out.push((true, "Forbidden", message)),
            "Conflict" if changed => out.push((true, "Conflict", message)),
            _ => {}
        }
    }
    out
}

/// Each ReconcilerPlugin's conditions as the cluster has them (the watch's copy of its status,
/// on every replica alike), for `kwop_reconcilerplugin_condition`; candidates are not objects.
pub(super) fn conditions(plugins: &std::collections::BTreeMap<String, super::Plugin>) -> Vec<RpCondition> {
    let statuses = plugins.iter().filter(|(n, _)| !super::is_candidate(n));
    let statuses = statuses.filter_map(|(n, p)| Some((n, p.obj.as_ref()?.status.as_ref()?)));
    statuses
        .flat_map(|(n, s)| {
            s.conditions.iter().map(move |c| RpCondition {
                reconcilerplugin: n.clone(),
                condition: c.type_.clone(),
                status: c.status == "True",
                reason: c.reason.clone(),
            })
        })
        .collect()
}

fn truncate(mut s: String) -> String {
    const MAX: usize = 1024;
    if s.len() > MAX {
        let mut end = MAX;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// The same status, ignoring transition times (to skip writes that change nothing).
pub fn same(a: &ReconcilerPluginStatus, b: &ReconcilerPluginStatus) -> bool {
    let strip = |s: &ReconcilerPluginStatus| {
        let mut s = s.clone();
        s.conditions.iter_mut().for_each(|c| c.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::report::Identity;

    fn report(state: State) -> Report {
        let good = Identity {
            name: "p".into(),
            version: "1".into(),
            primary: "g/v1/Foo".into(),
            sha256: "ab".into(),
            world: "kwop:reconciler@0.2.0".into(),
            finalizes: false,
        };
        Report { key: "reconcilerplugin/p".into(), good: Some(good), state, active: true }
    }

    fn cond<'a>(s: &'a ReconcilerPluginStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).expect("condition");
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_failed_fetch_beside_a_running_version_is_degraded_not_down() {
        let r = report(State::Running);
        let e = FetchError { reason: "Unreachable", message: "reg: connection refused".into(), retry: true };
        let k = Known {
            key: Some("oci:reg/p:2".into()),
            fetch_error: Some(&e),
            report: Some(&r),
            synced: true,
            ..Default::default()
        };
        let s = compute(&k, None);
        assert_eq!(cond(&s, "Ready"), ("True", "Running"));
        assert_eq!(cond(&s, "Degraded"), ("True", "Unreachable"));
        assert!(s.last_error.as_deref().is_some_and(|m| m.contains("keeps running")));
        assert_eq!(s.active_digest.as_deref(), Some("sha256:ab"));
        assert_eq!(s.source.map(|s| s.reference).as_deref(), Some("reg/p:2"));
    }

    #[test]
    fn conflicts_suspension_and_invalid_specs_have_their_reasons() {
        let r = report(State::Conflict { message: "x holds it".into() });
        let s = compute(&Known { report: Some(&r), ..Default::default() }, None);
        assert_eq!((cond(&s, "Ready"), cond(&s, "Degraded")), (("False", "Conflict"), ("True", "Conflict")));
        let r = report(State::Idle);
        let s = compute(&Known { report: Some(&r), suspend: true, ..Default::default() }, None);
        assert_eq!((cond(&s, "Ready"), cond(&s, "Degraded")), (("False", "Suspended"), ("False", "AsExpected")));
        let k = Known { invalid: Some("spec.limits.memory: bad".into()), ..Default::default() };
        assert_eq!(cond(&compute(&k, None), "Degraded"), ("True", "InvalidSpec"));
    }

    #[test]
    fn a_swap_stays_ready_and_trouble_shows_in_the_reason_column_and_as_events() {
        let swapping = report(State::Loading);
        let s = compute(&Known { report: Some(&swapping), synced: true, ..Default::default() }, None);
        assert_eq!(cond(&s, "Ready"), ("True", "Swapping"));
        assert!(s.conditions[0].message.contains("p 1 (component sha256:ab) keeps serving"), "{:?}", s.conditions);
        let r = report(State::Running);
        let e = FetchError { reason: "NotFound", message: "reg/p:typo: not found".into(), retry: true };
        let k = Known { fetch_error: Some(&e), report: Some(&r), synced: true, ..Default::default() };
        let bad = compute(&k, None);
        assert_eq!(bad.reason.as_deref(), Some("Running, Degraded: NotFound"));
        let good = compute(&Known { report: Some(&r), synced: true, ..Default::default() }, None);
        assert_eq!(good.reason.as_deref(), Some("Running"));
        // Events: the first status says nothing; a change says what changed, once.
        assert!(happened(None, &bad).is_empty());
        let ev = happened(Some(&good), &bad);
        assert_eq!(
            ev,
            vec![(
                true,
                "Degraded",
                "NotFound: reg/p:typo: not found; the last good version keeps running".to_string()
            )]
        );
        assert!(happened(Some(&bad), &bad).is_empty());
        assert_eq!(happened(Some(&bad), &good)[0].1, "Recovered");
        let mut swapped = good.clone();
        swapped.active_digest = Some("sha256:cd".into());
        assert_eq!(happened(Some(&good), &swapped)[0].1, "Swapped");
        let forbidden = report(State::Rejected { reason: "Forbidden", message: "owns Secrets".into(), kept: false });
        let f = compute(&Known { report: Some(&forbidden), ..Default::default() }, None);
        assert!(happened(Some(&good), &f).iter().any(|(w, r, m)| *w && *r == "Forbidden" && m == "owns Secrets"));
    }

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let r = report(State::Running);
        let k = Known { report: Some(&r), synced: true, ..Default::default() };
        let mut first = compute(&k, None);
        first
            .conditions
            .iter_mut()
            .for_each(|c| c.last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let again = compute(&k, Some(&first));
        assert!(same(&first, &again));
        assert!(again.conditions.iter().all(|c| c.last_transition_time.0 == k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let r2 = report(State::Loading);
        let changed = compute(&Known { report: Some(&r2), ..Default::default() }, Some(&first));
        let ready = changed.conditions.iter().find(|c| c.type_ == "Ready").expect("ready");
        assert_ne!(ready.last_transition_time.0, k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    }
}
