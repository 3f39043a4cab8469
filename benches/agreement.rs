//! `admission::agreement::compare` is linear in the size of what injection wrote: one SidecarSet
//! whose sidecar carries N env vars (the shape that made Istio's O(n²) patching take seconds at
//! 2,000), our Pod against the stored one with the API server's defaults, timed at N = 10, 1,000,
//! 2,000 and 4,000. Linear means the 2,000 and 4,000 times are about 2 and 4 times the 1,000 time.
//! The live side runs this once per stored Pod, in `compare_pod` with the other steps' fields.
//!
//! `cargo bench --bench agreement -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kruise_admission::admission::agreement::compare;
use kruise_admission::api::sidecarset::SidecarSet;
use serde_json::{Value, json};

/// (original, ours, stored, the SidecarSet) for a sidecar with `n` env vars.
fn case(n: usize) -> (Value, Value, Value, Arc<SidecarSet>) {
    let env: Vec<Value> =
        (0..n).map(|i| json!({"name": format!("VAR_{i}"), "value": format!("value-{i}")})).collect();
    let set = json!({"metadata": {"name": "log-agent"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "containers": [{"name": "log-agent", "image": "fluent/fluent-bit:3.2.4", "env": env,
                        "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent"}]}],
        "volumes": [{"name": "agent-config", "configMap": {"name": "agent"}}]}});
    let set = Arc::new(SidecarSet::from_value(&set).expect("a SidecarSet"));
    let original = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "shop:1"}]}});
    let hash = r#"{"log-agent":{"updateTimestamp":"2026-12-01T10:00:00Z","hash":"h","sidecarSetName":"log-agent","sidecarList":["log-agent"]}}"#;
    let mut sidecar_env = env.clone();
    sidecar_env.push(json!({"name": "IS_INJECTED", "value": "true"}));
    let mut ours = original.clone();
    ours["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "log-agent", "image": "fluent/fluent-bit:3.2.4",
        "env": sidecar_env, "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent"}]}));
    ours["spec"]["volumes"] = json!([{"name": "agent-config", "configMap": {"name": "agent"}}]);
    ours["metadata"]["annotations"] = json!({"kruise.io/sidecarset-hash": hash, "kruise.io/sidecarset-hash-without-image": hash,
        "kruise.io/sidecarset-injected-list": "log-agent"});
    let mut stored = ours.clone();
    stored["metadata"]["name"] = json!("web-x7k2p");
    for c in stored["spec"]["containers"].as_array_mut().expect("containers") {
        c["imagePullPolicy"] = json!("IfNotPresent");
        c["terminationMessagePath"] = json!("/dev/termination-log");
        c["terminationMessagePolicy"] = json!("File");
        c["resources"] = json!({});
    }
    stored["spec"]["volumes"][0]["configMap"]["defaultMode"] = json!(420);
    (original, ours, stored, set)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("agreement_compare");
    for n in [10, 1_000, 2_000, 4_000] {
        let (original, ours, stored, set) = case(n);
        let lookup = |name: &str| (name == "log-agent").then(|| set.clone());
        let result = compare(&original, &ours, &stored, &lookup);
        assert!(result.len() == 1 && result[0].agrees(), "the case agrees: {:?}", result[0].diffs);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("sidecar_env_vars", n), &n, |b, _| {
            b.iter(|| compare(black_box(&original), black_box(&ours), black_box(&stored), &lookup))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
