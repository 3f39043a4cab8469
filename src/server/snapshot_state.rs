//! The cluster snapshot `serve` decides against, loaded from a folder and reloaded when its files
//! change: its SidecarSets as the cluster stores them (`sidecarset_rules::stored`, as `dry-run`
//! reads the same folder). A folder that stops loading keeps the last good snapshot in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;

use super::metrics::Metrics;
use crate::admission::sidecarset_rules::{stored, validate::folder_conflicts};
use crate::admission::{Settings, SystemClock, ThreadRandom};
use crate::cluster::{Snapshot, files};

/// The snapshot in use; `None` until a folder has loaded once.
#[derive(Debug, Default)]
pub struct ClusterState {
    current: ArcSwapOption<Snapshot>,
}

impl ClusterState {
    pub fn snapshot(&self) -> Option<Arc<Snapshot>> {
        self.current.load_full()
    }

    pub fn is_loaded(&self) -> bool {
        self.current.load().is_some()
    }

    /// Make `snapshot` the one requests decide against, in one atomic swap (a reader holds either
    /// the previous snapshot or this one, never a mix). Its SidecarSet index is built here, before
    /// any request can see the snapshot, so no request pays for building it; live mode's
    /// snapshots come with theirs already derived from the previous one (`Snapshot::apply`).
    pub fn publish(&self, snapshot: Arc<Snapshot>) {
        let _ = snapshot.sidecarset_index();
        self.current.store(Some(snapshot));
    }

    #[cfg(test)]
    pub(crate) fn set_for_tests(&self, snapshot: Arc<Snapshot>) {
        self.publish(snapshot);
    }
}

/// One file's identity: where its symlinks lead (a ConfigMap volume swaps `..data`), its size and
/// its modification time.
type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn fingerprint(dir: &Path) -> Result<Fingerprint, String> {
    let files = files::object_files(dir).map_err(|e| e.to_string())?;
    files
        .into_iter()
        .map(|path| {
            let resolved = std::fs::canonicalize(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let meta = std::fs::metadata(&resolved).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((resolved, meta.len(), meta.modified().ok()))
        })
        .collect()
}

/// Watches one folder.
pub struct ClusterDir {
    dir: PathBuf,
    /// What the folder's SidecarSets are admitted with (the server's feature gates).
    settings: Settings,
    last: Option<Result<Fingerprint, String>>,
}

impl ClusterDir {
    pub fn new(dir: PathBuf, settings: Settings) -> Self {
        ClusterDir { dir, settings, last: None }
    }

    /// The folder's objects, its SidecarSets as the cluster stores them, and the SidecarSets given
    /// hashes here (named for a log line; `None` when there are none). The load's warnings are logged whatever follows: a typo they name is often why
    /// a SidecarSet is then refused.
    fn load(&self) -> Result<(Snapshot, Option<String>), String> {
        let (loaded, warnings) = files::load_objects(&self.dir).map_err(|e| e.to_string())?;
        for warning in &warnings {
            tracing::warn!(dir = %self.dir.display(), "{warning}");
        }
        let folder = stored::folder(loaded, &self.settings, &SystemClock, &ThreadRandom)?;
        let hashed_here = (!folder.hashed_here.is_empty()).then(|| folder.hashed_here_shown());
        Ok((Snapshot::from_shared(folder.objects), hashed_here))
    }

    /// Reload when the folder changed since the last call (always on the first). Blocking I/O.
    pub fn poll(&mut self, state: &ClusterState, metrics: &Metrics) {
        let print = fingerprint(&self.dir);
        if self.last.as_ref() == Some(&print) {
            return;
        }
        let result = match &print {
            Err(e) => Err(e.clone()),
            Ok(_) => self.load(),
        };
        self.last = Some(print);
        match result {
            Ok((snapshot, hashed_here)) => {
                for conflict in folder_conflicts(&snapshot) {
                    tracing::warn!(dir = %self.dir.display(), "{conflict}");
                }
                if let Some(hashed_here) = hashed_here {
                    tracing::info!(dir = %self.dir.display(), sidecarsets = %hashed_here,
                        "SidecarSets without hash annotations: using the ones Kruise's SidecarSet webhook would store");
                }
                metrics.record_snapshot(&snapshot, unix_now());
                tracing::info!(dir = %self.dir.display(), objects = snapshot.len(), "cluster objects loaded");
                state.publish(Arc::new(snapshot));
            }
            Err(error) if state.is_loaded() => {
                tracing::error!(dir = %self.dir.display(), %error, "cluster objects not reloaded; keeping the last good snapshot");
            }
            Err(error) => {
                tracing::error!(dir = %self.dir.display(), %error, "cluster objects cannot be loaded; not ready")
            }
        }
    }
}

/// Now, in Unix seconds (the snapshot timestamp metric).
pub(super) fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Poll the folder every `interval` (blocking reads run on the blocking pool).
pub async fn reload_loop(
    mut dir: ClusterDir,
    state: Arc<ClusterState>,
    metrics: Arc<Metrics>,
    interval: Duration,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (state, metrics) = (state.clone(), metrics.clone());
        match tokio::task::spawn_blocking(move || {
            dir.poll(&state, &metrics);
            dir
        })
        .await
        {
            Ok(returned) => dir = returned,
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloads_on_change_and_keeps_the_last_good_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let ns = |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}}}\n");
        std::fs::write(dir.path().join("a.yaml"), ns("a")).unwrap();
        let (state, metrics) = (ClusterState::default(), Metrics::new().unwrap());
        let mut watcher = ClusterDir::new(dir.path().to_path_buf(), Settings::default());
        watcher.poll(&state, &metrics);
        assert_eq!(state.snapshot().unwrap().len(), 1);
        std::fs::write(dir.path().join("b.yaml"), ns("b")).unwrap();
        watcher.poll(&state, &metrics);
        assert_eq!(state.snapshot().unwrap().len(), 2);
        std::fs::write(dir.path().join("c.yaml"), "{ not yaml: [").unwrap();
        watcher.poll(&state, &metrics);
        assert_eq!(state.snapshot().unwrap().len(), 2, "a broken folder keeps the last good snapshot");
        assert!(metrics.render().contains("kruise_admission_cluster_objects{kind=\"Namespace\"} 2"));
    }

    #[test]
    fn a_folder_that_never_loaded_leaves_the_state_unloaded() {
        let state = ClusterState::default();
        ClusterDir::new(PathBuf::from("/nonexistent/kruise-admission"), Settings::default())
            .poll(&state, &Metrics::new().unwrap());
        assert!(!state.is_loaded());
    }
}
