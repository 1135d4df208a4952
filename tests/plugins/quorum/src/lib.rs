//! A test plugin for admission of `/scale` (`kwop:reconciler@0.2`). It validates Foos as a
//! quorum-based store would (a RedisCluster, etcd): its `validate`
//! - refuses an even `spec.replicas` with a violation of `spec.replicas` ("a quorum needs an odd
//!   number of replicas (4 asked, 3 now)": the numbers come from the object and the old object,
//!   so a test sees both as the host composed them);
//! - traps (panics) on `spec.replicas` 9, for the failure policy;
//! - refuses an even `status.availableReplicas` with a violation of that field: a status write
//!   that reached it would be refused, so a test can show status writes never do.
//!
//! Its `reconcile` changes nothing.

use kwop_guest::{Admission, Context, Failure, Gvk, Info, Meta, Outcome, Reconciler, Violation};
use serde::Deserialize;

#[derive(Deserialize)]
struct Foo {
    #[allow(dead_code)]
    metadata: Meta,
    #[serde(default)]
    spec: FooSpec,
    #[serde(default)]
    status: Option<FooStatus>,
}

#[derive(Deserialize, Default)]
struct FooSpec {
    replicas: Option<i64>,
}

#[derive(Deserialize, Default)]
struct FooStatus {
    #[serde(rename = "availableReplicas")]
    available_replicas: Option<i64>,
}

struct Quorum;

impl Reconciler for Quorum {
    type Primary = Foo;

    fn info() -> Info {
        Info::new("quorum", "1", Gvk::new("samplecontroller.k8s.io", "v1alpha1", "Foo")).validates()
    }

    fn validate(req: Admission<Foo>, _ctx: &Context) -> Result<Vec<String>, Vec<Violation>> {
        let asked = req.object.spec.replicas.unwrap_or(1);
        if asked == 9 {
            panic!("quorum cannot count to nine");
        }
        let mut violations = Vec::new();
        if asked % 2 == 0 {
            let now = req.old.as_ref().and_then(|o| o.spec.replicas).map(|n| format!(", {n} now")).unwrap_or_default();
            violations.push(Violation::field(
                "spec.replicas",
                format!("a quorum needs an odd number of replicas ({asked} asked{now})"),
            ));
        }
        if let Some(n) = req.object.status.and_then(|s| s.available_replicas).filter(|n| n % 2 == 0) {
            violations.push(Violation::field("status.availableReplicas", format!("{n} available is no quorum")));
        }
        if violations.is_empty() {
            Ok(vec![])
        } else {
            Err(violations)
        }
    }

    fn reconcile(_foo: Foo, _ctx: &Context) -> Result<Outcome, Failure> {
        Ok(Outcome::new())
    }
}

kwop_guest::export!(Quorum);
