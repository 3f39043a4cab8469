# shellcheck shell=bash
# The two commands a user starts with, as they are, against the real API server (sourced by run.sh
# right after the cluster starts, when it has no kruise-system namespace): `helm install` of the
# chart with its default values and `kubectl apply -k manifests/`, first on a cluster without
# OpenKruise, then on one with it (its namespace and its SidecarSet CRD). Each must succeed; the
# chart must create the Role in kruise-system exactly when that namespace exists and the
# SidecarSet CRD exactly when the cluster has none (Helm's `lookup`), keep its CRD on uninstall,
# and leave OpenKruise's alone. What each installs is removed again (the webhook configurations
# name a Service no pod backs here, and the Deployment's selector differs from the chart's), so
# the rest of the suite starts from the same cluster.

helm_kc() { helm --kubeconfig "$WORK/admin.kubeconfig" "$@"; }
# install_checks CASE: helm install + uninstall, then kubectl apply -k + removal of its webhook
# configurations. CASE is without-openkruise or with-openkruise.
install_checks() {
    local case=$1 release=e2e-$1 out manifest want_role=""
    [ "$case" = with-openkruise ] && want_role=yes
    # The chart's CRD is wanted exactly where the cluster has none.
    local want_crd=yes
    [ "$case" = with-openkruise ] && want_crd=""
    if out=$(helm_kc install "$release" "$ROOT/charts/kruise-admission" --namespace "$release" --create-namespace 2>&1) \
        && manifest=$(helm_kc get manifest "$release" --namespace "$release" | yaml_to_json); then
        local roles crds
        roles=$(jq -r '[.[] | select(.metadata.namespace == "kruise-system") | "\(.kind)/\(.metadata.name)"] | join(", ")' <<<"$manifest")
        crds=$(jq -r '[.[] | select(.kind == "CustomResourceDefinition") | .metadata.name] | join(", ")' <<<"$manifest")
        if [ "${roles:+yes}" = "$want_role" ] && [ "${crds:+yes}" = "$want_crd" ]; then
            pass "helm-install-$case" "helm install with default values: $(jq length <<<"$manifest") objects; in kruise-system: ${roles:-nothing}; CRDs: ${crds:-none}"
        else
            fail "helm-install-$case" "kruise-system objects rendered: '${roles}', expected some: ${want_role:-no}; CRDs rendered: '${crds}', expected some: ${want_crd:-no}"
        fi
    else
        fail "helm-install-$case" "$(tail -3 <<<"$out")"
    fi
    if out=$(helm_kc uninstall "$release" --namespace "$release" 2>&1); then
        pass "helm-uninstall-$case" "$(tail -1 <<<"$out")"
    else
        fail "helm-uninstall-$case" "$(tail -3 <<<"$out")"
    fi
    if out=$(kubectl --kubeconfig "$WORK/admin.kubeconfig" apply -k "$MANIFESTS" 2>&1); then
        pass "kustomize-apply-$case" "kubectl apply -k manifests/: $(grep -c ' created$\| configured$\| unchanged$' <<<"$out") objects"
    else
        fail "kustomize-apply-$case" "$(grep -v ' created$\| configured$\| unchanged$' <<<"$out" | head -3)"
    fi
    # Removed again but for the Namespace (with no controller-manager, a deleted namespace never
    # finishes terminating): the suite's checks install what they need themselves.
    kubectl kustomize "$MANIFESTS" | yaml_to_json | jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind != "Namespace")]}' \
        | kc delete --ignore-not-found --wait=false -f - >/dev/null
}

say "installs with the defaults, without OpenKruise: helm install, kubectl apply -k manifests/"
kc get namespace kruise-system >/dev/null 2>&1 && die "the fresh cluster already has kruise-system"
install_checks without-openkruise
# The chart installed the CRD (the cluster had none) and keeps it on uninstall (deleting it would
# delete every SidecarSet); remove it for the case with OpenKruise, which brings its own.
check helm-uninstall-keeps-crd "helm uninstall kept the chart's SidecarSet CRD" "the CRD is gone or was never the chart's" \
    test "$(kc get crd sidecarsets.apps.kruise.io -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}' 2>/dev/null)" = keep
kc delete crd sidecarsets.apps.kruise.io --ignore-not-found >/dev/null
wait_for 60 crd_gone sidecarsets.apps.kruise.io || die "the chart's SidecarSet CRD was not deleted"

say "installs with the defaults, with OpenKruise (its namespace and SidecarSet CRD): helm install, kubectl apply -k manifests/"
mkns kruise-system
kc create -f "$E2E/crds/openkruise-sidecarset.yaml" >/dev/null
established sidecarsets.apps.kruise.io
kruise_crd=$(kc get crd sidecarsets.apps.kruise.io -o jsonpath='{.metadata.resourceVersion}')
install_checks with-openkruise
check helm-install-keeps-kruise-crd "OpenKruise's SidecarSet CRD untouched by helm install and uninstall (resourceVersion $kruise_crd)" \
    "its resourceVersion went from $kruise_crd to $(kc get crd sidecarsets.apps.kruise.io -o jsonpath='{.metadata.resourceVersion}')" \
    test "$(kc get crd sidecarsets.apps.kruise.io -o jsonpath='{.metadata.resourceVersion}')" = "$kruise_crd"
kc delete crd sidecarsets.apps.kruise.io >/dev/null
wait_for 60 crd_gone sidecarsets.apps.kruise.io || die "the stand-in OpenKruise CRD was not deleted"
