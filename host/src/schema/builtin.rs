//! Built-in kinds checked offline through their k8s-openapi types: a value of the wrong type
//! (`data.replicas: 1` in a ConfigMap) fails to deserialize, with the field's path; a value of
//! the right type the API server would still refuse (a name, a port, an Ingress host) is caught
//! by [`super::values`].
//!
//! Fields the type does not know are not reported (k8s-openapi ignores them), and a missing
//! required field is not an error: a server-side apply intent is merged into the live object.

use super::structural::Violation;
use k8s_openapi::api::{apps, autoscaling, batch, core, networking, policy, rbac};
use serde_json::Value;

/// Checks `object` if its apiVersion/kind is a built-in kind this table knows; `None` otherwise.
pub fn check(api_version: &str, kind: &str, object: &Value) -> Option<Vec<Violation>> {
    macro_rules! kinds {
        ($($t:ty),* $(,)?) => {
            $(
                if api_version == <$t as k8s_openapi::Resource>::API_VERSION && kind == <$t as k8s_openapi::Resource>::KIND {
                    let wrong_type = typed::<$t>(object);
                    return Some(if wrong_type.is_empty() { super::values::check(kind, object) } else { wrong_type });
                }
            )*
        };
    }
    kinds!(
        core::v1::ConfigMap,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        core::v1::Pod,
        core::v1::PersistentVolumeClaim,
        core::v1::Namespace,
        apps::v1::Deployment,
        apps::v1::StatefulSet,
        apps::v1::DaemonSet,
        apps::v1::ReplicaSet,
        batch::v1::Job,
        batch::v1::CronJob,
        networking::v1::Ingress,
        networking::v1::NetworkPolicy,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        policy::v1::PodDisruptionBudget,
        autoscaling::v2::HorizontalPodAutoscaler,
    );
    None
}

fn typed<T: serde::de::DeserializeOwned>(object: &Value) -> Vec<Violation> {
    match serde_path_to_error::deserialize::<_, T>(object) {
        Ok(_) => vec![],
        Err(e) => {
            let message = e.inner().to_string();
            if message.starts_with("missing field") {
                return vec![];
            }
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { format!(".{path}") };
            vec![Violation { path, message }]
        }
    }
}
