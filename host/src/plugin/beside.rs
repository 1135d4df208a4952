//! What runs beside a plugin on its calls without writing anything: a candidate version in
//! shadow (`shadow::Candidate` is the one there is). The runtime only carries it with the version
//! it shadows ([`LoadedPlugin::shadow`](super::LoadedPlugin)), so a swap swaps both at once; what
//! it does with a call is the shadow floor's business.

use super::cache_view::CacheView;
use super::world::{CallSpec, Request};
use serde_json::Value;
use std::sync::Arc;

/// A component run on the same calls as the active version, writing nothing.
pub trait Shadow: Send + Sync {
    /// Starts its call on the active call's request and call spec, reading `view`; `None` when
    /// the call is skipped.
    fn begin(self: Arc<Self>, req: &Request, spec: &CallSpec, view: Arc<dyn CacheView>) -> Option<Box<dyn ShadowCall>>;
}

/// A shadow call under way.
pub trait ShadowCall: Send {
    /// Compares its outcome, once it is there, with the active version's (`active`), and counts
    /// the verdict. Never waits.
    fn finish(self: Box<Self>, object: String, active: Value);
}
