//! Registry credentials: anonymous, or a user and password found in a docker config
//! (`.dockerconfigjson`, the content of a `kubernetes.io/dockerconfigjson` Secret).

use super::OciError;
use base64::Engine as _;
use serde::Deserialize;

/// How to authenticate to a registry.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// No credentials (public repositories, registries without auth).
    #[default]
    Anonymous,
    /// HTTP basic credentials, exchanged for a token when the registry asks for one.
    Basic {
        /// The user name.
        username: String,
        /// The password or access token.
        password: String,
    },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Auth::Anonymous => f.write_str("Anonymous"),
            // Never print a password (logs, status, panics).
            Auth::Basic { username, .. } => write!(f, "Basic {{ username: {username:?}, password: <redacted> }}"),
        }
    }
}

impl Auth {
    pub(super) fn to_client(&self) -> oci_client::secrets::RegistryAuth {
        match self {
            Auth::Anonymous => oci_client::secrets::RegistryAuth::Anonymous,
            Auth::Basic { username, password } => {
                oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone())
            }
        }
    }
}

#[derive(Deserialize, Default)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The credentials for `registry` (`host` or `host:port`, as in a reference) in a docker config:
/// `{"auths": {"host:port": {"auth": "<base64 user:password>"}}}` or `{"username": ..,
/// "password": ..}` in place of `auth`. Keys may be URLs (`https://host/v1/`); Docker Hub's
/// names (`docker.io`, `index.docker.io`, `registry-1.docker.io`) are one registry. The legacy
/// `.dockercfg` form (the `auths` map itself) is read too. A registry without an entry is
/// [`Auth::Anonymous`]; an entry that cannot be decoded is an error, not anonymous.
pub fn auth_from_docker_config(json: &[u8], registry: &str) -> Result<Auth, OciError> {
    let bad = |detail: String| OciError::InvalidCredentials { registry: registry.to_string(), detail };
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| bad(format!("the docker config is not valid JSON: {e}")))?;
    // .dockerconfigjson has {"auths": {...}}; the legacy .dockercfg is that map itself.
    let auths = value
        .get("auths")
        .unwrap_or(&value)
        .as_object()
        .ok_or_else(|| bad("the docker config has no \"auths\" object".into()))?;
    let want = normalize(registry);
    let Some((key, entry)) = auths.iter().find(|(k, _)| normalize(k) == want) else {
        return Ok(Auth::Anonymous);
    };
    let entry: DockerAuth =
        serde_json::from_value(entry.clone()).map_err(|e| bad(format!("entry {key:?} is not valid: {e}")))?;
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| bad(format!("the \"auth\" of {key:?} is not base64: {e}")))?;
        let text = String::from_utf8(decoded).map_err(|_| bad(format!("the \"auth\" of {key:?} is not UTF-8")))?;
        let (username, password) =
            text.split_once(':').ok_or_else(|| bad(format!("the \"auth\" of {key:?} is not user:password")))?;
        return Ok(Auth::Basic { username: username.to_string(), password: password.to_string() });
    }
    match (entry.username, entry.password) {
        (Some(username), Some(password)) => Ok(Auth::Basic { username, password }),
        _ => Err(bad(format!("entry {key:?} has neither \"auth\" nor \"username\" and \"password\""))),
    }
}

/// `host[:port]` of a docker config key or a reference's registry: scheme and path dropped,
/// lowercase, Docker Hub's aliases as `docker.io`.
pub(super) fn normalize(key: &str) -> String {
    let k = key.trim();
    let k = k.strip_prefix("https://").or_else(|| k.strip_prefix("http://")).unwrap_or(k);
    let host = k.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io".into(),
        _ => host,
    }
}
