//! Polling helpers with clear timeout messages.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `check` until it returns `Some`, or fails after `timeout` with `what` and the last
/// observation.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let start = Instant::now();
    let mut last = String::from("(not checked yet)");
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = e,
        }
        if start.elapsed() > timeout {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
