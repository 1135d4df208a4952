//! `kwop explain KIND NAME`: asks a running host's flight recorder (`/explain` on its probe port,
//! `telemetry::flight`) what it kept about one object and says it in words (`words.rs`): why the
//! object looks as it does and what kwop last did to it. Also `kubectl kwop explain` (the binary
//! run as `kubectl-kwop`, see `cli::main`).

#[cfg(test)]
mod tests;
mod words;

use crate::telemetry::flight::{Explanation, Obj};
use anyhow::{anyhow, Context};
use clap::{Args, ValueEnum};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// The exit code when the host could not be asked (connection refused, not a kwop host).
const CANNOT_ASK: u8 = 2;

/// Shown under `kwop explain --help`.
pub const HELP: &str = "\
Examples:
  kwop explain Foo web -n demo                      why Foo demo/web looks as it does
  kwop explain deployment/web -n demo               a Deployment kwop writes for a Foo
  kwop explain Foo web -n demo -o json              the recorder's raw answer
  kwop explain Foo web -n demo --url http://127.0.0.1:9081

In a cluster, ask the replica that reconciles the object (the leader, or with --sharding the one
holding it), e.g.:
  kubectl -n kwop-system port-forward pod/$(kubectl -n kwop-system get lease kwop-leader \\
      -o jsonpath='{.spec.holderIdentity}') 8081 &
  kwop explain Foo web -n demo

As a kubectl plugin: put a link named kubectl-kwop to the kwop binary on PATH
(ln -s \"$(command -v kwop)\" ~/.local/bin/kubectl-kwop), then `kubectl kwop explain Foo web -n demo`.

Exit status: 0 when the host knows the object, 1 when it has no record of it (never reconciled
or written since the host started, or evicted), 2 when the host could not be asked (or the
command line is wrong).";

/// `kwop explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The object's kind as in its `kind:` (Foo, Deployment), or KIND/NAME. kubectl's lowercase
    /// and short names of built-in kinds work too (deployment, deploy, cm, svc).
    pub kind: String,
    /// The object's name (omit it with KIND/NAME).
    pub name: Option<String>,
    /// The object's namespace (none for a cluster-scoped object).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The host's probe address (its --health-probe-bind-address, or --metrics-bind-address:
    /// both serve /explain).
    #[arg(long, default_value = "http://127.0.0.1:8081", env = "KWOP_URL")]
    pub url: String,
    /// `text`: in words; `json`: the recorder's answer as it came.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// How long to wait for the host's answer.
    #[arg(long, default_value = "10s", value_parser = crate::vocab::units::duration)]
    pub timeout: Duration,
}

/// How `kwop explain` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Sentences.
    Text,
    /// The Explanation as JSON.
    Json,
}

/// Runs `kwop explain`; `program` is how the binary was called (`kwop`, `kubectl kwop`).
pub fn run(args: ExplainArgs, program: &str) -> ExitCode {
    let asked = match object(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{program} explain: {e:#}");
            return ExitCode::from(CANNOT_ASK);
        }
    };
    let (raw, explanation) = match ask(&args.url, &asked, args.timeout) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{program} explain: {e:#}");
            return ExitCode::from(CANNOT_ASK);
        }
    };
    let known = !explanation.as_primary.is_empty() || !explanation.written_by.is_empty();
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&raw).unwrap_or_else(|_| raw.to_string())),
        Output::Text => print!("{}", words::explain(&explanation, &asked, &args.url, SystemTime::now())),
    }
    if known {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The object asked about, from KIND NAME or KIND/NAME.
fn object(args: &ExplainArgs) -> anyhow::Result<Obj> {
    let (kind, name) = match (args.kind.split_once('/'), &args.name) {
        (Some((k, n)), None) => (k.to_string(), n.to_string()),
        (Some(_), Some(_)) => return Err(anyhow!("give KIND NAME or KIND/NAME, not both")),
        (None, Some(n)) => (args.kind.clone(), n.clone()),
        (None, None) => return Err(anyhow!("which {}? give its name: {} NAME", args.kind, args.kind)),
    };
    if kind.is_empty() || name.is_empty() {
        return Err(anyhow!("the kind and the name must not be empty"));
    }
    let namespace = args.namespace.clone().filter(|n| !n.is_empty());
    Ok(Obj { kind: kind_of(&kind), namespace, name })
}

/// A kind as the recorder names it: kubectl's lowercase, plural and short names of the
/// built-in kinds mapped to their `kind:`, another lowercase name capitalised (`foo` → `Foo`).
pub fn kind_of(s: &str) -> String {
    if s.chars().next().is_some_and(char::is_uppercase) {
        return s.to_string();
    }
    const BUILT_IN: &[(&[&str], &str)] = &[
        (&["deployment", "deployments", "deploy"], "Deployment"),
        (&["configmap", "configmaps", "cm"], "ConfigMap"),
        (&["service", "services", "svc"], "Service"),
        (&["secret", "secrets"], "Secret"),
        (&["statefulset", "statefulsets", "sts"], "StatefulSet"),
        (&["daemonset", "daemonsets", "ds"], "DaemonSet"),
        (&["replicaset", "replicasets", "rs"], "ReplicaSet"),
        (&["job", "jobs"], "Job"),
        (&["cronjob", "cronjobs", "cj"], "CronJob"),
        (&["pod", "pods", "po"], "Pod"),
        (&["serviceaccount", "serviceaccounts", "sa"], "ServiceAccount"),
        (&["ingress", "ingresses", "ing"], "Ingress"),
        (&["persistentvolumeclaim", "persistentvolumeclaims", "pvc"], "PersistentVolumeClaim"),
        (&["namespace", "namespaces", "ns"], "Namespace"),
        (&["role", "roles"], "Role"),
        (&["rolebinding", "rolebindings"], "RoleBinding"),
        (&["networkpolicy", "networkpolicies", "netpol"], "NetworkPolicy"),
        (&["horizontalpodautoscaler", "horizontalpodautoscalers", "hpa"], "HorizontalPodAutoscaler"),
        (&["poddisruptionbudget", "poddisruptionbudgets", "pdb"], "PodDisruptionBudget"),
    ];
    let lower = s.to_ascii_lowercase();
    if let Some((_, kind)) = BUILT_IN.iter().find(|(names, _)| names.contains(&lower.as_str())) {
        return kind.to_string();
    }
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// `GET {url}/explain?kind=..&namespace=..&name=..`: the answer as it came, and parsed.
fn ask(url: &str, asked: &Obj, timeout: Duration) -> anyhow::Result<(serde_json::Value, Explanation)> {
    let base = if url.contains("://") { url.to_string() } else { format!("http://{url}") };
    let endpoint = format!("{}/explain", base.trim_end_matches('/'));
    let parsed = reqwest::Url::parse(&endpoint).with_context(|| format!("--url {url:?} is not a URL"))?;
    // reqwest is built without a TLS provider (host/Cargo.toml): ring's, even for plain HTTP.
    crate::source::oci::install_crypto_provider();
    let mut query = vec![("kind", asked.kind.as_str()), ("name", asked.name.as_str())];
    if let Some(ns) = &asked.namespace {
        query.push(("namespace", ns));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let client = reqwest::Client::builder().timeout(timeout).build().context("cannot build an HTTP client")?;
        let resp = client.get(parsed).query(&query).send().await.map_err(|e| cannot_reach(url, &e))?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| cannot_reach(url, &e))?;
        if status == reqwest::StatusCode::NOT_FOUND {
            return Err(anyhow!(
                "{endpoint} answered 404: that is not a kwop host with a flight recorder (an older kwop, or \
                 another server on that port)"
            ));
        }
        if !status.is_success() {
            let head: String = body.chars().take(300).collect();
            return Err(anyhow!("{endpoint} answered {status}: {head}"));
        }
        let raw: serde_json::Value = serde_json::from_str(&body)
            .with_context(|| format!("{endpoint} did not answer JSON: is it a kwop host's probe port?"))?;
        let explanation: Explanation = serde_json::from_value(raw.clone())
            .with_context(|| format!("{endpoint} answered JSON that is not a kwop Explanation"))?;
        Ok((raw, explanation))
    })
}

/// Why the host could not be asked, with what to check.
fn cannot_reach(url: &str, e: &reqwest::Error) -> anyhow::Error {
    // reqwest's own text ("error sending request for url (…)") hides the cause: the innermost
    // error says it ("Connection refused (os error 111)").
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = s.to_string();
        source = s.source();
    }
    if e.is_timeout() {
        return anyhow!("{url} did not answer in time ({why}); --timeout waits longer");
    }
    if e.is_connect() {
        return anyhow!(
            "cannot connect to {url} ({why}). Is kwop running there? /explain is served on the address of its \
             --health-probe-bind-address (default 127.0.0.1:8081) and --metrics-bind-address; in a cluster, \
             port-forward to the pod first (kwop explain --help shows how)"
        );
    }
    anyhow!("asking {url} failed: {why}")
}
