//! The request memory budget when `--max-in-flight-bytes` is not given: what the container's
//! memory limit leaves once the cluster caches are loaded, so that caches plus budget fit the limit
//! whatever the cluster's size (a cluster with 20,000 ControllerRevisions caches several times what
//! a small one does). The limit is the cgroup's (`memory.max`, cgroup v2; `memory.limit_in_bytes`,
//! v1); without one the budget is `--max-in-flight-bytes`' default.
//!
//! The budget is derived at start, again once the server is ready (the caches are loaded), and
//! then every few seconds at a moment no request holds any of it, so the process's resident
//! memory is the caches and the runtime alone: a cluster that grows shrinks the budget with it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::memory_budget::MemoryBudget;

/// Below this the budget cannot admit one large review; said loudly.
const SMALL_BUDGET: u64 = 32 << 20;

/// How often the budget follows the resident memory after the server is ready.
const FOLLOW_INTERVAL: Duration = Duration::from_secs(5);

/// A cgroup v1 "no limit" is a page-rounded `i64::MAX`; anything this large is no limit.
const NO_LIMIT: u64 = 1 << 60;

/// What the budget was derived from, for the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Derivation {
    pub limit: u64,
    pub resident: u64,
    /// Kept free of both: allocator slack, buffers no request is charged for, caches that grow
    /// before the next derivation.
    pub headroom: u64,
    pub budget: u64,
}

/// The budget inside `limit` when the process holds `resident` bytes without requests: what is
/// left after the resident memory and an eighth of the limit as headroom, and never more than 5/8
/// of the limit (the chart's bound for an explicit budget: the charge is an estimate).
pub fn derive(limit: u64, resident: u64) -> Derivation {
    let headroom = limit / 8;
    let budget = limit.saturating_sub(resident).saturating_sub(headroom).min(limit / 8 * 5);
    Derivation { limit, resident, headroom, budget }
}

/// The memory limit of this process's cgroup, reading the cgroup filesystem under `root`
/// (`/sys/fs/cgroup`) for the cgroup `/proc/self/cgroup` names (`membership`): v2 `memory.max`,
/// else v1 `memory/memory.limit_in_bytes`, in the process's own cgroup or, inside a cgroup
/// namespace, at the root. `None`: no limit, or no cgroup filesystem.
pub fn cgroup_limit(root: &Path, membership: &str) -> Option<u64> {
    let mut candidates = Vec::new();
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next(), fields.next()?, fields.next()?);
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            candidates.push(root.join(path).join("memory.max"));
            candidates.push(root.join("memory.max"));
        } else if controllers.split(',').any(|c| c == "memory") {
            candidates.push(root.join("memory").join(path).join("memory.limit_in_bytes"));
            candidates.push(root.join("memory/memory.limit_in_bytes"));
        }
    }
    let text = candidates.iter().find_map(|file| std::fs::read_to_string(file).ok())?;
    text.trim().parse::<u64>().ok().filter(|&limit| limit < NO_LIMIT)
}

/// This process's resident memory (`/proc/self/statm`).
#[cfg(target_os = "linux")]
fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

#[cfg(not(target_os = "linux"))]
fn resident() -> Option<u64> {
    None
}

/// The container's memory limit, if it has one.
pub fn container_limit() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    cgroup_limit(Path::new("/sys/fs/cgroup"), &membership)
}

/// Derive the budget from `limit` and the resident memory now (`resident`: this process's, or a
/// test's stand-in); log it when `announce` (start and ready) or when it moved by more than a
/// sixteenth.
fn rederive(budget: &MemoryBudget, limit: u64, resident: &impl Fn() -> Option<u64>, announce: Option<&str>) {
    let Some(resident) = resident() else { return };
    let d = derive(limit, resident);
    let before = budget.total() as u64;
    budget.resize(d.budget as usize);
    if announce.is_none() && before.abs_diff(d.budget) <= before / 16 {
        return;
    }
    let when = announce.unwrap_or("resident memory changed");
    if d.budget < SMALL_BUDGET {
        tracing::warn!(
            limit = d.limit,
            resident = d.resident,
            headroom = d.headroom,
            budget = d.budget,
            when,
            "memory budget for requests derived from the memory limit is small: the caches leave little of the limit; raise resources.limits.memory (docs/operations.md#sizing)"
        );
    } else {
        tracing::info!(
            limit = d.limit,
            resident = d.resident,
            headroom = d.headroom,
            budget = d.budget,
            when,
            "memory budget for requests derived from the memory limit (limit - resident - headroom, at most 5/8 of the limit)"
        );
    }
}

/// The budget the server starts with: derived from `limit` and the resident memory now when the
/// budget follows the container's memory limit, else `fixed` (`--max-in-flight-bytes`, or its
/// default where no limit was found). Logged.
pub fn initial(fixed: usize, limit: Option<u64>) -> Arc<MemoryBudget> {
    initial_with(fixed, limit, &resident)
}

fn initial_with(fixed: usize, limit: Option<u64>, resident: &impl Fn() -> Option<u64>) -> Arc<MemoryBudget> {
    let budget = MemoryBudget::new(fixed);
    match limit {
        Some(limit) => rederive(&budget, limit, resident, Some("start")),
        None => tracing::info!(
            budget = fixed,
            "memory budget for requests: --max-in-flight-bytes, or its default when no container memory limit is found"
        ),
    }
    budget
}

/// Keep a derived budget inside `limit`: derive it again when `ready` first says so, then every
/// few seconds at a moment no request holds any of it. Runs until aborted.
pub async fn follow(budget: Arc<MemoryBudget>, limit: u64, ready: impl Fn() -> bool) {
    follow_with(budget, limit, ready, resident).await;
}

async fn follow_with(
    budget: Arc<MemoryBudget>,
    limit: u64,
    ready: impl Fn() -> bool,
    resident: impl Fn() -> Option<u64>,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    while !ready() {
        ticker.tick().await;
    }
    rederive(&budget, limit, &resident, Some("ready"));
    let mut ticker = tokio::time::interval(FOLLOW_INTERVAL);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        // Requests' own memory would count as cache; wait for a moment without any.
        while budget.held() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rederive(&budget, limit, &resident, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_budget_is_what_the_limit_leaves_after_the_caches_and_headroom() {
        // A small cluster: 5/8 of the limit, what the chart allowed before.
        assert_eq!(derive(256 * MIB, 20 * MIB).budget, 160 * MIB);
        // A large one: the caches come out of the budget, never out of the headroom.
        let d = derive(256 * MIB, 100 * MIB);
        assert_eq!((d.headroom, d.budget), (32 * MIB, 124 * MIB));
        assert!(d.resident + d.headroom + d.budget <= d.limit);
        // Caches past the limit leave nothing, without underflow.
        assert_eq!(derive(128 * MIB, 200 * MIB).budget, 0);
        for (limit, resident) in [(64 * MIB, 10 * MIB), (1 << 34, 3 << 30), (MIB, 0)] {
            let d = derive(limit, resident);
            assert!(d.resident + d.headroom + d.budget <= d.limit, "{d:?}");
        }
    }

    /// The resident memory is a stand-in: the test process's own is every test's at once.
    #[tokio::test]
    async fn a_derived_budget_follows_the_resident_memory_once_ready() {
        let limit = 1 << 30;
        let resident = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(100 * MIB));
        let reading = resident.clone();
        let read = move || Some(reading.load(Ordering::Relaxed));
        let budget = initial_with(1, Some(limit), &read);
        assert_eq!(budget.total() as u64, derive(limit, 100 * MIB).budget, "derived at start");
        // The caches grow while it syncs; the budget is derived again only once ready.
        resident.store(600 * MIB, Ordering::Relaxed);
        let ready = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ready.clone();
        let task =
            tokio::spawn(follow_with(budget.clone(), limit, move || flag.load(Ordering::Relaxed), read));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(budget.total() as u64, derive(limit, 100 * MIB).budget, "not derived again before ready");
        ready.store(true, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(budget.total() as u64, derive(limit, 600 * MIB).budget, "derived again once ready");
        task.abort();
    }

    #[test]
    fn the_limit_is_read_from_cgroup_v2_then_v1() {
        let root = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let file = root.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        };
        // v2, inside a cgroup namespace: the process's cgroup is the root.
        write("memory.max", "268435456\n");
        assert_eq!(cgroup_limit(root.path(), "0::/\n"), Some(256 * MIB));
        // v2 without a namespace: the process's own cgroup wins over the root's.
        write("kubepods/pod1/ctr/memory.max", "134217728\n");
        assert_eq!(cgroup_limit(root.path(), "0::/kubepods/pod1/ctr\n"), Some(128 * MIB));
        write("memory.max", "max\n");
        assert_eq!(cgroup_limit(root.path(), "0::/\n"), None, "max is no limit");
        // v1: the memory controller's file; its "unlimited" is no limit.
        let v1 = "12:cpu,cpuacct:/kubepods/ctr\n4:memory:/kubepods/ctr\n";
        assert_eq!(cgroup_limit(root.path(), v1), None, "no v1 file yet");
        write("memory/kubepods/ctr/memory.limit_in_bytes", "536870912\n");
        assert_eq!(cgroup_limit(root.path(), v1), Some(512 * MIB));
        write("memory/kubepods/ctr/memory.limit_in_bytes", "9223372036854771712\n");
        assert_eq!(cgroup_limit(root.path(), v1), None);
        assert_eq!(cgroup_limit(root.path(), ""), None, "no cgroup at all");
        write("garbage/memory.max", "lots\n");
        assert_eq!(cgroup_limit(root.path(), "0::/garbage\n"), None, "unreadable is no limit");
    }
}
