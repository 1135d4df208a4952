//! Why a pull or push failed, as a cluster admin reads it, with the status reason it maps to.

use oci_client::errors::{OciDistributionError, OciEnvelope, OciErrorCode};

/// A pull or push that failed. Every message names the reference.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference cannot be parsed, or cannot be used for this (a push to a digest).
    #[error("invalid OCI reference {reference:?}: {detail}")]
    InvalidReference {
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The tag, digest or repository is not in the registry (404, MANIFEST_UNKNOWN, ...).
    #[error("{reference}: not found in the registry: {detail}")]
    NotFound {
        /// The reference.
        reference: String,
        /// What the registry said.
        detail: String,
    },
    /// What the registry served does not hash to the digest it was asked for.
    #[error("{reference}: digest mismatch: the {what} should be {expected} but the registry served {actual}")]
    DigestMismatch {
        /// The reference.
        reference: String,
        /// `manifest` or `layer`.
        what: &'static str,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// The registry refused the credentials, or there were none and it wants some (401, 403).
    #[error("{reference}: the registry refused access: {detail} (check the credentials)")]
    Unauthorized {
        /// The reference.
        reference: String,
        /// What the registry said.
        detail: String,
    },
    /// The credentials (a docker config) could not be read.
    #[error("cannot read the registry credentials for {registry}: {detail}")]
    InvalidCredentials {
        /// The registry they were looked up for.
        registry: String,
        /// What is wrong with them.
        detail: String,
    },
    /// No connection, a timeout, a DNS failure, or the registry failed (5xx, 429).
    #[error("{reference}: registry unreachable: {detail}")]
    Unreachable {
        /// The reference.
        reference: String,
        /// What happened.
        detail: String,
    },
    /// The registry answered, but with an error that says nothing about the artifact (an
    /// unexpected 4xx, a protocol violation). Reported as `Unreachable`: retrying may help.
    #[error("{reference}: the registry failed the request: {detail}")]
    Registry {
        /// The reference.
        reference: String,
        /// What happened.
        detail: String,
    },
    /// Not a WebAssembly component in the CNCF wasm layout (wrong media types, layer count, a
    /// multi-platform index, a layer that is not a component).
    #[error("{reference} is not a WebAssembly component artifact: {detail}")]
    NotAComponent {
        /// The reference (or the file, for a push).
        reference: String,
        /// What was found instead.
        detail: String,
    },
    /// The component is larger than allowed (checked before downloading, from the manifest).
    #[error("{reference}: the component is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The reference.
        reference: String,
        /// Its size.
        size: u64,
        /// The limit ([`super::OciConfig::max_bytes`]).
        limit: u64,
    },
}

impl OciError {
    /// The reason for a status condition: one of `InvalidReference`, `NotFound`,
    /// `DigestMismatch`, `Unauthorized`, `Unreachable`, `NotAComponent`, `TooLarge`.
    pub fn reason(&self) -> &'static str {
        match self {
            OciError::InvalidReference { .. } => "InvalidReference",
            OciError::NotFound { .. } => "NotFound",
            OciError::DigestMismatch { .. } => "DigestMismatch",
            OciError::Unauthorized { .. } | OciError::InvalidCredentials { .. } => "Unauthorized",
            OciError::Unreachable { .. } | OciError::Registry { .. } => "Unreachable",
            OciError::NotAComponent { .. } => "NotAComponent",
            OciError::TooLarge { .. } => "TooLarge",
        }
    }

    /// Whether trying again later can succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        self.reason() == "Unreachable"
    }

    /// Maps a client error about `reference` to what it means for the admin.
    pub(crate) fn from_client(reference: &str, e: OciDistributionError) -> OciError {
        let r = reference.to_string();
        use OciDistributionError as E;
        match e {
            E::AuthenticationFailure(m) => OciError::Unauthorized { reference: r, detail: one_line(&m) },
            E::UnauthorizedError { url } => {
                OciError::Unauthorized { reference: r, detail: format!("HTTP 401 from {url}") }
            }
            E::RegistryTokenDecodeError(m) => {
                OciError::Unauthorized { reference: r, detail: format!("unusable token: {}", one_line(&m)) }
            }
            E::RegistryError { envelope, url } => from_envelope(r, &envelope, &url),
            E::ServerError { code, url, message } => {
                from_status(r, code, format!("HTTP {code} from {url}: {}", one_line(&message)))
            }
            E::RequestError(e) => from_reqwest(r, &e),
            E::DigestError(oci_client::errors::DigestError::VerificationError { expected, actual }) => {
                OciError::DigestMismatch { reference: r, what: "manifest", expected, actual }
            }
            E::ImageIndexParsingNoPlatformResolverError => OciError::NotAComponent {
                reference: r,
                detail: "it is an image index (a multi-platform image), not a single wasm artifact".into(),
            },
            E::IncompatibleLayerMediaTypeError(t) => {
                OciError::NotAComponent { reference: r, detail: format!("it has a layer of media type {t}") }
            }
            E::PullNoLayersError => OciError::NotAComponent { reference: r, detail: "it has no layers".into() },
            e @ (E::ManifestParsingError(_)
            | E::VersionedParsingError(_)
            | E::UnsupportedMediaTypeError(_)
            | E::UnsupportedSchemaVersionError(_)
            | E::JsonError(_)
            | E::ManifestEncodingError(_)) => OciError::NotAComponent {
                reference: r,
                detail: format!("unusable manifest: {}", one_line(&e.to_string())),
            },
            E::UrlParseError(m) => OciError::InvalidReference { reference: r, detail: m },
            e => OciError::Registry { reference: r, detail: one_line(&e.to_string()) },
        }
    }
}

/// An error body of the distribution spec (`{"errors":[{"code":"MANIFEST_UNKNOWN",...}]}`).
fn from_envelope(reference: String, envelope: &OciEnvelope, url: &str) -> OciError {
    let detail = envelope
        .errors
        .iter()
        .map(|e| format!("{} ({:?})", if e.message.is_empty() { "no message" } else { &e.message }, e.code))
        .collect::<Vec<_>>()
        .join("; ");
    let detail = format!("{} from {url}", one_line(&detail));
    let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
    use OciErrorCode as C;
    if codes.iter().any(|c| matches!(c, C::Unauthorized | C::Denied)) {
        OciError::Unauthorized { reference, detail }
    } else if codes.iter().any(|c| matches!(c, C::ManifestUnknown | C::BlobUnknown | C::NameUnknown | C::NotFound)) {
        OciError::NotFound { reference, detail }
    } else if codes.iter().any(|c| matches!(c, C::NameInvalid | C::TagInvalid)) {
        OciError::InvalidReference { reference, detail }
    } else if codes.iter().any(|c| matches!(c, C::Toomanyrequests)) {
        OciError::Unreachable { reference, detail }
    } else {
        OciError::Registry { reference, detail }
    }
}

/// An HTTP status without a usable error body.
pub(super) fn from_status(reference: String, code: u16, detail: String) -> OciError {
    match code {
        401 | 403 => OciError::Unauthorized { reference, detail },
        404 => OciError::NotFound { reference, detail },
        429 | 500..=599 => OciError::Unreachable { reference, detail },
        _ => OciError::Registry { reference, detail },
    }
}

fn from_reqwest(reference: String, e: &reqwest::Error) -> OciError {
    // The whole chain: "error sending request ...: client error (Connect): Connection refused".
    let mut detail = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let s_text = s.to_string();
        if !detail.contains(&s_text) {
            detail = format!("{detail}: {s_text}");
        }
        src = s.source();
    }
    match e.status() {
        Some(status) => from_status(reference, status.as_u16(), one_line(&detail)),
        None => OciError::Unreachable { reference, detail: format!("{}{}", one_line(&detail), tls_hint(&detail)) },
    }
}

/// What TLS spoken to a plain-HTTP registry fails with (rustls reading an HTTP answer as a TLS
/// record), and what to do about it.
pub(super) fn tls_hint(detail: &str) -> &'static str {
    let plain = ["InvalidContentType", "corrupt message", "wrong version number", "HTTP response to HTTPS"];
    if plain.iter().any(|p| detail.contains(p)) {
        " (the registry does not speak TLS: if it serves plain HTTP, pass --insecure-registry HOST:PORT; \
         registries on localhost/127.0.0.1 are plain HTTP by default)"
    } else {
        ""
    }
}

/// Registry messages can be long bodies: one line, at most 300 characters.
pub(super) fn one_line(s: &str) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
