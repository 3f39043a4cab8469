# shellcheck shell=bash
# Every install path we document, checked by the real API server (sourced by run.sh right after the
# cluster starts, before anything is installed): `kubectl apply --dry-run=server` of the kustomize
# base, of each example under examples/kustomize/ (one per component) and of `helm template` with
# the default values and each documented option, as rendered by .ci/render-manifests.sh. The API
# server runs its full validation and admission on each object and stores nothing. Offline schemas
# (.ci/manifests-check.sh) cannot see what only the server checks: defaulting, cross-field rules of
# the version, CEL on CRDs, and the fields this version has dropped or not yet got.

say "every install path, through the API server: kubectl apply --dry-run=server"
HELM=$(command -v helm) KUBECTL=$(command -v kubectl) BIN=$BIN bash "$ROOT/.ci/render-manifests.sh" "$WORK/rendered"
# The kinds of cert-manager and the Prometheus Operator that optional paths render.
kc apply -f "$E2E/crds/third-party.yaml" >/dev/null
for crd in certificates.cert-manager.io issuers.cert-manager.io clusterissuers.cert-manager.io \
    servicemonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com; do
    kc wait --for condition=Established --timeout=30s "crd/$crd" >/dev/null || die "CRD $crd not established"
done
for file in "$WORK"/rendered/*.yaml; do
    name=$(basename "$file" .yaml)
    objects=$(yaml_to_json <"$file")
    # A dry run creates nothing, so the namespaces the objects go into must exist already (a chart's
    # own Namespace object, where it renders one, is dry-run too).
    # shellcheck disable=SC2046
    mkns kruise-admission kruise-system $(jq -r '[.[] | .metadata.namespace // empty] | unique | .[]' <<<"$objects")
    # Each object names its namespace (or is cluster-scoped), as `kubectl apply -f` would send it.
    if out=$(kc apply --dry-run=server -f "$file" 2>&1); then
        pass "dry-run-server-$name" "$(jq -r 'length' <<<"$objects") objects accepted: $(jq -r '[.[].kind] | group_by(.) | map("\(length) \(.[0])") | join(", ")' <<<"$objects")"
    else
        fail "dry-run-server-$name" "$(grep -v -e ' (server dry run)$' -e '^Warning: ' <<<"$out" | head -5 | tr '\n' ' ' | cut -c1-600)"
    fi
done
