#!/usr/bin/env bash
# Build the fuzz corpora at run time from the committed fixtures (tests/fixtures/) and examples/
# into fuzz/corpus/<target>/ (ignored by git), so that even a short run
# starts from real shapes: recorded reviews as captured, and reviews made from them and from the
# workload manifests for every webhook of the routing table (Pod CREATEs the example SidecarSets
# select, SidecarSet CREATE/UPDATE in both versions, CloneSet / Advanced StatefulSet / Advanced
# DaemonSet CREATE/UPDATE/DELETE, protected DELETEs); SidecarSets as YAML and JSON text; objects
# for the patch target; the committed reproducers of past findings (fuzz/regressions/<target>/).
# Usage: fuzz/seed.sh [fixtures dir, default tests/fixtures]. PYTHON picks the interpreter; without PyYAML only the seeds
# that need no YAML parsing are written.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
repo="$(cd .. && pwd)"
fixtures="${1:-$repo/tests/fixtures}"
[ -d "$fixtures/recorded" ] || { echo "no fixtures at $fixtures" >&2; exit 1; }

mkdir -p corpus/review corpus/sidecarset corpus/patch
"${PYTHON:-python3}" - "$fixtures" "$repo" <<'PY'
import copy, hashlib, json, pathlib, random, sys
try:
    import yaml
except ImportError:
    yaml = None
    print("seed: PyYAML missing, YAML-derived seeds skipped", file=sys.stderr)

fixtures, repo = map(pathlib.Path, sys.argv[1:3])
out = pathlib.Path("corpus")
rng = random.Random(11)
MAX = 64 * 1024  # bigger seeds make libFuzzer's default max_len, and every mutation, slow


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) <= MAX:
        (out / target / hashlib.sha1(data).hexdigest()).write_bytes(data)


def put_object(obj):
    """A patch seed: the object, a NUL, then bytes that drive the mutations."""
    if isinstance(obj, dict) and obj:
        put("patch", json.dumps(obj).encode() + b"\0" + bytes(rng.randrange(256) for _ in range(64)))


def review(group, version, kind, resource, operation, obj=None, old=None, namespace="", name="", sub=""):
    request = {
        "uid": f"seed-{rng.randrange(1 << 32):08x}",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": namespace, "name": name, "operation": operation,
        "userInfo": {"username": "seed", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": False,
    }
    if sub:
        request["subResource"] = sub
    put("review", json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))


def documents(path):
    text = path.read_text(errors="replace")
    if path.suffix == ".json":
        try:
            return [json.loads(text)]
        except ValueError:
            return []
    if yaml is None:
        return []
    try:
        return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    except yaml.YAMLError:
        return []


# Labels (and namespaces) the example SidecarSets select, and the DaemonSet stamp's annotation.
SELECTED = [
    ("shop", {"mesh.example.com/inject": "true"}),
    ("default", {"logging": "fluent-bit"}),
    ("default", {"mesh.example.com/agent": "hot"}),
    ("default", {"auth.example.com/token": "refresh"}),
    ("shop", {"mesh.example.com/inject": "true", "logging": "fluent-bit", "auth.example.com/token": "refresh", "mesh.example.com/agent": "enabled"}),
]
TARGET_NODE = "kruise-admission.dev/target-node"
PROTECTION = "policy.kruise.io/delete-protection"


def pod_creates(pod):
    """Pod CREATEs the example SidecarSets inject into / the stamp pins."""
    for namespace, labels in SELECTED:
        p = copy.deepcopy(pod)
        meta = p.setdefault("metadata", {})
        meta["namespace"] = namespace
        meta.setdefault("labels", {}).update(labels)
        review("", "v1", "Pod", "pods", "CREATE", p, namespace=namespace)
    p = copy.deepcopy(pod)
    p.setdefault("metadata", {}).setdefault("annotations", {})[TARGET_NODE] = "worker-1"
    review("", "v1", "Pod", "pods", "CREATE", p, namespace="default")


def workload_reviews(obj):
    """A Deployment/StatefulSet/DaemonSet as the Kruise workloads, and protected DELETEs."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    name = (obj.get("metadata") or {}).get("name") or "seed"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(template.get("metadata") or {}),
           "spec": copy.deepcopy(template.get("spec") or {})}
    pod_creates(pod)
    put_object(pod)
    changed = copy.deepcopy(obj)
    containers = (changed["spec"]["template"].get("spec") or {}).get("containers") or []
    for c in containers:
        if isinstance(c, dict):
            c["image"] = str(c.get("image", "x")) + "-next"
            c.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "250m"
    kruise = {"Deployment": ["CloneSet", "StatefulSet"], "StatefulSet": ["StatefulSet", "CloneSet"], "DaemonSet": ["DaemonSet"]}.get(kind, [])
    for kruise_kind in kruise:
        resource = kruise_kind.lower() + "s"
        for version in ("v1alpha1", "v1beta1"):
            def as_kruise(o, strategy):
                o = copy.deepcopy(o)
                o["apiVersion"] = f"apps.kruise.io/{version}"
                o["kind"] = kruise_kind
                o["spec"]["updateStrategy"] = {"type": strategy, **({"inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}} if strategy != "ReCreate" else {})}
                return o
            for strategy in ("InPlaceIfPossible", "InPlaceOnly"):
                new, old = as_kruise(changed, strategy), as_kruise(obj, strategy)
                review("apps.kruise.io", version, kruise_kind, resource, "CREATE", old, namespace=namespace, name=name)
                review("apps.kruise.io", version, kruise_kind, resource, "UPDATE", new, old, namespace=namespace, name=name)
            if kruise_kind == "CloneSet":
                new = as_kruise(obj, "InPlaceIfPossible")
                new["spec"]["scaleStrategy"] = {"podsToDelete": ["web-0", "web-1", "gone"]}
                review("apps.kruise.io", version, kruise_kind, resource, "UPDATE", new, as_kruise(obj, "InPlaceIfPossible"), namespace=namespace, name=name)
            if kruise_kind != "DaemonSet":
                for value in ("Always", "Cascading"):
                    o = as_kruise(obj, "ReCreate")
                    o.setdefault("metadata", {}).setdefault("labels", {})[PROTECTION] = value
                    review("apps.kruise.io", version, kruise_kind, resource, "DELETE", None, o, namespace=namespace, name=name)
    if kind in ("Deployment", "StatefulSet"):
        resource = kind.lower() + "s"
        for value in ("Always", "Cascading"):
            o = copy.deepcopy(obj)
            o.setdefault("metadata", {}).setdefault("labels", {})[PROTECTION] = value
            review("apps", "v1", kind, resource, "DELETE", None, o, namespace=namespace, name=name)
            if kind == "Deployment":
                o["kind"] = "ReplicaSet"
                review("apps", "v1", "ReplicaSet", "replicasets", "DELETE", None, o, namespace=namespace, name=name)


def protected_deletes():
    for value in ("Always", "Cascading", "always"):
        labels = {PROTECTION: value}
        for ns in ("default", "shop", "empty"):
            o = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {**labels, "kubernetes.io/metadata.name": ns}}}
            review("", "v1", "Namespace", "namespaces", "DELETE", None, o, name=ns)
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "servicemonitors.monitoring.coreos.com", "labels": labels},
               "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                        "names": {"kind": "ServiceMonitor", "plural": "servicemonitors", "listKind": "ServiceMonitorList"},
                        "versions": [{"name": "v1", "served": True, "storage": True}]}}
        review("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", "DELETE", None, crd, name=crd["metadata"]["name"])
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default", "labels": labels}, "spec": {"ports": [{"port": 80}]}}
        review("", "v1", "Service", "services", "DELETE", None, svc, namespace="default", name="web")
        ing = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web", "namespace": "default", "labels": labels}, "spec": {}}
        review("networking.k8s.io", "v1", "Ingress", "ingresses", "DELETE", None, ing, namespace="default", name="web")
        ud = {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment", "metadata": {"name": "ud", "namespace": "default", "labels": labels}, "spec": {"replicas": 2}}
        review("apps.kruise.io", "v1alpha1", "UnitedDeployment", "uniteddeployments", "DELETE", None, ud, namespace="default", name="ud")


def sidecarset_seeds(sidecarset):
    """A SidecarSet as cluster-folder text (YAML and JSON) and as CREATE/UPDATE reviews in both versions."""
    put("sidecarset", json.dumps(sidecarset, indent=1))
    if yaml is not None:
        put("sidecarset", yaml.safe_dump(sidecarset, sort_keys=False))
    put_object(sidecarset)
    for version in ("v1beta1", "v1alpha1"):
        s = copy.deepcopy(sidecarset)
        s["apiVersion"] = f"apps.kruise.io/{version}"
        if version == "v1alpha1":
            s.setdefault("spec", {})["namespace"] = "shop"
        review("apps.kruise.io", version, "SidecarSet", "sidecarsets", "CREATE", s, name=s.get("metadata", {}).get("name", ""))
        new = copy.deepcopy(s)
        for c in new.get("spec", {}).get("containers") or []:
            if isinstance(c, dict):
                c["image"] = str(c.get("image", "x")) + "-next"
        review("apps.kruise.io", version, "SidecarSet", "sidecarsets", "UPDATE", new, s, name=s.get("metadata", {}).get("name", ""))


def sidecarset_from(template_spec, name, i):
    """A SidecarSet whose sidecars are a real workload's containers (real shapes for parsing and injection)."""
    labels = SELECTED[i % len(SELECTED)][1]
    containers = []
    for c in template_spec.get("containers") or []:
        if isinstance(c, dict):
            c = copy.deepcopy(c)
            c["name"] = "sc-" + str(c.get("name", "c"))
            c["podInjectPolicy"] = ["BeforeAppContainer", "AfterAppContainer"][i % 2]
            c["shareVolumePolicy"] = {"type": ["enabled", "disabled"][i % 2]}
            if i % 3 == 0:
                c["transferEnv"] = [{"sourceContainerName": "app", "envName": "POD_IP"}]
            containers.append(c)
    spec = {"selector": {"matchLabels": labels}, "containers": containers,
            "initContainers": copy.deepcopy(template_spec.get("initContainers") or []),
            "volumes": copy.deepcopy(template_spec.get("volumes") or []),
            "updateStrategy": {"type": "NotUpdate"}}
    return {"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": f"{name}-{i}"}, "spec": spec}


reviews = sorted((fixtures / "recorded").glob("*.json")) + sorted((repo / "examples/reviews").glob("*.json"))
for path in reviews:
    raw = path.read_bytes()
    put("review", raw)
    try:
        r = json.loads(raw)
    except ValueError:
        continue
    request = r.get("request") or {}
    for key in ("object", "oldObject"):
        put_object(request.get(key))
    obj = request.get("object")
    if isinstance(obj, dict) and obj.get("kind") == "Pod" and request.get("operation") == "CREATE":
        pod_creates(obj)
    if isinstance(obj, dict):
        workload_reviews(obj)

protected_deletes()

# The cluster folder's own files, whole and one document at a time.
for path in sorted((repo / "examples/cluster").rglob("*.y*ml")):
    text = path.read_text()
    put("sidecarset", text)
    for part in text.split("\n---"):
        put("sidecarset", part)
    for doc in documents(path):
        if doc.get("kind") == "SidecarSet":
            sidecarset_seeds(doc)

# Workload manifests: documents one at a time (whole files are mostly far over MAX), their objects,
# reviews made from them, and SidecarSets built from their containers.
i = 0
for path in sorted((fixtures / "workloads").glob("*")):
    for doc in documents(path):
        put_object(doc)
        workload_reviews(doc)
        template = ((doc.get("spec") or {}).get("template") or {}).get("spec")
        if isinstance(template, dict) and i < 40:
            sidecarset_seeds(sidecarset_from(template, (doc.get("metadata") or {}).get("name", "w"), i))
            i += 1
        if yaml is not None:
            put("sidecarset", yaml.safe_dump(doc, sort_keys=False))
PY
# Inputs that once found a bug (docs/RELIABILITY.md, findings), so every run replays them first.
for target in review sidecarset patch; do
    if [ -d "regressions/$target" ]; then cp regressions/"$target"/* "corpus/$target/"; fi
    echo "seeded $target: $(ls "corpus/$target" | wc -l) inputs"
done
