//! Live mode publishing a new snapshot after one SidecarSet changed, with 10,000 SidecarSets cached
//! (the fleet of `support::fleet`): the full rebuild it used to do (every object keyed again, every
//! SidecarSet decoded and filed again) against `Snapshot::apply` (the changed one decoded and
//! refiled, everything else shared with the previous snapshot). Both results include the SidecarSet
//! index, as `ClusterState::publish` builds it before requests see the snapshot.
//!
//! `cargo bench --bench cluster_update -- --warm-up-time 1 --measurement-time 5`

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kruise_admission::cluster::{Change, ObjectKey, Snapshot, Stored, TypeKey};
use serde_json::{Value, json};

const CACHED: usize = 10_000;

fn publish_one_change(c: &mut Criterion) {
    let pod = support::small_pod();
    let mut objects: Vec<Arc<Value>> = support::fleet(&pod, CACHED).into_iter().map(Arc::new).collect();
    let previous = Snapshot::from_shared(objects.iter().cloned());
    let _ = previous.sidecarset_index();

    // An operator edits one SidecarSet: its selector moves to another app.
    let edited = CACHED / 2;
    let mut changed = (*objects[edited]).clone();
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "edited"}});
    let changed = Arc::new(changed);
    objects[edited] = Arc::clone(&changed);
    let change = Change {
        type_key: TypeKey::new("apps.kruise.io", "SidecarSet"),
        key: ObjectKey::of(&changed).expect("a named SidecarSet"),
        object: Some(Stored::Tree(changed)),
    };

    let mut group = c.benchmark_group(format!("publish_one_changed_sidecarset_of_{CACHED}"));
    group.sample_size(10);
    group.bench_function("full_rebuild", |b| {
        b.iter(|| {
            let next = Snapshot::from_shared(objects.iter().cloned());
            black_box(next.sidecarset_index().len());
            next
        })
    });
    group.bench_function("incremental", |b| {
        b.iter(|| {
            let next = previous.apply([change.clone()]);
            black_box(next.sidecarset_index().len());
            next
        })
    });
    group.finish();
}

criterion_group!(benches, publish_one_change);
criterion_main!(benches);
