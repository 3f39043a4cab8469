# shellcheck shell=bash
# The behaviour checks of the end-to-end suite, through the API server with kubectl (sourced by
# run.sh once the server is ready). Each check prints PASS or FAIL with its reason.

# create_json JSON: create an object, print it as stored.
create_json() { kc create -o json -f - <<<"$1"; }
# dry_run_has POD-JSON JQ-CONDITION: the pod as admission would store it (server-side dry run,
# every webhook called) satisfies the condition. Used to wait until the server's watch caught up.
dry_run_has() { kc create --dry-run=server -o json -f - <<<"$1" | jq -e "$2" >/dev/null; }
# refused NAME WANT CMD...: CMD fails and its output contains WANT.
refused() {
    local name=$1 want=$2 out
    shift 2
    if out=$("$@" 2>&1); then
        fail "$name" "expected a refusal containing '$want', but it succeeded: $out"
    elif grep -qF -- "$want" <<<"$out"; then
        pass "$name" "refused: $(tr '\n' ' ' <<<"$out" | cut -c1-220)"
    else
        fail "$name" "refused, but without '$want': $out"
    fi
}
# allowed NAME REASON CMD...: CMD succeeds.
allowed() {
    local name=$1 reason=$2 out
    shift 2
    if out=$("$@" 2>&1); then pass "$name" "$reason"; else fail "$name" "expected success: $out"; fi
}

say "SidecarSet admission: defaulting, hash annotations, validation"
mkns e2e-inject e2e-daemon e2e-reinvoke e2e-workloads
sidecarset() { # sidecarset NAME NAMESPACE CONTAINER IMAGE
    jq -nc --arg name "$1" --arg ns "$2" --arg c "$3" --arg image "$4" '{
        apiVersion: "apps.kruise.io/v1alpha1", kind: "SidecarSet", metadata: {name: $name},
        spec: {selector: {matchLabels: {"e2e-sidecar": $name}}, namespace: $ns,
               containers: [{name: $c, image: $image, command: ["sleep", "3600"]}]}}'
}
if ss=$(create_json "$(sidecarset e2e-agent e2e-inject e2e-agent busybox:1.36)" 2>&1); then
    if jq -e '.spec.containers[0] as $c
        | $c.imagePullPolicy == "IfNotPresent" and $c.podInjectPolicy == "BeforeAppContainer"
          and $c.upgradeStrategy.upgradeType == "ColdUpgrade" and $c.shareVolumePolicy.type == "disabled"
          and .spec.revisionHistoryLimit == 10' <<<"$ss" >/dev/null; then
        pass sidecarset-defaulting "stored with Kruise's defaults (imagePullPolicy IfNotPresent, BeforeAppContainer, ColdUpgrade, shareVolumePolicy disabled, revisionHistoryLimit 10)"
    else
        fail sidecarset-defaulting "defaults missing from the stored object: $(jq -c '.spec' <<<"$ss")"
    fi
    HASH1=$(jq -r '.metadata.annotations["kruise.io/sidecarset-hash"] // ""' <<<"$ss")
    HASH1_NO_IMAGE=$(jq -r '.metadata.annotations["kruise.io/sidecarset-hash-without-image"] // ""' <<<"$ss")
    check sidecarset-hash-annotations "kruise.io/sidecarset-hash=$HASH1, -without-image=$HASH1_NO_IMAGE" \
        "hash annotations missing: $(jq -c .metadata.annotations <<<"$ss")" test -n "$HASH1" -a -n "$HASH1_NO_IMAGE"
else
    fail sidecarset-defaulting "create failed: $ss"
    HASH1='' HASH1_NO_IMAGE=''
fi
refused sidecarset-validation-denial 'admission webhook "vsidecarset.kb.io" denied the request' \
    kc create -f - <<<"$(sidecarset e2e-bad e2e-inject Bad_Name busybox:1.36)"

say "SidecarSet injection into Pods"
web1=$(pod_json e2e-inject web-1 e2e-sidecar=e2e-agent)
wait_for 30 dry_run_has "$web1" '.spec.containers | any(.name == "e2e-agent")' || true
injected() { # injected POD-JSON CONTAINER IMAGE HASH: sidecar first, image, IS_INJECTED, pod hash annotation
    jq -e --arg c "$2" --arg image "$3" --arg hash "$4" '
        [.spec.containers[].name] == [$c, "app"]
        and (.spec.containers[0].image == $image)
        and any(.spec.containers[0].env[]?; .name == "IS_INJECTED" and .value == "true")
        and ((.metadata.annotations["kruise.io/sidecarset-hash"] | fromjson)[$c].hash == $hash)' <<<"$1" >/dev/null
}
if pod=$(create_json "$web1" 2>&1) && injected "$pod" e2e-agent busybox:1.36 "$HASH1"; then
    pass injection "Pod e2e-inject/web-1 stored with containers [e2e-agent, app], IS_INJECTED and the SidecarSet's hash"
else
    fail injection "$(jq -c '{containers: [.spec.containers[]? | {name, image}], annotations: .metadata.annotations}' <<<"$pod" 2>/dev/null || echo "$pod")"
fi
if pod=$(create_json "$(pod_json e2e-inject web-gen- e2e-sidecar=e2e-agent)" 2>&1) && injected "$pod" e2e-agent busybox:1.36 "$HASH1"; then
    pass injection-generate-name "Pod from generateName web-gen- stored as $(jq -r .metadata.name <<<"$pod") with the sidecar"
else
    fail injection-generate-name "$(jq -c '{name: .metadata.name, containers: [.spec.containers[]? | .name]}' <<<"$pod" 2>/dev/null || echo "$pod")"
fi

say "a changed SidecarSet reaches later Pods"
if ss=$(kc patch sidecarset e2e-agent --type=json -o json \
    -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.37"}]' 2>&1); then
    HASH2=$(jq -r '.metadata.annotations["kruise.io/sidecarset-hash"]' <<<"$ss")
    HASH2_NO_IMAGE=$(jq -r '.metadata.annotations["kruise.io/sidecarset-hash-without-image"]' <<<"$ss")
    check sidecarset-hash-on-update "image change: hash $HASH1 -> $HASH2, hash-without-image unchanged" \
        "hash $HASH1 -> $HASH2, without-image $HASH1_NO_IMAGE -> $HASH2_NO_IMAGE" \
        test "$HASH2" != "$HASH1" -a "$HASH2_NO_IMAGE" = "$HASH1_NO_IMAGE"
    web2=$(pod_json e2e-inject web-2 e2e-sidecar=e2e-agent)
    if wait_for 30 dry_run_has "$web2" '.spec.containers[0].image == "busybox:1.37"' \
        && pod=$(create_json "$web2" 2>&1) && injected "$pod" e2e-agent busybox:1.37 "$HASH2"; then
        pass sidecarset-change-reaches-pods "Pod web-2 created after the update got busybox:1.37 and hash $HASH2"
    else
        fail sidecarset-change-reaches-pods "$(jq -c '[.spec.containers[]? | {name, image}]' <<<"${pod:-}" 2>/dev/null || echo "${pod:-}")"
    fi
else
    fail sidecarset-hash-on-update "update failed: $ss"
fi

say "a native sidecar (an init container with restartPolicy: Always) through the API server"
native_ss=$(jq -nc '{apiVersion: "apps.kruise.io/v1alpha1", kind: "SidecarSet", metadata: {name: "e2e-native"},
    spec: {selector: {matchLabels: {"e2e-sidecar": "e2e-native"}}, namespace: "e2e-inject",
           updateStrategy: {type: "NotUpdate"},
           initContainers: [{name: "e2e-native-proxy", image: "busybox:1.36", restartPolicy: "Always",
                             command: ["sleep", "3600"]}]}}')
if out=$(create_json "$native_ss" 2>&1); then
    native_pod=$(pod_json e2e-inject native-1 e2e-sidecar=e2e-native)
    wait_for 30 dry_run_has "$native_pod" '.spec.initContainers // [] | any(.name == "e2e-native-proxy")' || true
    # Stored as a native sidecar: an init container that kept restartPolicy Always (an API server
    # without the feature drops the field, which would make it an init container that never ends),
    # listed in the pod's sidecar list, and the app container untouched.
    if pod=$(create_json "$native_pod" 2>&1) && jq -e '
        [.spec.initContainers[]? | {name, restartPolicy}] == [{name: "e2e-native-proxy", restartPolicy: "Always"}]
        and [.spec.containers[].name] == ["app"]
        and ((.metadata.annotations["kruise.io/sidecarset-injected-list"] // "") | split(",") | index("e2e-native"))
        and ((.metadata.annotations["kruise.io/sidecarset-hash"] | fromjson)["e2e-native"].sidecarList == ["e2e-native-proxy"])' <<<"$pod" >/dev/null; then
        pass native-sidecar "Pod e2e-inject/native-1 stored with init container e2e-native-proxy (restartPolicy Always) and it in the SidecarSet's sidecarList"
    else
        fail native-sidecar "$(jq -c '{initContainers: [.spec.initContainers[]? | {name, restartPolicy}], containers: [.spec.containers[]?.name], annotations: .metadata.annotations}' <<<"$pod" 2>/dev/null || echo "$pod")"
    fi
else
    fail native-sidecar "SidecarSet with a native sidecar refused: $out"
fi

say "DaemonSet-style stamp"
stamped() { # stamped POD-JSON NODE
    jq -e --arg node "$2" '
        (.spec.nodeName // "") == ""
        and .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
            == [{matchFields: [{key: "metadata.name", operator: "In", values: [$node]}]}]
        and any(.spec.tolerations[]; .key == "node.kubernetes.io/not-ready" and .effect == "NoExecute" and .tolerationSeconds == null)
        and any(.spec.tolerations[]; .key == "node.kubernetes.io/unschedulable" and .effect == "NoSchedule")' <<<"$1" >/dev/null
}
pinned=$(pod_json e2e-daemon pinned | jq -c '.metadata.annotations = {"kruise-admission.dev/target-node": "e2e-node-1"}')
if pod=$(create_json "$pinned" 2>&1) && stamped "$pod" e2e-node-1; then
    pass daemon-stamp-annotation "target-node annotation: matchFields metadata.name In [e2e-node-1], daemon tolerations (not-ready without the 300 s DefaultTolerationSeconds added), no nodeName"
else
    fail daemon-stamp-annotation "$(jq -c '{nodeName: .spec.nodeName, affinity: .spec.affinity, tolerations: .spec.tolerations}' <<<"$pod" 2>/dev/null || echo "$pod")"
fi
bound=$(pod_json e2e-daemon bound | jq -c '.metadata.annotations = {"kruise-admission.dev/daemon-scheduling": "true"} | .spec.nodeName = "e2e-node-2"')
if pod=$(create_json "$bound" 2>&1) && stamped "$pod" e2e-node-2; then
    pass daemon-stamp-node-name "spec.nodeName e2e-node-2 + daemon-scheduling: nodeName cleared, pinned by affinity"
else
    fail daemon-stamp-node-name "$(jq -c '{nodeName: .spec.nodeName, affinity: .spec.affinity}' <<<"$pod" 2>/dev/null || echo "$pod")"
fi

say "re-invocation (reinvocationPolicy IfNeeded) patches nothing"
# A later mutating webhook (the Go floor answering a fixed patch: one label) changes every pod of
# e2e-reinvoke, so the API server calls /mutate-pod a second time on the injected pod.
echo '[{"op": "add", "path": "/metadata/labels/e2e-relabeled", "value": "yes"}]' >"$WORK/relabel.json"
start_floor relabel patch "$WORK/relabel.json"
register_floor zz-e2e-relabel "$FLOOR_PORT" relabel
kc label namespace e2e-reinvoke e2e-floor=relabel >/dev/null
create_json "$(sidecarset e2e-reinvoke e2e-reinvoke e2e-reinvoke-agent busybox:1.36)" >/dev/null
reinvoke=$(pod_json e2e-reinvoke reinvoke-1 e2e-sidecar=e2e-reinvoke)
wait_for 30 dry_run_has "$reinvoke" '.spec.containers | any(.name == "e2e-reinvoke-agent")' || true
from=$(log_lines "$WORK/logs/kruise-admission.log")
if pod=$(create_json "$reinvoke" 2>&1); then
    calls=$(server_reviews "$from" | jq -c 'select(.path == "/mutate-pod" and .object == "e2e-reinvoke/reinvoke-1") | .patch_ops' | paste -sd, -)
    if jq -e '[.spec.containers[].name] == ["e2e-reinvoke-agent", "app"] and .metadata.labels["e2e-relabeled"] == "yes"' <<<"$pod" >/dev/null \
        && [[ "$calls" =~ ^[1-9][0-9]*,0$ ]]; then
        pass reinvocation-no-patch "two /mutate-pod calls for reinvoke-1 (patch operations: $calls): the re-invocation after the relabelling webhook patched nothing; stored pod has one sidecar and the label"
    else
        # What the second call patches: the stored pod (which the API server defaulted after our
        # patch, as it did before re-invoking us) sent to /mutate-pod directly.
        again=$(jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "e2e-reinvoke",
            kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
            namespace: "e2e-reinvoke", operation: "CREATE", userInfo: {username: "e2e"},
            object: (del(.metadata.uid, .metadata.resourceVersion, .metadata.creationTimestamp) | .status = {})}}' <<<"$pod" \
            | curl -s --cacert "$WORK/server-ca.crt" -H 'Content-Type: application/json' --data-binary @- \
                "https://localhost:$WEBHOOK_PORT/mutate-pod?timeout=2s" | jq -r '.response.patch // ""' | base64 -d | jq -c . 2>/dev/null)
        fail reinvocation-no-patch "calls (patch operations): [$calls]; stored: $(jq -c '{containers: [.spec.containers[].name], labels: .metadata.labels}' <<<"$pod"); the stored pod sent again gets the patch ${again:-none}"
    fi
else
    fail reinvocation-no-patch "create failed: $pod"
fi

say "delete protection: Namespace"
mkns e2e-prot-always
kc label namespace e2e-prot-always policy.kruise.io/delete-protection=Always >/dev/null
refused protect-namespace-always 'forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always' \
    kc delete namespace e2e-prot-always --wait=false
kc label namespace e2e-prot-always policy.kruise.io/delete-protection- >/dev/null
allowed protect-namespace-unlabelled "without the label the namespace is deleted" kc delete namespace e2e-prot-always --wait=false
mkns e2e-prot-cascading
kc label namespace e2e-prot-cascading policy.kruise.io/delete-protection=Cascading >/dev/null
create_json "$(pod_json e2e-prot-cascading busy)" >/dev/null
refused protect-namespace-cascading 'policy.kruise.io/delete-protection=Cascading and active pods 1>0' \
    kc delete namespace e2e-prot-cascading --wait=false
kc -n e2e-prot-cascading delete pod busy --wait=true >/dev/null
allowed protect-namespace-cascading-empty "Cascading namespace without active pods is deleted (the server listed its pods with its own RBAC)" \
    kc delete namespace e2e-prot-cascading --wait=false

say "delete protection: CustomResourceDefinition"
refused protect-crd-always 'forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always' \
    kc delete crd widgets.e2e.kruise-admission.dev --wait=false
kc -n e2e-workloads create -f - >/dev/null <<<'{"apiVersion": "e2e.kruise-admission.dev/v1", "kind": "Gadget", "metadata": {"name": "g1"}}'
# CRD Cascading needs `list` on the CRD's resources: the README's recipe is a ClusterRole with the
# aggregation label. Kubernetes' controller-manager (not run here) folds it into the aggregated
# ClusterRole the base ships; the suite does that fold itself, for exactly that label.
agg=$(jq -r '.[] | select(.kind == "ClusterRole" and .aggregationRule) | .metadata.name' "$WORK/rbac.json" | head -1)
agg_labels=$(jq -c '.[] | select(.kind == "ClusterRole" and .aggregationRule) | .aggregationRule.clusterRoleSelectors[0].matchLabels' "$WORK/rbac.json" | head -1)
rules='[{"apiGroups": ["e2e.kruise-admission.dev"], "resources": ["gadgets"], "verbs": ["list"]}]'
if [ -n "$agg" ]; then
    jq -n --argjson labels "$agg_labels" --argjson rules "$rules" '{apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole", metadata: {name: "e2e:gadgets", labels: $labels}, rules: $rules}' | kc apply -f - >/dev/null
    kc patch clusterrole "$agg" --type=merge -p "{\"rules\": $rules}" >/dev/null
else
    echo "note: the base ships no aggregated ClusterRole for custom resources; CRD Cascading lookups will be forbidden"
fi
refused protect-crd-cascading 'policy.kruise.io/delete-protection=Cascading and active CRs 1>0' \
    kc delete crd gadgets.e2e.kruise-admission.dev --wait=false
kc -n e2e-workloads delete gadget g1 --wait=true >/dev/null
allowed protect-crd-cascading-empty "Cascading CRD without custom resources is deleted" kc delete crd gadgets.e2e.kruise-admission.dev --wait=false

say "delete protection: workloads"
deployment() { # deployment NAME REPLICAS PROTECTION
    jq -nc --arg name "$1" --argjson replicas "$2" --arg p "$3" '{apiVersion: "apps/v1", kind: "Deployment",
        metadata: {name: $name, namespace: "e2e-workloads", labels: {"policy.kruise.io/delete-protection": $p}},
        spec: {replicas: $replicas, selector: {matchLabels: {app: $name}},
               template: {metadata: {labels: {app: $name}}, spec: {containers: [{name: "app", image: "nginx:1.25"}]}}}}'
}
create_json "$(deployment keep-always 1 Always)" >/dev/null
create_json "$(deployment keep-cascading 2 Cascading)" >/dev/null
refused protect-deployment-always 'forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always' \
    kc -n e2e-workloads delete deployment keep-always --wait=false
refused protect-deployment-cascading 'policy.kruise.io/delete-protection=Cascading and replicas 2>0' \
    kc -n e2e-workloads delete deployment keep-cascading --wait=false
kc -n e2e-workloads scale deployment keep-cascading --replicas=0 >/dev/null
allowed protect-deployment-cascading-scaled "Cascading Deployment scaled to 0 is deleted" \
    kc -n e2e-workloads delete deployment keep-cascading --wait=false
ud='{"apiVersion": "apps.kruise.io/v1beta1", "kind": "UnitedDeployment",
     "metadata": {"name": "ud", "namespace": "e2e-workloads", "labels": {"policy.kruise.io/delete-protection": "Always"}},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "ud"}}}}'
kc create -f - >/dev/null <<<"$ud"
refused protect-uniteddeployment-v1beta1 'forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always' \
    kc -n e2e-workloads delete uniteddeployments.v1beta1.apps.kruise.io ud --wait=false

say "CloneSet: in-place-only rule"
cloneset='{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
  "metadata": {"name": "web", "namespace": "e2e-workloads", "labels": {"policy.kruise.io/delete-protection": "Always"}},
  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cs-web"}},
           "template": {"metadata": {"labels": {"app": "cs-web"}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}},
           "updateStrategy": {"type": "InPlaceOnly"}}}'
allowed cloneset-create "CloneSet with InPlaceOnly created" kc create -f - <<<"$cloneset"
allowed cloneset-inplace-image "image change under InPlaceOnly admitted" kc -n e2e-workloads patch cloneset web --type=json \
    -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.27"}]'
refused cloneset-inplace-env 'only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env' \
    kc -n e2e-workloads patch cloneset web --type=json \
    -p '[{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "A", "value": "1"}]}]'
refused protect-cloneset-always 'forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always' \
    kc -n e2e-workloads delete cloneset web --wait=false

say "Advanced StatefulSet: in-place-only rule"
asts() { # asts NAME READINESS-GATES-JSON
    jq -nc --arg name "$1" --argjson gates "$2" '{apiVersion: "apps.kruise.io/v1beta1", kind: "StatefulSet",
        metadata: {name: $name, namespace: "e2e-workloads"},
        spec: {replicas: 1, serviceName: $name, selector: {matchLabels: {app: $name}},
               template: {metadata: {labels: {app: $name}}, spec: {readinessGates: $gates,
                   containers: [{name: "db", image: "redis:7.0", imagePullPolicy: "Always"}]}},
               updateStrategy: {type: "RollingUpdate", rollingUpdate: {podUpdatePolicy: "InPlaceOnly"}}}}'
}
refused asts-readiness-gate-required 'InPlaceUpdateReady' kc create -f - <<<"$(asts db-nogate '[]')"
allowed asts-create "Advanced StatefulSet with InPlaceOnly and the InPlaceUpdateReady gate created" \
    kc create -f - <<<"$(asts db '[{"conditionType": "InPlaceUpdateReady"}]')"
allowed asts-inplace-image "image change under InPlaceOnly admitted" kc -n e2e-workloads patch statefulsets.apps.kruise.io db --type=json \
    -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "redis:7.2"}]'
refused asts-inplace-pull-policy 'replace /containers/0/imagePullPolicy, currently only image update is allowed for InPlaceOnly' \
    kc -n e2e-workloads patch statefulsets.apps.kruise.io db --type=json \
    -p '[{"op": "replace", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "IfNotPresent"}]'
