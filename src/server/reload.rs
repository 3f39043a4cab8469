//! Re-reading files that rotate under a running server (the serving pair, the client CA): poll
//! them every interval, take a good change, keep what is in use on a bad one, and say why.
//!
//! Kubernetes updates a Secret volume by pointing its `..data` symlink at a new folder, so the
//! files are re-read by path (following symlinks) and compared by content, not by inotify events
//! or mtimes on the link.

use std::time::Duration;

/// Files re-read by [`reload_loop`].
pub trait Watched: Send + 'static {
    /// What a good change yields.
    type Loaded: Send + 'static;
    type Error: std::fmt::Display + Send + 'static;
    /// What the files hold, for the log lines ("serving certificate").
    const WHAT: &'static str;
    /// `Ok(Some(..))` when the files changed into something usable, `Ok(None)` when unchanged,
    /// `Err` when they changed into something unusable (reported once per change, not on every
    /// poll).
    fn poll(&mut self) -> Result<Option<Self::Loaded>, Self::Error>;
    /// The files could not be read at all (a rotation can delete and recreate them).
    fn is_read_error(error: &Self::Error) -> bool;
}

/// Poll `watched` every `interval` and hand a good change to `apply`; keep the previous material
/// (and log) on a bad one. Reading is file I/O, so it runs off the async worker threads.
pub async fn reload_loop<W: Watched>(
    mut watched: W,
    interval: Duration,
    mut apply: impl FnMut(&W, W::Loaded),
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read_error_logged = false;
    loop {
        ticker.tick().await;
        let result = tokio::task::spawn_blocking(move || {
            let r = watched.poll();
            (watched, r)
        })
        .await;
        let Ok((returned, result)) = result else { return };
        watched = returned;
        match result {
            Ok(None) => read_error_logged = false,
            Ok(Some(loaded)) => {
                read_error_logged = false;
                apply(&watched, loaded);
            }
            // Files missing for a moment during a rotation: say so once, not every second.
            Err(e) if W::is_read_error(&e) => {
                if !read_error_logged {
                    tracing::error!(error = %e, "{} not reloaded; keeping the previous one", W::WHAT);
                    read_error_logged = true;
                }
            }
            Err(e) => tracing::error!(error = %e, "new {} rejected; keeping the previous one", W::WHAT),
        }
    }
}
