#!/usr/bin/env bash
# Render and validate every install path: the kustomize base (live mode, self-managed
# certificates, no CRD) and its examples (each component), the Helm chart for the default values
# (the same setup), each cert mode and folder mode, with its CRD, and every optional value on
# (host network, autoscaler, PrometheusRule); `helm lint --strict`, and what the chart must refuse
# to render; every rendered object through `kubernetes-validate --strict` (custom resources only
# warn there, so they get a structural check of their own, as do scheduling, replicas, ports and the
# PrometheusRule's metric names; promtool checks its PromQL where installed). The chart-vs-binary
# and kustomize tests of tests/manifests.rs need helm and kubectl: they are `#[ignore]`d, and
# .ci/ignored-tests.sh runs them.
#
# Tools: .ci/manifests-tools.sh (helm, kubectl, kubernetes-validate==1.37.0; cached under
# $MANIFESTS_TOOLS_DIR, default target/manifests-tools).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tools=${MANIFESTS_TOOLS_DIR:-$root/target/manifests-tools}
out=$tools/rendered
chart=charts/kruise-admission
rm -rf "$out" && mkdir -p "$out"
cd "$root"

step() { printf '\n== %s\n' "$*"; }

step "tools"
. .ci/manifests-tools.sh
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
"$helm" lint --strict "$chart" --set nameOverride=webhooks --set fullnameOverride=ka-webhooks \
    --set podAnnotations.a=b --set podLabels.team=platform --set 'extraArgs={--max-connections=2048}' \
    --set serviceAccount.annotations.a=b --set priorityClassName=system-cluster-critical \
    --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true
"$helm" lint --strict "$chart" --set hostNetwork.enabled=true --set autoscaling.enabled=true \
    --set metrics.prometheusRule.enabled=true --set priorityClass.create=false
# What the chart must refuse to render.
refuse() {
    local why=$1
    shift
    if "$helm" template kruise-admission "$chart" "$@" >/dev/null 2>&1; then
        echo "rendered, but must not: $why ($*)"
        exit 1
    fi
}
refuse "client authentication without allowed names" --set clientAuth.enabled=true
refuse "a PDB that blocks every eviction" --set replicas=1
refuse "a PDB that blocks every eviction at the autoscaler's minimum" --set autoscaling.enabled=true --set autoscaling.minReplicas=1
refuse "a host-network webhook port the kubelet uses" --set hostNetwork.enabled=true --set hostNetwork.port=10250
refuse "a host-network webhook port other webhooks take" --set hostNetwork.enabled=true --set hostNetwork.port=9443
refuse "one host port for the webhook and the metrics" --set hostNetwork.enabled=true --set hostNetwork.metricsPort=10263
refuse "a pod label that overrides the selector" --set 'podLabels.app\.kubernetes\.io/instance=other'
refuse "an unknown value" --set priorityClass.name=x
echo "refusals: ok"

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
grep -q '^kind: CustomResourceDefinition' "$out/helm-crd.yaml" || { echo "sidecarSetCRD=create renders no CRD"; exit 1; }
if grep -q '^kind: CustomResourceDefinition' "$out/helm-default.yaml"; then
    echo "helm template with the defaults renders the CRD: sidecarSetCRD=auto must leave it out where lookup sees no cluster"; exit 1
fi
echo "ok"

step "kubernetes-validate --strict"
# Custom resources have no schema there and only warn; any other warning is a failure.
custom_kinds='Certificate|Issuer|ClusterIssuer|ServiceMonitor|PrometheusRule'
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

step "custom resources, NetworkPolicies, scheduling and alerts (structure)"
"$py" - "$out"/*.yaml <<'PY'
import re
import sys
import yaml
problems = []
# Metrics the PrometheusRule may name: what the server exports (src/server/metrics.rs, each with a
# row in docs/metrics.md), the API server's admission webhook series, and Prometheus's own `up`.
exported = set(re.findall(r'"(kruise_admission_[a-z_]+)"', open("src/server/metrics.rs").read()))
documented = open("docs/metrics.md").read()
for m in sorted(exported):
    if f"`{m}`" not in documented:
        problems.append(f"{m} is exported but has no row in docs/metrics.md")
apiserver = {"apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_fail_open_count",
             "apiserver_admission_webhook_admission_duration_seconds"}
def known_metric(name):
    if name in exported | apiserver | {"up"}:
        return True
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base != name and base.endswith(("_seconds", "_operations")) and base in exported | apiserver
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "inf", "nan"}
def metric_names(expr):
    """The metric names a PromQL expression selects (strings, matchers, ranges and groupings removed)."""
    e = re.sub(r'`[^`]*`|"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    return {m.group(1) for m in re.finditer(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()", e)
            if m.group(1) not in KEYWORDS}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
# Host ports the kubelet, kube-proxy, the control plane, node exporters and other webhooks take.
HOST_PORTS = {22, 53, 80, 443, 2379, 2380, 6443, 8080, 8443, 9090, 9091, 9093, 9099, 9100, 9443,
              10248, 10249, 10250, 10255, 10256, 10257, 10258, 10259, 10260}
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
        # Egress only where networkPolicy.egress.enabled is rendered, and then only TCP to the API
        # server's ports (none at all in folder mode with provided or cert-manager certificates).
        if "egress" not in name:
            if spec.get("policyTypes") != ["Ingress"]:
                problems.append(f"{name}: policyTypes {spec.get('policyTypes')}: egress to the API server must stay open")
        else:
            egress = spec.get("egress", [])
            out = sorted((p.get("protocol", "TCP"), p["port"]) for r in egress for p in r.get("ports", []))
            wanted = [] if "folder" in name else [("TCP", 443), ("TCP", 6443)]
            if spec.get("policyTypes") != ["Ingress", "Egress"] or out != wanted or any(not r.get("ports") for r in egress):
                problems.append(f"{name}: egress {egress} (policyTypes {spec.get('policyTypes')}), expected TCP to {wanted} only")
    name = path.rsplit('/', 1)[-1]
    priority_classes = {o["metadata"]["name"] for o in objects if o.get("kind") == "PriorityClass"}
    autoscalers = [o for o in objects if o.get("kind") == "HorizontalPodAutoscaler"]
    budgets = [o for o in objects if o.get("kind") == "PodDisruptionBudget"]
    for d in deployments:
        pod = d["spec"]["template"]
        spec = pod["spec"]
        labels = pod["metadata"].get("labels") or {}
        server = spec["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in server["ports"]}
        # Scheduling: a priority class that exists (the chart's, or a system one), Guaranteed QoS,
        # a soft zone spread that selects the pods (unless the rendering replaces the spread).
        pc = spec.get("priorityClassName")
        if not pc or not (pc in priority_classes or pc in ("system-cluster-critical", "system-node-critical")):
            problems.append(f"{name}: priorityClassName {pc!r} names no rendered PriorityClass")
        for pcls in (o for o in objects if o.get("kind") == "PriorityClass"):
            if pcls.get("globalDefault") or not 0 < pcls.get("value", 0) <= 1000000000:
                problems.append(f"{name}: PriorityClass {pcls['metadata']['name']}: value {pcls.get('value')}, globalDefault {pcls.get('globalDefault')}")
        res = server.get("resources") or {}
        for r in ("cpu", "memory"):
            if not (res.get("limits") or {}).get(r) or (res.get("requests") or {}).get(r) != res["limits"][r]:
                problems.append(f"{name}: {r} request != limit: not Guaranteed QoS ({res})")
        spreads = spec.get("topologySpreadConstraints") or []
        for c in spreads:
            selector = (c.get("labelSelector") or {}).get("matchLabels") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                problems.append(f"{name}: topology spread {c.get('topologyKey')} does not select the pods")
        if "every-value" not in name and not any(c.get("topologyKey") == "topology.kubernetes.io/zone"
                                                  and c.get("whenUnsatisfiable") == "ScheduleAnyway" for c in spreads):
            problems.append(f"{name}: no soft spread across zones")
        # Replicas: the autoscaler owns them when there is one; the PDB leaves a pod evictable.
        mine = [h for h in autoscalers if h["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": d["metadata"]["name"]}]
        if len(mine) != len(autoscalers):
            problems.append(f"{name}: a HorizontalPodAutoscaler targets something else")
        if mine:
            if "replicas" in d["spec"]:
                problems.append(f"{name}: the Deployment sets replicas although an autoscaler owns them")
            fewest = mine[0]["spec"]["minReplicas"]
            if fewest > mine[0]["spec"]["maxReplicas"]:
                problems.append(f"{name}: minReplicas above maxReplicas")
        else:
            fewest = d["spec"].get("replicas", 1)
        for b in budgets:
            low = b["spec"].get("minAvailable")
            if isinstance(low, int) and low >= fewest or low == "100%":
                problems.append(f"{name}: PDB minAvailable {low} with {fewest} replicas at least: no pod can be evicted")
        # The host network: own ports, away from the host's; cluster DNS; the Service follows.
        host = spec.get("hostNetwork", False)
        if host:
            if spec.get("dnsPolicy") != "ClusterFirstWithHostNet":
                problems.append(f"{name}: hostNetwork without dnsPolicy ClusterFirstWithHostNet")
            for n, port in ports.items():
                if port in HOST_PORTS or port < 1024:
                    problems.append(f"{name}: host-network {n} port {port} is a port the host or other webhooks use")
        elif ports.get("webhook") != 9443:
            problems.append(f"{name}: webhook container port {ports.get('webhook')}, expected 9443 off the host network")
        if f"--listen=0.0.0.0:{ports.get('webhook')}" not in server["args"] or f"--metrics-listen=0.0.0.0:{ports.get('metrics')}" not in server["args"]:
            problems.append(f"{name}: --listen / --metrics-listen do not match the container ports {ports}")
        for svc in services.values():
            for sp in svc["spec"]["ports"]:
                target = sp.get("targetPort", sp["port"])
                if (ports.get(target) if isinstance(target, str) else target) not in ports.values():
                    problems.append(f"{name}: Service port {sp['name']} targets {target}, no container port")
    certificates = {f'{o["metadata"].get("namespace")}/{o["metadata"]["name"]}': o for o in objects if o.get("kind") == "Certificate"}
    webhook_names = {w["name"] for c in configurations for w in c.get("webhooks", [])}
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
        elif o.get("apiVersion") == "monitoring.coreos.com/v1" and kind == "PrometheusRule":
            rules = [r for g in o["spec"].get("groups", []) for r in g.get("rules", [])]
            seen = set()
            for r in rules:
                alert, expr = r.get("alert"), r.get("expr", "")
                w = f"{where} alert {alert}"
                if not alert or not re.fullmatch(r"KruiseAdmission[A-Za-z]+", alert) or alert in seen:
                    problems.append(f"{w}: alert names are unique KruiseAdmission<Name>")
                seen.add(alert)
                if (r.get("labels") or {}).get("severity") not in ("warning", "critical"):
                    problems.append(f"{w}: severity warning or critical expected")
                for a in ("summary", "description", "runbook_url"):
                    if not (r.get("annotations") or {}).get(a):
                        problems.append(f"{w}: no {a} annotation")
                if "for" in r and not DURATION.match(r["for"]):
                    problems.append(f"{w}: for {r['for']!r} is not a duration")
                if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                    problems.append(f"{w}: unbalanced brackets in {expr!r}")
                names = metric_names(expr)
                if not names:
                    problems.append(f"{w}: names no metric: {expr!r}")
                for m in sorted(names):
                    if not known_metric(m):
                        problems.append(f"{w}: {m} is neither exported by the server nor the API server's")
                # The API server's series are this release's webhooks, by their exact names.
                if any(m.startswith("apiserver_") for m in names):
                    match = re.search(r"name=~`([^`]*)`", expr)
                    listed = set(match.group(1).replace("\\.", ".").split("|")) if match else set()
                    if listed != webhook_names:
                        problems.append(f"{w}: selects webhooks {sorted(listed)}, rendered {sorted(webhook_names)}")
                for job in re.findall(r'job="([^"]*)"', expr):
                    if job not in services:
                        problems.append(f"{w}: job={job!r} is not a rendered Service (the ServiceMonitor's job label)")
            every = set().union(*(metric_names(r.get("expr", "")) for r in rules)) if rules else set()
            # The alerts the docs recommend: errors and fail-open answers, certificate expiry,
            # not ready, shadow disagreement.
            for needed in ("kruise_admission_http_errors_total", "apiserver_admission_webhook_fail_open_count",
                           "kruise_admission_serving_certificate_not_after_seconds",
                           "kruise_admission_certificate_renewal_failures_total", "kruise_admission_cluster_watch_synced",
                           "kruise_admission_cluster_watch_failing_seconds", "up", "kruise_admission_shadow_agreement_total"):
                if needed not in every:
                    problems.append(f"{where}: no alert on {needed}")
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
for needed in ("every-value", "host-network", "autoscaling"):
    if not any(needed in p for p in sys.argv[1:]):
        problems.append(f"no rendering helm-{needed}.yaml")
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("custom resources, NetworkPolicies, scheduling and alerts: ok")
PY
# PromQL itself, where promtool is installed (Debian's prometheus package has it): each rendering's
# rules on their own (the same alerts in two renderings would be duplicates).
if command -v promtool >/dev/null; then
    for file in "$out"/*.yaml; do
        grep -q '^kind: PrometheusRule' "$file" || continue
        "$py" - "$file" >"$tools/rules.yaml" <<'PY'
import sys, yaml
groups = [g for o in yaml.safe_load_all(open(sys.argv[1])) if o and o.get("kind") == "PrometheusRule"
          for g in o["spec"]["groups"]]
print(yaml.safe_dump({"groups": groups}))
PY
        log=$(promtool check rules "$tools/rules.yaml" 2>&1) || { echo "$(basename "$file"): $log"; exit 1; }
        echo "$(basename "$file"): promtool $(echo "$log" | grep -m1 -o 'SUCCESS.*')"
    done
else
    echo "promtool not found: PromQL syntax not checked (apt-get install prometheus)"
fi

echo
echo "manifests-check: ok"
